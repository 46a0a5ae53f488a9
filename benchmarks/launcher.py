"""How much the embedded launcher costs: parsing, start-up, and stopping on Ctrl-C.

    tools/dev.sh bench launcher

Prints:
- time to evaluate a launch file with includes, groups and substitutions (pure, in-process);
- wall time of ``aerial_sim launch FILE --print`` (interpreter start + parse + resolve, no nodes);
- time from SIGINT to the launcher's exit with N plain child processes running
  (the launcher's own stop overhead; ROS nodes add their own shutdown time).
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "test" / "data" / "launch"
sys.path.insert(0, str(REPO / "src"))

from aerial_sim.launcher.description import load_launch_file  # noqa: E402


def demo_prefix(root: Path) -> Path:
    """A prefix with lib/demo_pkg/talker and the ament index marker for demo_pkg."""
    executable = root / "lib" / "demo_pkg" / "talker"
    executable.parent.mkdir(parents=True)
    executable.write_text(f"#!{sys.executable}\n" + (DATA / "demo_talker.py").read_text())
    executable.chmod(0o755)
    marker = root / "share" / "ament_index" / "resource_index" / "packages" / "demo_pkg"
    marker.parent.mkdir(parents=True)
    marker.touch()
    (root / "share" / "demo_pkg").mkdir()
    return root


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        prefix = demo_prefix(Path(tmp) / "prefix")
        os.environ["AMENT_PREFIX_PATH"] = str(prefix)
        env = dict(os.environ, PYTHONPATH=str(REPO / "src"), ROS_LOG_DIR=str(Path(tmp) / "log"))

        repeats = 200
        start = time.perf_counter()
        for _ in range(repeats):
            plan = load_launch_file(DATA / "parse_main.launch.yaml")
        per_file_ms = (time.perf_counter() - start) / repeats * 1e3
        print(f"evaluate parse_main.launch.yaml (2 files, {len(plan.processes)} nodes): {per_file_ms:.2f} ms")

        times = []
        for _ in range(5):
            start = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "aerial_sim", "launch", str(DATA / "parse_main.launch.yaml"), "--print"],
                env=env, stdout=subprocess.DEVNULL, check=True,
            )  # fmt: skip
            times.append(time.perf_counter() - start)
        print(f"aerial_sim launch --print, whole command: median {statistics.median(times) * 1e3:.0f} ms of 5")

        count = 8
        launch_file = Path(tmp) / "sleepers.launch.yaml"
        launch_file.write_text(
            "launch:\n"
            + "".join(
                f"- node: {{pkg: demo_pkg, exec: talker, name: s{i}, args: '--exit-after 60'}}\n" for i in range(count)
            )
        )
        stops = []
        for _ in range(3):
            process = subprocess.Popen(
                [sys.executable, "-m", "aerial_sim", "launch", str(launch_file)],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
            time.sleep(1.5)
            start = time.perf_counter()
            os.killpg(process.pid, signal.SIGINT)
            code = process.wait(timeout=30)
            stops.append(time.perf_counter() - start)
            assert code == 0, code
        print(f"SIGINT -> exit 0 with {count} children: median {statistics.median(stops) * 1e3:.0f} ms of 3")


if __name__ == "__main__":
    main()
