"""The package as a user installs it (``pip install .``, not editable): every module is there, every
console script starts.

The project's own venv and ``colcon build --symlink-install`` run the source tree, so a package folder
without ``__init__.py`` (which ``find_packages`` leaves out of a real install) worked there and nowhere
else: ``aerial_sim.airsim`` was missing from every plain ``colcon build`` and ``pip install .``. Here
the project is installed into a temporary prefix from a copy of its files, and the installed copy is
put first on ``sys.path``. A package's ``__path__`` is the installed folder, so the source tree
cannot stand in for a module the install lacks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: What setup.py reads: the package, its manifest and the data files it installs.
PROJECT_FILES = ("setup.py", "package.xml", "src", "launch", "config", "rviz")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(site-packages, scripts folder, environment) of a non-editable install in a temporary prefix."""
    root = tmp_path_factory.mktemp("install")
    project, prefix = root / "project", root / "prefix"
    project.mkdir()
    for name in PROJECT_FILES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, project / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(source, project / name)
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile", "--prefix", str(prefix)]
    try:  # offline and fast when the venv can build a wheel itself (tools/requirements.txt has wheel)
        import wheel  # noqa: F401, PLC0415

        del wheel
        command.append("--no-build-isolation")
    except ImportError:
        pass
    done = subprocess.run([*command, str(project)], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    paths = sysconfig.get_paths(vars={"base": str(prefix), "platbase": str(prefix)})
    site_packages, scripts = Path(paths["purelib"]), Path(paths["scripts"])
    environment = {**os.environ, "PYTHONPATH": str(site_packages),
                   "AMENT_PREFIX_PATH": os.pathsep.join(filter(None, [str(prefix), os.environ.get("AMENT_PREFIX_PATH")]))}
    # The kernels compile on first import in a fresh install (20-80 s, once): packaging is checked here, not numba.
    environment["NUMBA_DISABLE_JIT"] = "1"
    environment.pop("AERIAL_SIM_SHARE", None)  # the installed share/aerial_sim, found through the ament index
    return site_packages, scripts, environment


def console_scripts() -> list[str]:
    """The console scripts setup.py declares (every node executable and ``aerial_sim``)."""
    names = sorted(p.stem for p in (REPO / "src" / "aerial_sim" / "nodes").glob("*.py") if not p.stem.startswith("_"))
    return [*names, "aerial_sim"]


#: In one interpreter (the imports are shared, so this costs one import of the package, not one per
#: script): import every module of the installed package, then run every console script file as its
#: own ``__main__`` with the arguments given. Prints JSON: the modules that failed, and per script its
#: exit status and what it wrote to stderr.
CHECK_INSTALL = """
import importlib, json, os, pkgutil, runpy, sys, tempfile
site_packages, prefix, scripts, arguments = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
import aerial_sim
assert aerial_sim.__file__.startswith(site_packages), aerial_sim.__file__
failed = []
for module in pkgutil.walk_packages(aerial_sim.__path__, "aerial_sim.", onerror=failed.append):
    if module.name.endswith(".__main__"):
        continue  # runs the command line
    try:
        importlib.import_module(module.name)
    except Exception as error:
        failed.append(f"{module.name}: {type(error).__name__}: {error}")
from aerial_sim.paths import package_share
share = package_share()
started = {}
for name, args in arguments.items():
    sys.argv = [f"{scripts}/{name}", *args]
    code = None
    with tempfile.TemporaryFile("w+") as output:
        saved = os.dup(1), os.dup(2)
        os.dup2(output.fileno(), 1)
        os.dup2(output.fileno(), 2)
        try:
            runpy.run_path(sys.argv[0], run_name="__main__")
        except SystemExit as stop:
            code = stop.code
        except BaseException as error:
            code = f"{type(error).__name__}: {error}"
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
        output.seek(0)
        started[name] = [code, output.read()]
print(json.dumps({"failed": [str(f) for f in failed], "share": str(share), "started": started}))
"""


def test_every_package_folder_is_a_package():
    # find_packages installs only folders with __init__.py: a folder of modules without one is left out.
    folders = {p.parent for p in (REPO / "src" / "aerial_sim").rglob("*.py") if "__pycache__" not in p.parts}
    assert sorted(str(f.relative_to(REPO)) for f in folders if not (f / "__init__.py").is_file()) == []


def test_the_installed_copy_imports_every_module_and_starts_every_console_script(installed):
    # Every module imports from the installed copy, which finds its own share/aerial_sim (launch files,
    # configs). Each node script then imports its whole module tree and rclpy.init refuses a params file
    # that does not exist: one FATAL line naming the node and exit 2 (the configuration-error path), no
    # traceback, no port opened. ``aerial_sim --help`` answers with its usage.
    site_packages, scripts, environment = installed
    expected = {p.relative_to(REPO / "src").with_suffix("").as_posix().replace("/", ".")
                for p in (REPO / "src" / "aerial_sim").rglob("*.py") if "__pycache__" not in p.parts}
    present = {p.relative_to(site_packages).with_suffix("").as_posix().replace("/", ".")
               for p in (site_packages / "aerial_sim").rglob("*.py")}
    assert sorted(expected - present) == [], "modules left out of the install"
    names = console_scripts()
    assert [name for name in names if not (scripts / name).is_file()] == []
    arguments = {name: ["--help"] if name == "aerial_sim" else ["--ros-args", "--params-file", MISSING_PARAMS]
                 for name in names}
    prefix = site_packages.parents[2]
    done = subprocess.run([sys.executable, "-c", CHECK_INSTALL, str(site_packages), str(prefix), str(scripts),
                           json.dumps(arguments)], capture_output=True, text=True, env=environment, timeout=180)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["failed"] == []
    assert report["share"].startswith(str(prefix)) and (Path(report["share"]) / "launch" / "sim.launch.yaml").is_file()
    for name, (code, output) in report["started"].items():
        assert "Traceback" not in output and "ImportError" not in output, f"{name}:\n{output}"
        if name == "aerial_sim":
            assert code in (0, None) and "usage" in output.lower(), output
        else:
            assert code == 2 and f"[FATAL] [{name}]: cannot start" in output, f"{name} exited {code}:\n{output}"


#: A params file that does not exist: rclpy.init refuses it.
MISSING_PARAMS = "/nonexistent/aerial_sim_params.yaml"


def test_a_ros_argument_rclpy_refuses_is_one_fatal_line_and_exit_2():
    # rclpy.init raising left rclpy "not ok", which run_node took for an interruption: exit 0, and only
    # rcl's own ERROR line. A launcher saw a node that "finished" instead of one that could not start.
    done = subprocess.run([sys.executable, "-m", "aerial_sim.nodes.gps", "--ros-args", "--params-file", MISSING_PARAMS],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "[FATAL] [gps]: cannot start:" in done.stderr and "params file" in done.stderr, done.stderr


def test_swarm_mission_started_without_parameters_names_itself_and_what_it_needs(installed):
    # It exits (a swarm mission needs its vehicles), but in one line naming the node and the parameter,
    # not the class (``[SwarmMissionNode]``) that a console script's start used to report.
    _, scripts, environment = installed
    done = subprocess.run([str(scripts / "swarm_mission")], capture_output=True, text=True, env=environment, timeout=60)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("[FATAL] [swarm_mission]: ") and "vehicle_names" in lines[0], lines
