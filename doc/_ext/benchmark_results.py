"""Sphinx extension: measured figures come from the benchmarks, not from hand-copied tables.

Each benchmark that records its figures writes ``doc/results/<benchmark>.json``
(``benchmarks/_results.py``). A page includes them with the directive

    ```{benchmark-results}
    ```

(every results file, sorted by name) or ``{benchmark-results} camera`` for one. Each becomes a
section: the command that reproduces it, when and on which commit and machine it was measured,
and its table (what, value, unit, note). A results file that is not valid is a build warning,
so test_docs.py's warnings-as-errors build fails on it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx.util import logging

LOG = logging.getLogger(__name__)
REQUIRED = ("benchmark", "title", "command", "measured_at", "commit", "machine", "rows")


def _paragraph(*parts: nodes.Node | str) -> nodes.paragraph:
    para = nodes.paragraph()
    for part in parts:
        para += nodes.Text(part) if isinstance(part, str) else part
    return para


def _table(rows: list[dict]) -> nodes.table:
    header = ("what", "value", "unit", "note")
    table = nodes.table()
    group = nodes.tgroup(cols=len(header))
    table += group
    for width in (40, 12, 10, 38):
        group += nodes.colspec(colwidth=width)
    head = nodes.thead()
    group += head
    row = nodes.row()
    for name in header:
        row += nodes.entry("", nodes.paragraph(text=name))
    head += row
    body = nodes.tbody()
    group += body
    for item in rows:
        row = nodes.row()
        for name in header:
            value = item.get(name, "")
            if isinstance(value, float):
                value = f"{value:.4g}"
            row += nodes.entry("", nodes.paragraph(text=str(value)))
        body += row
    return table


class BenchmarkResults(Directive):
    optional_arguments = 1
    has_content = False

    def run(self) -> list[nodes.Node]:
        env = self.state.document.settings.env
        folder = Path(env.srcdir) / "results"
        wanted = self.arguments[0] if self.arguments else None
        paths = sorted(folder.glob("*.json")) if wanted is None else [folder / f"{wanted}.json"]
        out: list[nodes.Node] = []
        for path in paths:
            env.note_dependency(str(path))
            try:
                data = json.loads(path.read_text())
                missing = [key for key in REQUIRED if key not in data]
                if missing:
                    raise ValueError(f"missing {', '.join(missing)}")
            except (OSError, ValueError) as error:
                LOG.warning("benchmark results %s: %s", path.name, error, location=(env.docname, self.lineno))
                continue
            section = nodes.section(ids=[f"results-{data['benchmark']}"])
            section += nodes.title(text=data["title"])
            commit = data["commit"] + (" (with uncommitted changes)" if data.get("dirty") else "")
            section += _paragraph("Measured ", nodes.literal(text=data["measured_at"]), " on the code of commit ",
                                  nodes.literal(text=commit), ", ", data["machine"], ". Reproduce: ",
                                  nodes.literal(text=data["command"]), ".")
            load, cpus = data.get("load_average_1m"), data.get("cpus")
            if load is None or cpus is None:  # files written before these fields: read them from the machine line
                found = re.match(r"(\d+) CPUs .*load average ([\d.]+)", str(data["machine"]))
                if found:
                    cpus, load = int(found.group(1)), float(found.group(2))
            if isinstance(load, (int, float)) and isinstance(cpus, int) and load > cpus:
                section += _paragraph(nodes.strong(text="Measured under load"),
                                      f": load average {load:g} on {cpus} CPUs, so each figure here may be several "
                                      "times its value on a quiet machine; compare figures within this table, and "
                                      "rerun the command before quoting one.")
            if data.get("notes"):
                section += _paragraph(data["notes"])
            section += _table(data["rows"])
            out.append(section)
        if not out:
            LOG.warning("benchmark results: no results file in %s", folder, location=(env.docname, self.lineno))
        return out


def setup(app):
    app.add_directive("benchmark-results", BenchmarkResults)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
