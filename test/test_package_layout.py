"""The package is what a ROS 2 user installs: launch files run, nodes exist, deps are declared."""

from __future__ import annotations

import ast
import importlib.util
import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from aerial_sim.launcher.description import load_launch_file

REPO = Path(__file__).resolve().parents[1]
PACKAGE_DIR = REPO / "src" / "aerial_sim"
NODE_FILES = sorted(p for p in (PACKAGE_DIR / "nodes").glob("*.py") if not p.stem.startswith("_"))
LAUNCH_FILES = sorted((REPO / "launch").glob("*.launch.yaml"))
#: Adapter packages may import rclpy; everything else is the pure core.
ADAPTER_DIRS = {"nodes", "cli", "launcher"}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("launch_file", LAUNCH_FILES, ids=lambda p: p.name)
def test_every_launch_file_evaluates_and_names_existing_nodes(launch_file):
    plan = load_launch_file(launch_file)
    for process in plan.processes:
        if process.package == "aerial_sim":
            module = f"aerial_sim.nodes.{process.executable}"
            assert importlib.util.find_spec(module), f"{launch_file.name}: no node module {module}"


@pytest.mark.parametrize("node_file", NODE_FILES, ids=lambda p: p.stem)
def test_every_node_module_is_an_executable(node_file):
    source = node_file.read_text()
    assert re.search(r"^def main\(", source, re.MULTILINE), f"{node_file.name} has no main()"
    assert 'if __name__ == "__main__":' in source, f"{node_file.name} cannot run with python -m"


def test_the_pure_core_never_imports_rclpy():
    offenders = [
        str(path.relative_to(PACKAGE_DIR))
        for path in PACKAGE_DIR.rglob("*.py")
        if path.relative_to(PACKAGE_DIR).parts[0] not in ADAPTER_DIRS and "rclpy" in imported_modules(path)
    ]
    assert offenders == []


def test_package_xml_declares_every_ros_package_the_nodes_import():
    manifest = ElementTree.parse(REPO / "package.xml").getroot()
    assert manifest.get("format") == "3"
    declared = {element.text for element in manifest if element.tag in ("exec_depend", "depend")}
    assert {"rclpy", "tf2_ros_py", "launch_ros"} <= declared
    ros_imports = set()
    for path in (PACKAGE_DIR / "nodes").rglob("*.py"):
        ros_imports |= {name for name in imported_modules(path) if re.fullmatch(r"\w+_(msgs|srvs|interfaces)", name)}
    missing = sorted(ros_imports - declared)
    assert missing == [], f"package.xml lacks <exec_depend> for {missing}"
