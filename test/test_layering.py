"""The packages of aerial_sim stand in floors, and no import runs back up a floor.

From the ground up: the models (physics, sensors, control, ...), the protocol servers that use
them without ROS (AirSim, MAVLink, the viewer's scene), the nodes (``nodes``: the executables and,
in ``nodes/ros``, the ROS plumbing they share), the process orchestration (launcher, batch),
and the command line. A package may import its own floor and those below. Below ``nodes``
nothing imports ROS at all (rclpy, message packages, tf2, launch); inside it, ``nodes/ros`` imports
no node executable (the plumbing stands under the nodes that use it). The imports are read with
``ast`` (also those inside functions), so the check runs in a fraction of a second.

Within a floor the packages stand in order too: no two packages import each other, directly or round
a longer circle (a package-level import cycle), except the edges in :data:`CYCLE_ALLOWED`, each with
the reason it still stands.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "src" / "aerial_sim"

#: Every top-level module or package of aerial_sim, by floor (0 = ground).
FLOORS = {
    0: {"config", "paths", "jit", "cdr", "run_folder", "stack_dumps", "physics", "sensors", "environment", "control",
        "world", "vehicles", "recording"},
    1: {"airsim", "mavlink", "sitl", "viewer"},
    2: {"nodes"},
    3: {"launcher", "batch"},
    4: {"cli", "__main__", "__init__"},
}
FLOOR_OF = {name: floor for floor, names in FLOORS.items() for name in names}
#: The floor from which ROS may be imported.
ROS_FLOOR = FLOOR_OF["nodes"]
ROS_PACKAGES = ("rclpy", "rosidl_runtime_py", "tf2_ros", "launch", "launch_ros", "rosgraph_msgs", "builtin_interfaces")


def is_ros(module: str) -> bool:
    root = module.split(".")[0]
    return root in ROS_PACKAGES or root.endswith(("_msgs", "_srvs", "_interfaces"))


def top_level(path: Path, package_dir: Path) -> str:
    relative = path.relative_to(package_dir)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every absolute import in ``path``, ``from aerial_sim import x`` as ``aerial_sim.x``."""
    return list(_imports_in(path, path.stat().st_mtime_ns))


@functools.lru_cache(maxsize=None)
def _imports_in(path: Path, mtime_ns: int) -> tuple[tuple[int, str], ...]:
    """:func:`imports_of` for one version of a file: each source file is parsed once per test process,
    not once per check (three walks of the package took 10 s on a quiet machine, one takes a third)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "aerial_sim":
                found += [(node.lineno, f"aerial_sim.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, node.module))
    return tuple(found)


#: Imports left out of the package-level cycle check: (importing package, imported module) -> why it stands.
CYCLE_ALLOWED: dict = {}


def package_graph(package_dir: Path, allowed=CYCLE_ALLOWED) -> dict[str, dict[str, list[str]]]:
    """importing package -> imported package -> ``file:line`` of each import, without ``allowed`` ones."""
    graph: dict[str, dict[str, list[str]]] = {}
    for path in sorted(package_dir.rglob("*.py")):
        here = top_level(path, package_dir)
        for line, module in imports_of(path):
            parts = module.split(".")
            if parts[0] != "aerial_sim" or len(parts) < 2 or parts[1] == here or (here, module) in allowed:
                continue
            graph.setdefault(here, {}).setdefault(parts[1], []).append(f"{path.relative_to(package_dir)}:{line}")
    return graph


def import_cycles(package_dir: Path, allowed=CYCLE_ALLOWED) -> list[str]:
    """One line per package-level import cycle (a strongly connected set of packages), naming its imports."""
    graph = package_graph(package_dir, allowed)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(package: str) -> None:  # Tarjan's strongly connected components
        index[package] = low[package] = len(index)
        stack.append(package)
        for target in graph.get(package, {}):
            if target not in index:
                visit(target)
                low[package] = min(low[package], low[target])
            elif target in stack:
                low[package] = min(low[package], index[target])
        if low[package] == index[package]:
            members = []
            while True:
                members.append(stack.pop())
                if members[-1] == package:
                    break
            if len(members) > 1:
                arrows = [f"{a} -> {b} ({', '.join(graph[a][b])})" for a in sorted(members)
                          for b in sorted(graph[a]) if b in members]
                cycles.append(f"cycle among {sorted(members)}: " + "; ".join(arrows))

    for package in sorted(graph):
        if package not in index:
            visit(package)
    return cycles


def is_plumbing(path: Path, package_dir: Path) -> bool:
    return path.relative_to(package_dir).parts[:2] == ("nodes", "ros")


def layering_violations(package_dir: Path) -> list[str]:
    """One line per import that runs up a floor or brings ROS below ``nodes``, per import of a node executable
    by the plumbing in ``nodes/ros``, and per unplaced package."""
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
                elif is_plumbing(path, package_dir) and target == "nodes" and parts[2:3] != ["ros"]:
                    problems.append(f"{where}: nodes/ros imports the node executable {module}")
            elif is_ros(module) and FLOOR_OF[here] < ROS_FLOOR:
                problems.append(f"{where}: {here} imports ROS ({module}) below nodes")
    return problems


def test_no_import_runs_back_up_a_floor_and_the_core_imports_no_ros():
    assert layering_violations(PACKAGE_DIR) == []


def test_the_check_sees_an_arrow_running_back_up(tmp_path):
    # The check itself: a model importing a node, a lazy rclpy import in the core, a package nobody placed.
    package = tmp_path / "aerial_sim"
    (package / "physics").mkdir(parents=True)
    (package / "nodes" / "ros").mkdir(parents=True)
    (package / "gadgets").mkdir()
    (package / "nodes" / "physics.py").write_text("from aerial_sim.physics import world\n")
    (package / "nodes" / "ros" / "qos.py").write_text("from aerial_sim.nodes.ros import clocks\nfrom aerial_sim.nodes import physics\n")
    (package / "physics" / "world.py").write_text(
        "from aerial_sim.nodes.physics import main\n\ndef f():\n    import rclpy.node\n")
    (package / "gadgets" / "thing.py").write_text("")
    problems = layering_violations(package)
    assert len(problems) == 4, problems
    assert "nodes/ros/qos.py:2: nodes/ros imports the node executable aerial_sim.nodes" in problems[1]
    assert "physics/world.py:1: physics (floor 0) imports aerial_sim.nodes.physics (floor 2)" in problems[2]
    assert "physics/world.py:4: physics imports ROS (rclpy.node) below nodes" in problems[3]
    assert "package 'gadgets' has no floor" in problems[0]


def test_no_package_level_import_cycle():
    assert import_cycles(PACKAGE_DIR) == []
    # Each allowed edge still exists (an entry nobody needs any more is taken out).
    graph = package_graph(PACKAGE_DIR, allowed={})
    for (here, module) in CYCLE_ALLOWED:
        assert module.split(".")[1] in graph.get(here, {}), f"{here} no longer imports {module}: drop it"


def test_the_cycle_check_sees_a_circle_through_three_packages_and_a_lazy_import(tmp_path):
    package = tmp_path / "aerial_sim"
    for name in ("sensors", "control", "physics", "world"):
        (package / name).mkdir(parents=True)
    (package / "sensors" / "imu.py").write_text("from aerial_sim.physics import rotation\n")
    (package / "physics" / "world.py").write_text("def f():\n    from aerial_sim.control.geometry import g\n")
    (package / "control" / "geometry.py").write_text("import aerial_sim.sensors.imu\n")
    (package / "world" / "scene.py").write_text("from aerial_sim.physics import rotation\n")
    cycles = import_cycles(package, allowed={})
    assert len(cycles) == 1, cycles
    assert cycles[0].startswith("cycle among ['control', 'physics', 'sensors']: "), cycles
    assert "physics -> control (physics/world.py:2)" in cycles[0]
    assert import_cycles(package, allowed={("physics", "aerial_sim.control.geometry"): "test"}) == []


#: Module names that say nothing about what a module holds (issue 28: one room per concern, named for it).
VAGUE_NAMES = {"common", "utils", "util", "misc", "helpers", "helper"}


def test_no_module_is_named_common_utils_misc_or_helpers():
    vague = [str(path.relative_to(PACKAGE_DIR)) for path in sorted(PACKAGE_DIR.rglob("*"))
             if (path.suffix == ".py" or path.is_dir()) and path.stem.lstrip("_") in VAGUE_NAMES]
    assert vague == []
