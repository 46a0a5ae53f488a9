"""How the suite is shared between pytest-xdist workers (``tools/dev.sh test``: ``--dist loadgroup``).

Two rules, applied on each worker's collection (test/conftest.py), so the two workers finish together:

- **A module fixture is built once.** Tests that use a module-scoped fixture (the batch sweep's four
  runs, the MAVLink clients' graph, the recorded flight, ...) are one group (``xdist_group``): one
  worker runs them all, instead of each worker building the fixture for the tests it was sent.
- **Longest first.** Work units (a group, or one test) are sent longest first, by the durations in
  ``durations.json`` (seconds of a whole-suite run, tests of 3 s or more; any other test counts
  as :data:`UNLISTED_S`). With the last units the short ones, the worker that finishes first waits
  seconds for the other, not the length of a lockstep run or the docs build that happened to come last.

A stale table only orders worse, never changes what runs. Refresh it from a suite run's JUnit report:
``tools/dev.sh test --junitxml=/tmp/suite.xml && .venv/bin/python test/scheduling.py /tmp/suite.xml``.
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


def module_fixture_group(item) -> str | None:
    """The group of a test that uses a module-scoped fixture (its module's path), else None."""
    definitions = getattr(item, "_fixtureinfo", None)
    if definitions is None:
        return None
    for name in item.fixturenames:
        chain = definitions.name2fixturedefs.get(name)
        if chain and chain[-1].scope == "module":
            return item.nodeid.split("::", 1)[0]
    return None


def longest_first(items, durations: dict[str, float]) -> list:
    """``items`` in work units (a test's ``xdist_group`` marker, else the test itself), longest unit first;
    a unit keeps its tests in collection order, and units of equal length keep theirs."""
    units: dict[str, list] = {}
    for item in items:
        marker = item.get_closest_marker("xdist_group")
        key = str(marker.args[0] if marker.args else marker.kwargs.get("name", "default")) if marker else item.nodeid
        units.setdefault(key, []).append(item)

    def length(unit) -> float:
        return sum(durations.get(item.nodeid, UNLISTED_S) for item in unit)

    return [item for unit in sorted(units.values(), key=lambda unit: -length(unit)) for item in unit]


def share_between_workers(items) -> None:
    """Group the tests of each module fixture, then sort the work units longest first (module doc)."""
    import pytest

    for item in items:
        group = module_fixture_group(item)
        if group is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))
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
