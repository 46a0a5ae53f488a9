"""``aerial_sim launch`` against the real ``ros2 launch``: the same command lines and parameters.

``ros2 launch --print`` prints the launch description tree, not command lines, so the real
side is captured by running ``ros2 launch aerial_sim FILE --launch-prefix '<python> <recorder>'``:
launch puts the prefix in front of every process (``--launch-prefix`` sets the ``launch-prefix``
launch configuration, read by launch's ``Executable.prepare``), and the recorder
(``test/data/launch/record_argv.py``) stores each argv and the contents of every
``--params-file`` it names, then waits to be stopped. The embedded side is
``aerial_sim launch --print`` with the same arguments. Both are normalised (executable ->
``pkg/exec``, params files -> their YAML contents) and must be equal.

Needs a ROS 2 install with this package built and sourced (``ros2`` on PATH, ``launch``
importable, ``aerial_sim`` in the ament index); skips with the reason otherwise.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
RECORDER = Path(__file__).parent / "data" / "launch" / "record_argv.py"

CASES = [
    ("physics.launch.yaml", []),
    ("sensors.launch.yaml", ["use_gps:=false"]),
    ("camera.launch.yaml", []),
    ("depth_noise.launch.yaml", []),
    ("lidar.launch.yaml", []),
    ("rotor_drag.launch.yaml", ["per_rotor:=true"]),
    ("control.launch.yaml", ["mission:=square_5m"]),
    ("record.launch.yaml", ["topics:=/clock /drone1/*"]),
    ("viewer.launch.yaml", []),
    ("airsim_api.launch.yaml", []),
    ("sim.launch.yaml", []),
    ("sim.launch.yaml", ["use_lidar:=true", "use_distance:=true", "use_rotor_drag:=true", "linear_drag:=false",
                         "mission:=none", "record:=false", "vehicle_name:=d2", "seed:=7"]),
]  # fmt: skip


def _real_tools_missing() -> str | None:
    if shutil.which("ros2") is None:
        return "ros2 is not on PATH (no ROS 2 install sourced)"
    if importlib.util.find_spec("launch") is None or importlib.util.find_spec("launch_ros") is None:
        return "the launch / launch_ros Python packages are not importable"
    found = subprocess.run(["ros2", "pkg", "prefix", "aerial_sim"], capture_output=True, text=True, timeout=60)
    if found.returncode != 0:
        return "aerial_sim is not in the ament index (colcon build and source install/setup.bash first)"
    return None


_MISSING = _real_tools_missing()
pytestmark = pytest.mark.skipif(_MISSING is not None, reason=f"real ROS 2 launch tools unavailable: {_MISSING}")


def _params(path: str):
    return yaml.safe_load(Path(path).read_text())


def normalise(argv: list[str]) -> tuple:
    """(pkg/exec, the rest with each --params-file replaced by its YAML contents)."""
    cut = argv.index("--ros-args") if "--ros-args" in argv else len(argv)
    head, rest = argv[:cut], argv[cut:]
    if len(head) >= 3 and head[1] == "-m" and head[2].startswith("aerial_sim.nodes."):
        executable, own = "aerial_sim/" + head[2].rsplit(".", 1)[1], head[3:]  # python -m aerial_sim.nodes.X
    else:
        path = Path(head[0])
        executable, own = f"{path.parent.name}/{path.name}", head[1:]  # <prefix>/lib/<pkg>/<exec>
    out: list = [*own]
    items = iter(rest)
    for item in items:
        out.append(("params", json.dumps(_params(next(items)), sort_keys=True)) if item == "--params-file" else item)
    return executable, tuple(out)


def embedded_commands(file: str, arguments: list[str]) -> list[tuple]:
    done = subprocess.run(
        [sys.executable, "-m", "aerial_sim", "launch", "--print", file, *arguments],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("[") and not line.startswith("[INFO]")]
    return sorted((normalise(shlex.split(line.split("] ", 1)[1])) for line in lines), key=repr)


def real_commands(file: str, arguments: list[str], count: int, folder: Path) -> list[tuple]:
    folder.mkdir()
    prefix = f"{shlex.quote(sys.executable)} {shlex.quote(str(RECORDER))} {shlex.quote(str(folder))}"
    environment = {**os.environ, "ROS_LOG_DIR": str(folder.parent / "ros_log")}
    launch = subprocess.Popen(
        ["ros2", "launch", "-n", "aerial_sim", file, *arguments, "--launch-prefix", prefix],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while len(list(folder.glob("*.json"))) < count and time.monotonic() < deadline and launch.poll() is None:
        time.sleep(0.2)
    time.sleep(1.0)  # one more would be a mismatch: give it the chance to show
    if launch.poll() is None:
        os.killpg(launch.pid, signal.SIGINT)
    output, _ = launch.communicate(timeout=60)
    records = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]
    assert records, output
    return sorted((normalise(record["argv"]) for record in records), key=repr)


@pytest.mark.parametrize("file, arguments", CASES, ids=[f"{f}{'-' + '-'.join(a) if a else ''}" for f, a in CASES])
def test_same_command_lines_as_ros2_launch(tmp_path, file, arguments):
    embedded = embedded_commands(file, arguments)
    real = real_commands(file, arguments, len(embedded), tmp_path / "real")
    assert real == embedded
