"""How the suite is shared between pytest-xdist workers (``tools/dev.sh test``: ``--dist loadfile``).

Two rules, so the workers (three on 2 cores: tools/dev.sh) finish together:

- **A module fixture is built once.** A test file is one work unit (``loadfile``): one worker runs all
  of its tests, and builds each module fixture (the batch sweep's four runs, the MAVLink clients'
  graph, the recorded flight, ...) once, instead of each worker building it for the tests it was sent.
  (``loadgroup`` with an ``xdist_group`` per fixture would split files finer, but pytest-xdist 3.8
  names a group by rewriting ``item._nodeid``, which pytest 9 no longer reads: its groups are ignored.)
- **Longest first.** Files are sent longest first (test/conftest.py sorts each worker's collection,
  and ``--no-loadscope-reorder`` keeps that order), by the durations in ``durations.json`` (seconds of
  a whole-suite run, tests of 3 s or more; any other test counts as :data:`UNLISTED_S`). With the last
  files the short ones, the worker that finishes first waits seconds for the other, not the length of
  a lockstep run or the docs build that happened to come last.

A stale table only orders worse, never changes what runs. Refresh it from a whole-suite run's JUnit report,
which ``tools/dev.sh test`` (and so CI, ``.ci/run``) leaves in ``test-report.xml`` at the repository root:
``.venv/bin/python test/scheduling.py test-report.xml`` (no extra run needed; prefer a quiet machine's run: load
stretches graph tests more than pure ones, and the table only orders the files against each other).
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

DURATIONS = Path(__file__).with_name("durations.json")
#: Seconds assumed for a test the table does not list (it took less than LISTED_FROM_S).
UNLISTED_S = 0.5
#: A test this long or longer is listed in the table.
LISTED_FROM_S = 3.0


def longest_first(items, durations: dict[str, float]) -> list:
    """``items`` file by file (pytest-xdist's ``loadfile`` units), the longest file first; a file keeps its
    tests in collection order, and files of equal length keep theirs."""
    files: dict[str, list] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)

    def length(tests) -> float:
        return sum(durations.get(item.nodeid, UNLISTED_S) for item in tests)

    return [item for tests in sorted(files.values(), key=lambda tests: -length(tests)) for item in tests]


def share_between_workers(items) -> None:
    """Sort the files longest first (module doc)."""
    durations = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    items[:] = longest_first(items, durations)


def durations_from_junit(report: Path) -> dict[str, float]:
    """Test id -> seconds (call plus set-up and tear-down) of every test of at least LISTED_FROM_S in a
    JUnit report written with ``-o junit_duration_report=total`` (pytest's default)."""
    found = {}
    for case in ElementTree.parse(report).iter("testcase"):
        seconds = float(case.get("time", 0))
        if seconds >= LISTED_FROM_S:
            module = case.get("classname", "").replace(".", "/")
            found[f"{module}.py::{case.get('name')}"] = round(seconds, 1)
    return dict(sorted(found.items(), key=lambda entry: -entry[1]))


if __name__ == "__main__":
    table = durations_from_junit(Path(sys.argv[1]))
    DURATIONS.write_text(json.dumps(table, indent=1) + "\n")
    print(f"{DURATIONS}: {len(table)} tests, {sum(table.values()):.0f} s")
