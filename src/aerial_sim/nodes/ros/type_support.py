"""Message type support without the message code generator: 0.04 CPU s less per node process.

The first publisher or subscription of a message type loads its C type support through
``rosidl_generator_py.import_type_support`` (each generated message class's ``__import_type_support__``). The
package's ``__init__`` also imports its code generator, ``generate_py`` (the ``lark`` grammar parser and
``empy``, 0.04 CPU s), which only a build of message packages uses; when that import fails it goes on without it.
:func:`load_without_generator` registers the package with only ``import_type_support``, as that ``__init__``
leaves it without a generator: the same type support modules, loaded by the same function.
"""

from __future__ import annotations

import importlib.util
import sys

PACKAGE = "rosidl_generator_py"


def load_without_generator() -> None:
    """Register :data:`PACKAGE` with ``import_type_support`` only, unless it is imported already (or missing)."""
    if PACKAGE in sys.modules:
        return
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return
    package = importlib.util.module_from_spec(spec)  # its __path__, not its __init__
    sys.modules[PACKAGE] = package
    try:
        from rosidl_generator_py.import_type_support_impl import import_type_support
    except ImportError:
        del sys.modules[PACKAGE]  # the package's own __init__ will say what is missing
        return
    package.import_type_support = import_type_support
    package.__all__ = ["import_type_support"]
