"""Sphinx configuration of aerial_sim's documentation (``tools/dev.sh docs``; test/test_docs.py).

Pages are MyST Markdown (``doc/*.md``); the root toctree globs ``*``, so a page dropped into
``doc/`` is in the site with no index edit. The API reference is generated at build time from the
package's docstrings (autosummary, recursive over ``aerial_sim``): modules that are added, split or
renamed appear without anyone listing them. rosdoc2 finds this folder (``doc/`` with a conf.py) too.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import types
from pathlib import Path

from sphinx.util import logging as sphinx_logging

DOC = Path(__file__).resolve().parent
REPO = DOC.parent
sys.path.insert(0, str(REPO / "src"))  # the source tree, as tools/dev.sh's venv sees it
sys.path.insert(0, str(DOC / "_ext"))
os.environ.setdefault("AERIAL_SIM_SHARE", str(REPO))
# autosummary imports every submodule it finds, aerial_sim.__main__ included, and that one runs the
# command line (printing its usage into the build log). An empty stand-in is imported instead.
sys.modules.setdefault("aerial_sim.__main__", types.ModuleType("aerial_sim.__main__"))

project = "aerial_sim"
author = "aerial_sim developers"
copyright = "aerial_sim developers"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.viewcode",
    "benchmark_results",  # doc/_ext: renders doc/results/*.json (written by the benchmarks)
    "py_xref_shortcut",  # doc/_ext: a type hint no object could match skips the fuzzy search (a tenth of the build)
    "py_definitions_from_ast",  # doc/_ext: definitions' line spans from the syntax tree, not a token walk
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "results"]
templates_path = ["_templates"]

# MyST: `[text](page.md#heading)` links resolve to headings down to level 3, and `(label)=` targets
# are reached from any page with `[text](#label)`.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "dollarmath"]

# API reference: one page per module, generated into doc/api/ (not committed) on every build.
# autosummary never deletes a page it generated, so a module that was renamed or split would leave
# its old page behind (and a "not in any toctree" warning): the folder starts empty each build.
shutil.rmtree(DOC / "api", ignore_errors=True)
autosummary_generate = True
autosummary_imported_members = False
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
# No module writes PEP 484 type comments (`# type: (int) -> str`): looking for them re-read and re-parsed
# the source of every documented function, about a tenth of the build.
autodoc_use_type_comments = False
# Type hints are shown as written: resolving every annotation (numpy.typing, rclpy types, forward
# references under `from __future__ import annotations`) into cross-references would only add
# noise-level warnings under nitpicky mode, which stays off (the test's -W covers broken links,
# missing pages and docstring markup, not unresolvable third-party type names).
nitpicky = False

html_theme = "alabaster"
html_title = "aerial_sim"
html_static_path: list[str] = []


# The house docstring style writes Markdown-like lists straight after the line that introduces
# them ("Images:\n- depth ...") and ends them with no blank line. reStructuredText needs a blank
# line around a list, or it reports "Block quote ends without a blank line" and renders the items
# as one paragraph. This adds those blank lines (it changes what reST sees, not what the docstring
# says), so the house style renders as lists without touching src/.
def _blank_lines_around_lists(lines: list[str]) -> list[str]:
    out: list[str] = []
    list_indent = None  # indentation of the list being read, None outside a list
    for line in lines:
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        bullet = stripped.startswith(("- ", "* ")) and not stripped.startswith("* * ")
        if not stripped:
            list_indent = None
        elif bullet and list_indent is None:
            if out and out[-1].strip():
                out.append("")
            list_indent = indent
        elif list_indent is not None and not bullet and indent <= list_indent:
            out.append("")
            list_indent = None
        out.append(line)
    return out


# Docstrings write absolute values and norms as |v - w| (plain-text maths); reStructuredText reads
# |...| as a substitution reference and reports each as undefined. No docstring defines a
# substitution, so a bar outside ``literal`` text is escaped (a line that starts with one, a
# table or line block, is left as it is).
def _is_table_row(line: str) -> bool:
    stripped = line.strip()
    return len(stripped) > 1 and stripped[0] == "|" and stripped[-1] == "|"


def _escape_bars(line: str) -> str:
    if "|" not in line or _is_table_row(line) or line.lstrip().startswith(("+-", "+=")):
        return line
    parts = line.split("``")
    for i in range(0, len(parts), 2):  # even parts are outside inline literals
        parts[i] = parts[i].replace("\\|", "|").replace("|", "\\|")
    return "``".join(parts)


# A Markdown pipe table in a docstring (rows between bars, a |---| separator) is shown as written,
# as a literal block: reStructuredText would read its rows as line blocks.
def _markdown_tables_as_literal(lines: list[str]) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(lines):
        j = i
        while j < len(lines) and _is_table_row(lines[j]):
            j += 1
        block = lines[i:j]
        if len(block) >= 2 and any(set(row.strip()) <= set("|-: ") for row in block):
            if out and out[-1].strip():
                out.append("")
            out += ["::", ""] + ["    " + row for row in block] + [""]
            i = j
        else:
            out.append(lines[i])
            i += 1
    return out


def _process_docstring(app, what, name, obj, options, lines):
    lines[:] = [_escape_bars(line) for line in _blank_lines_around_lists(_markdown_tables_as_literal(lines))]


def setup(app):
    app.connect("autodoc-process-docstring", _process_docstring)
    # Sphinx keeps its loggers at DEBUG and lets its handlers drop what the verbosity hides: a record was made
    # and filtered for every event it emits and every autodoc import, ~76,000 a build (a twelfth of its CPU).
    # The loggers now drop them first, at the handlers' own level (-v and -vv still show them).
    logging.getLogger("sphinx").setLevel(sphinx_logging.VERBOSITY_MAP[max(app.verbosity, 0)])
