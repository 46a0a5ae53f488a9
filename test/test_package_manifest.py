"""package.xml is what `rosdep install` and colcon read: every dependency key must be a real rosdep
key (checked against test/data/rosdep_keys.txt, a hand-checked extract of ros/rosdistro), the build
type is declared the ament_python way, and the libraries without a rosdep rule come from pip."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
KNOWN_KEYS_FILE = REPO / "test" / "data" / "rosdep_keys.txt"
DEPEND_TAGS = ("depend", "build_depend", "build_export_depend", "buildtool_depend",
               "buildtool_export_depend", "exec_depend", "test_depend", "doc_depend")  # fmt: skip
#: Python libraries with no rosdep rule: installed with pip (tools/requirements.txt) instead.
PIP_ONLY = ("embreex", "python-fcl", "fluids", "mcap", "pygeomag", "viser")


def known_rosdep_keys(path: Path = KNOWN_KEYS_FILE) -> set[str]:
    """First word of every non-comment line of the key list."""
    keys = set()
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            keys.add(line.split()[0])
    return keys


def manifest_keys(xml_text: str) -> list[tuple[str, str]]:
    """(tag, key) of every dependency element of a package.xml."""
    root = ElementTree.fromstring(xml_text)
    return [(element.tag, (element.text or "").strip()) for element in root if element.tag in DEPEND_TAGS]


def unknown_key_errors(xml_text: str, known: set[str]) -> list[str]:
    """One line per dependency key that rosdep cannot resolve."""
    return [
        f"<{tag}>{key}</{tag}>: no rosdep rule known for '{key}' (see {KNOWN_KEYS_FILE.relative_to(REPO)})"
        for tag, key in manifest_keys(xml_text)
        if key not in known
    ]


def test_key_list_names_the_rosdistro_commit_it_was_checked_at():
    assert re.search(r"ros/rosdistro at commit\s*#?\s*[0-9a-f]{40}", KNOWN_KEYS_FILE.read_text())
    assert {"rclpy", "tf2_ros_py", "python3-numpy"} <= known_rosdep_keys()


def test_every_package_xml_key_is_a_known_rosdep_key():
    errors = unknown_key_errors((REPO / "package.xml").read_text(), known_rosdep_keys())
    assert errors == [], "\n".join(errors)


@pytest.mark.parametrize("bogus", ["ament_python", "python3-fluids-pip", "python3-not-a-real-key"])
def test_a_key_without_a_rule_is_reported_in_one_line(bogus):
    manifest = (REPO / "package.xml").read_text().replace(
        "<exec_depend>rclpy</exec_depend>", f"<exec_depend>rclpy</exec_depend><exec_depend>{bogus}</exec_depend>"
    )
    errors = unknown_key_errors(manifest, known_rosdep_keys())
    assert len(errors) == 1 and f"'{bogus}'" in errors[0] and "\n" not in errors[0]


def test_build_type_is_exported_and_ament_python_is_no_buildtool():
    root = ElementTree.parse(REPO / "package.xml").getroot()
    assert root.findtext("export/build_type") == "ament_python"
    assert [e.text for e in root.iter("buildtool_depend")] == []


def requirement_lines(path: Path) -> dict[str, str]:
    """Distribution name -> requirement line of a pip requirements file."""
    lines = (line.strip() for line in path.read_text().splitlines())
    return {re.split(r"[<>=!~\[ ;]", line, maxsplit=1)[0].lower(): line for line in lines if line and not line.startswith("#")}


def test_libraries_without_a_rosdep_rule_install_with_pip():
    venv = requirement_lines(REPO / "tools" / "requirements.txt")
    ros = requirement_lines(REPO / "tools" / "requirements-ros.txt")
    assert sorted(ros) == sorted(PIP_ONLY), "tools/requirements-ros.txt must list exactly the libraries without a rosdep rule"
    assert {name: venv.get(name) for name in ros} == ros, "tools/requirements-ros.txt and tools/requirements.txt disagree"
    names = {key for _, key in manifest_keys((REPO / "package.xml").read_text())}
    guessed = {f"python3-{library.removeprefix('python-')}{suffix}" for library in PIP_ONLY for suffix in ("", "-pip")}
    assert names.isdisjoint(guessed), f"package.xml names pip-only keys {sorted(names & guessed)}"
