"""Sphinx extension: where each class and function of a module starts and ends, read from its syntax tree.

Sphinx's ``ModuleAnalyzer`` (autodoc, autosummary and viewcode ask it about every module) finds the
line span of each definition with ``DefinitionFinder``, a pure-Python walk over every token of the
source: 3 to 5 of the build's ~58 CPU seconds on this package. The same table comes from the syntax
tree that ``ast.parse`` builds in C. This extension puts that in place of the token walk and keeps
the token walk's rules, so the table is the same entry for entry (checked on every module of the
package: test/test_docs.py's build prints the same pages):

- an entry per ``class`` and ``def``, named by the classes and functions around it (``Outer.inner``);
  a function defined directly in a function's body is left out, one inside a block of that body
  (``if``, ``for``, ``with``, ``try``) is not;
- it starts at the first decorator's line, else at the name's line, and ends at the body's last line
  that is neither blank nor only a comment; a definition written on one line ends on that line;
- a name defined twice (``try``/``except``, ``if``/``else``) keeps its later definition.
Only viewcode's source links use the spans; nothing about them can make a page warn. One difference
is known (on 13,333 files of the standard library and site-packages, besides the package): the token
walk takes a line inside brackets that starts with the ``@`` operator (``a\n@ b``) for a decorator and
starts the next definition there; here it starts at its own decorator or name. No module here has one.
"""

from __future__ import annotations

import ast
import re

from sphinx.pycode import parser as pycode_parser

_BLANK_OR_COMMENT = re.compile(r"^\s*(#.*)?$")
_DEFINITIONS = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def definitions(code: str) -> dict[str, tuple[str, int, int]]:
    """``{qualified name: ("class" | "def", first line, last line)}`` as ``DefinitionFinder`` gives it."""
    lines = code.splitlines(True)
    found: dict[str, tuple[str, int, int]] = {}

    def span(node) -> tuple[int, int]:
        start = min([decorator.lineno for decorator in node.decorator_list] + [node.lineno])
        first = node.body[0]
        if lines[first.lineno - 1][:first.col_offset].strip():  # the body on the header's line: `def f(): pass`
            return start, node.lineno
        end = node.end_lineno
        while end > node.lineno and _BLANK_OR_COMMENT.match(lines[end - 1]):
            end -= 1
        return start, end

    def visit(block, context: list[str], in_function: bool) -> None:
        """``block``: the statements of one indented block; ``in_function``: that block is a function's body."""
        for node in block:
            if isinstance(node, _DEFINITIONS):
                kind = "class" if isinstance(node, ast.ClassDef) else "def"
                visit(node.body, [*context, node.name], kind == "def")  # inner ones first, as the token walk
                if not (in_function and kind == "def"):  # a function's own inner functions are left out
                    found[".".join([*context, node.name])] = (kind, *span(node))
                continue
            # Any other block (if/else, for, while, with, try/except/else/finally, match/case) in the order of
            # the source, as the token walk meets them: a name defined twice keeps its later definition.
            parts = [*(getattr(node, "handlers", None) or []), *(getattr(node, "cases", None) or [])]
            blocks = [getattr(node, field, None) or [] for field in ("body", "orelse", "finalbody")]
            for inner in sorted([b for b in blocks if b] + [part.body for part in parts], key=lambda b: b[0].lineno):
                visit(inner, context, False)

    visit(ast.parse(code).body, [], False)
    return found


def parse_definition(self) -> None:
    """``sphinx.pycode.parser.Parser.parse_definition``, from the syntax tree (module doc)."""
    self.definitions = definitions(self.code)


def setup(app):
    pycode_parser.Parser.parse_definition = parse_definition
    return {"parallel_read_safe": True, "parallel_write_safe": True}
