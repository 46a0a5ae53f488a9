"""The ``aerial_sim`` command: one entry point, one module per sub-command.

Each sub-command lives in its own module exposing ``main(argv: list[str]) -> int``
and is imported only when used, so ``aerial_sim launch`` never pays for
``aerial_sim export``'s imports.
"""

from __future__ import annotations

import importlib
import signal
import sys

#: ``aerial_sim launch`` holds these from its first line until its handlers are in place
#: (:meth:`aerial_sim.launcher.runner.Runner.run`): a stop that comes while it reads the launch files
#: then stops the launch. Without this, one sent to a launcher started in the background by a script
#: (which starts with SIGINT ignored, as POSIX shells start background jobs) was lost, and the launch
#: ran on (2 of 9 start/stop cycles with a SIGINT 0.5 s after the start; issue 34).
LAUNCH_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

SUBCOMMANDS = {
    "launch": ("aerial_sim.launcher.cli", "run a launch file (ROS 2 YAML launch format) without ros2 launch"),
    "topics": ("aerial_sim.cli.topics", "list live topics with their types and measured rates"),
    "fly": ("aerial_sim.cli.fly", "fly a mission file against a running simulation"),
    "record": ("aerial_sim.cli.record", "record topics to a rosbag2 (MCAP) bag"),
    "export": ("aerial_sim.cli.export", "export a bag to PNG/NPY/CSV dataset files"),
    "drag-eval": ("aerial_sim.cli.drag_eval", "compare drag models against a recorded flight"),
    "batch": ("aerial_sim.cli.batch", "run a sweep of headless simulations (datasets at scale), locally or on Ray"),
    "airsim-settings": ("aerial_sim.cli.airsim_settings", "the launch arguments an AirSim settings.json implies"),
    "precompile": ("aerial_sim.cli.precompile", "compile the numba kernels once (nodes then start without compiling)"),
}


def usage() -> str:
    lines = ["usage: aerial_sim <command> [args...]", "", "commands:"]
    lines += [f"  {name:<10} {summary}" for name, (_, summary) in SUBCOMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in SUBCOMMANDS:
        print(f"aerial_sim: unknown command '{name}'\n\n{usage()}", file=sys.stderr)
        return 2
    module_name, _ = SUBCOMMANDS[name]
    if name == "launch":
        signal.pthread_sigmask(signal.SIG_BLOCK, LAUNCH_STOP_SIGNALS)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and error.name.startswith("aerial_sim"):
            print(f"aerial_sim: '{name}' is not available in this version", file=sys.stderr)
            return 2
        raise
    try:
        return int(module.main(rest) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
