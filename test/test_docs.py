"""The documentation cannot rot: doc/ builds with no warning, and the README stays a front door.

The build is the one ``tools/dev.sh docs`` runs (Sphinx + MyST, autosummary over every module),
with every warning an error (``-W --keep-going``: all of them listed on failure): a broken link
or cross-reference, a page left out of every toctree, a missing image, an invalid benchmark
results file or docstring markup that does not parse fails here. The ``dummy`` builder resolves
every reference as the HTML one does but writes no pages: about 45 s of CPU, most of it autodoc.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "doc"
#: README.md is the front door (issue 28): what it is, the two commands, the node table, links into
#: doc/. Everything longer belongs in a doc/ page. Issue 28 asks for at most about 250 lines.
README_BUDGET_LINES = 250

pytest.importorskip("sphinx", reason="the documentation tools come from tools/requirements-docs.txt")
pytest.importorskip("myst_parser", reason="the documentation tools come from tools/requirements-docs.txt")


def build_jobs() -> str:
    """Sphinx's ``-j``: every core, unless pytest-xdist workers already keep them all busy (``tools/dev.sh
    test``): there a second process only adds its start and the merge of the pages it read (about 15 %
    more CPU, for no earlier finish)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    return "1" if workers >= (os.cpu_count() or 1) else "auto"


@pytest.mark.timeout(600)  # about 30 s on a quiet 2-core machine; minutes when it is shared
def test_docs_build_with_warnings_as_errors(tmp_path):
    # smartquotes=0: curly quotes change what a page shows, never whether it builds (a twelfth of the CPU).
    command = [sys.executable, "-m", "sphinx", "-b", "dummy", "-j", build_jobs(), "-D", "smartquotes=0", "-W",
               "--keep-going", "-q", "-d", str(tmp_path / "doctrees"), str(DOC), str(tmp_path / "out")]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=560,
                            env={**os.environ, "PYTHONWARNINGS": "ignore"})
    warnings = [line for line in result.stderr.splitlines() if "WARNING" in line or "ERROR" in line]
    assert result.returncode == 0 and not warnings, (
        f"the docs build warned (tools/dev.sh docs shows the same), {len(warnings)} warning(s):\n"
        + "\n".join(warnings or result.stderr.splitlines()[-30:]))


def test_readme_stays_within_its_budget():
    lines = (REPO / "README.md").read_text().count("\n")
    assert lines <= README_BUDGET_LINES, (
        f"README.md has {lines} lines, over its budget of {README_BUDGET_LINES}: move the detail into a "
        f"doc/ page and link it from the README")


def test_readme_links_resolve():
    """Every relative link and image of the README names a file of the repository."""
    text = (REPO / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    missing = [t for t in targets if not re.match(r"[a-z]+:", t) and not (REPO / t).exists()]
    assert targets and not missing, f"README.md links to files that do not exist: {missing}"


def test_results_written_by_a_benchmark_are_what_the_docs_render(tmp_path, monkeypatch):
    sys.path.insert(0, str(REPO / "benchmarks"))
    sys.path.insert(0, str(DOC / "_ext"))
    try:
        import _results
        import benchmark_results
    finally:
        del sys.path[:2]
    monkeypatch.setattr(_results, "RESULTS", tmp_path)
    monkeypatch.delenv("AERIAL_SIM_NO_RECORD", raising=False)
    monkeypatch.setattr(sys, "argv", ["bench"])
    path = _results.record("demo", "Demo", [_results.row("steps", 301000, "steps/s", "one quad")])
    data = json.loads(path.read_text())
    assert set(benchmark_results.REQUIRED) <= set(data)
    assert data["rows"] == [{"what": "steps", "value": 301000, "unit": "steps/s", "note": "one quad"}]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", data["measured_at"])
    assert data["command"] == "tools/dev.sh bench demo"
    monkeypatch.setattr(sys, "argv", ["bench", "--no-record"])
    assert _results.record("other", "Other", []) is None and not (tmp_path / "other.json").exists()
