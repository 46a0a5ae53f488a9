"""The packages of aerial_sim stand in floors, and no import runs back up a floor.

From the ground up: the models (physics, sensors, control, ...), the protocol servers that use
them without ROS (AirSim, MAVLink, the viewer's scene), the ROS plumbing every node shares
(``rosnode``), the node executables (``nodes``), the process orchestration (launcher, batch),
and the command line. A package may import its own floor and those below. Below ``rosnode``
nothing imports ROS at all (rclpy, message packages, tf2, launch). The imports are read with
``ast`` (also those inside functions), so the check runs in a fraction of a second.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "src" / "aerial_sim"

#: Every top-level module or package of aerial_sim, by floor (0 = ground).
FLOORS = {
    0: {"config", "paths", "jit", "cdr", "run_folder", "stack_dumps", "physics", "sensors", "environment", "control",
        "world", "vehicles", "recording"},
    1: {"airsim", "mavlink", "sitl", "viewer"},
    2: {"rosnode"},
    3: {"nodes"},
    4: {"launcher", "batch"},
    5: {"cli", "__main__", "__init__"},
}
FLOOR_OF = {name: floor for floor, names in FLOORS.items() for name in names}
#: The floor from which ROS may be imported.
ROS_FLOOR = FLOOR_OF["rosnode"]
ROS_PACKAGES = ("rclpy", "rosidl_runtime_py", "tf2_ros", "launch", "launch_ros", "rosgraph_msgs", "builtin_interfaces")


def is_ros(module: str) -> bool:
    root = module.split(".")[0]
    return root in ROS_PACKAGES or root.endswith(("_msgs", "_srvs", "_interfaces"))


def top_level(path: Path, package_dir: Path) -> str:
    relative = path.relative_to(package_dir)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every absolute import in ``path``, ``from aerial_sim import x`` as ``aerial_sim.x``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "aerial_sim":
                found += [(node.lineno, f"aerial_sim.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, node.module))
    return found


def layering_violations(package_dir: Path) -> list[str]:
    """One line per import that runs up a floor or brings ROS below ``rosnode``, and per unplaced package."""
    problems = []
    for path in sorted(package_dir.rglob("*.py")):
        here = top_level(path, package_dir)
        if here not in FLOOR_OF:
            problems.append(f"{path.relative_to(package_dir)}: package '{here}' has no floor in FLOORS")
            continue
        for line, module in imports_of(path):
            where = f"{path.relative_to(package_dir)}:{line}"
            parts = module.split(".")
            if parts[0] == "aerial_sim" and len(parts) > 1:
                target = parts[1]
                if target in FLOOR_OF and FLOOR_OF[target] > FLOOR_OF[here]:
                    problems.append(f"{where}: {here} (floor {FLOOR_OF[here]}) imports {module} "
                                    f"(floor {FLOOR_OF[target]})")
            elif is_ros(module) and FLOOR_OF[here] < ROS_FLOOR:
                problems.append(f"{where}: {here} imports ROS ({module}) below rosnode")
    return problems


def test_no_import_runs_back_up_a_floor_and_the_core_imports_no_ros():
    assert layering_violations(PACKAGE_DIR) == []


def test_the_check_sees_an_arrow_running_back_up(tmp_path):
    # The check itself: a model importing a node, a lazy rclpy import in the core, a package nobody placed.
    package = tmp_path / "aerial_sim"
    (package / "physics").mkdir(parents=True)
    (package / "nodes").mkdir()
    (package / "gadgets").mkdir()
    (package / "nodes" / "physics.py").write_text("from aerial_sim.physics import world\n")
    (package / "physics" / "world.py").write_text(
        "from aerial_sim.nodes.physics import main\n\ndef f():\n    import rclpy.node\n")
    (package / "gadgets" / "thing.py").write_text("")
    problems = layering_violations(package)
    assert len(problems) == 3, problems
    assert "physics/world.py:1: physics (floor 0) imports aerial_sim.nodes.physics (floor 3)" in problems[1]
    assert "physics/world.py:4: physics imports ROS (rclpy.node) below rosnode" in problems[2]
    assert "package 'gadgets' has no floor" in problems[0]
