"""``aerial_sim launch``: run a ROS 2 YAML launch file without ``ros2 launch``.

    aerial_sim launch FILE [name:=value ...]
    aerial_sim launch PACKAGE FILE [name:=value ...]     # FILE under PACKAGE's share/launch
    aerial_sim launch FILE --show-args                   # its arguments and its includes' (as ros2 launch)
    aerial_sim launch FILE --print [name:=value ...]     # the command lines, nothing started
    aerial_sim launch FILE --params-file FILE [...]      # one more params file for every node
    aerial_sim launch FILE --strict [...]                # exit 1 (3) when a process failed (while stopping)

A bare FILE name that is not a path to an existing file is looked up in the
package's ``launch/`` directory (``aerial_sim launch sim.launch.yaml``). Problems
with the file, its arguments or its executables are one line on stderr and exit
status 2; see :mod:`aerial_sim.launcher.runner` for the run-time exit statuses.

``--params-file FILE`` (repeatable, an aerial_sim extension) gives every node
one more ``--params-file`` after its own parameters, so its entries override
them; sections are keyed by node name as usual (``/**/camera``, ``/physics``),
so each node takes only its own. ``aerial_sim batch`` sets a run's swept node
parameters this way.

``--strict`` (an aerial_sim extension): exit 1 when a process exited non-zero or by
a signal, or could not be started; 3 when it did so only while the launch was being
stopped (:mod:`aerial_sim.launcher.runner`). Without it: 1 when a required process
(``on_exit: shutdown``) failed and so ended the launch (a FATAL configuration error, a
node that died), else 0 whatever the other processes did, as ``ros2 launch`` (which
exits 0 in the first case too: doc/reliability.md).
"""

from __future__ import annotations

import argparse
import datetime
import os
import shlex
import socket
import sys
import tempfile
from pathlib import Path

from aerial_sim.launcher.commands import child_environment, node_command, process_labels, resolve_executable
from aerial_sim.launcher.compose import compose
from aerial_sim.launcher.description import declared_arguments, find_package_share, load_launch_file, parse_cli_arguments
from aerial_sim.launcher.errors import LaunchError
from aerial_sim.launcher.runner import LaunchItem, Runner
from aerial_sim.paths import package_share


#: Names ending like this are files, never the PACKAGE of ``aerial_sim launch PACKAGE FILE``.
LAUNCH_FILE_SUFFIXES = (".yaml", ".yml", ".py", ".xml")


def main(argv: list[str] | None = None) -> int:
    from aerial_sim import stack_dumps

    stack_dumps.register()  # SIGUSR1: the launcher's stacks too, should it be the one stuck
    parser = argparse.ArgumentParser(
        prog="aerial_sim launch",
        usage="aerial_sim launch [-h] [-s] [-p] [--strict] [--compose] [--log-dir DIR] [--params-file FILE] [PACKAGE] FILE [name:=value ...]",
        description="Run a launch file in the ROS 2 YAML launch format (without ros2 launch).",
    )
    parser.add_argument("target", nargs="+", help="[PACKAGE] FILE [name:=value ...]")
    parser.add_argument("-s", "--show-args", action="store_true", help="list the file's launch arguments and exit")
    parser.add_argument("-p", "--print", action="store_true", dest="dry_run", help="print the commands and exit")
    parser.add_argument(
        "--strict", action="store_true",
        help="exit 1 when any process failed, 3 when only while stopping (without it: 1 only when a required "
             "process failed; ros2 launch exits 0)",
    )
    parser.add_argument(
        "--log-dir", type=Path, metavar="DIR", help="directory for the processes' output (default: under the ROS log dir)"
    )
    parser.add_argument(
        "--cpus", metavar="LIST",
        help="run the launch and every process it starts on these CPU cores only (Linux), e.g. 0,1 "
             "(aerial_sim batch's run.pin_cpus)",
    )
    parser.add_argument(
        "--compose", action="store_true",
        help="run the nodes of physics, sensors, flight controller, mission, recorder and rotor drag in one "
             "process with one executor, each with its own name, parameters and topics (aerial_sim batch's "
             "run.compose; doc/launch.md)",
    )
    parser.add_argument(
        "--params-file", type=Path, action="append", default=[], metavar="FILE",
        help="a ROS 2 parameters file given to every node after its own (repeatable)",
    )
    try:
        options = parser.parse_intermixed_args(sys.argv[1:] if argv is None else argv)
    except SystemExit as stop:
        return int(stop.code or 0)
    try:
        return _launch(options)
    except LaunchError as error:
        print(f"aerial_sim launch: error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"aerial_sim launch: error: {error}", file=sys.stderr)
        return 2


def _launch(options: argparse.Namespace) -> int:
    path, rest = resolve_launch_file(options.target)
    if options.show_args:
        _show_arguments(path)
        return 0
    plan = load_launch_file(path, parse_cli_arguments(rest))
    for warning in plan.warnings:
        print(f"[WARN] [launch]: {warning}", file=sys.stderr)
    for message in plan.messages:
        print(f"[INFO] [launch.user]: {message}")
    if not plan.processes:
        print(f"[INFO] [launch]: {path} starts no processes")
        return 0
    executables = [resolve_executable(spec, spec.environment) for spec in plan.processes]
    extra_params = [path.resolve() for path in options.params_file]
    for path in extra_params:
        if not path.is_file():
            raise LaunchError(f"--params-file: no such file: {path}")
    log_dir = None if options.dry_run else options.log_dir or default_log_dir()
    params_dir = Path(tempfile.mkdtemp(prefix="aerial_sim_launch_params_")) if log_dir is None else log_dir / "params"
    commands = [node_command(spec, executable, params_dir, extra_params)
                for spec, executable in zip(plan.processes, executables)]
    processes = plan.processes
    if options.compose:
        arguments = [command[len(executable):] for command, executable in zip(commands, executables)]
        processes, composed = compose(plan.processes, arguments, params_dir / "container_entries.json")
        by_spec = {id(spec): command for spec, command in zip(plan.processes, commands)}
        commands = [by_spec[id(spec)] if extra is None else [*resolve_executable(spec, spec.environment), *extra]
                    for spec, extra in zip(processes, composed)]
    labels = process_labels(processes)
    if options.dry_run:
        for label, command in zip(labels, commands):
            print(f"[{label}] {shlex.join(command)}")
        return 0
    if options.cpus is not None:
        pin_to_cpus(options.cpus)
    items = [LaunchItem(spec, label, command, child_environment(spec))
             for label, spec, command in zip(labels, processes, commands)]
    return Runner(items, log_dir, strict=options.strict).run()


def pin_to_cpus(text: str) -> None:
    """Restrict this process, and so every process it starts, to the cores listed in ``text`` (``0,1``)."""
    try:
        cores = {int(core) for core in text.split(",") if core.strip()}
    except ValueError:
        raise LaunchError(f"--cpus: expected core numbers separated by commas, got {text!r}") from None
    available = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    if not cores or not cores <= available:
        raise LaunchError(f"--cpus: {text!r} is not a set of this process's cores {sorted(available)}")
    os.sched_setaffinity(0, cores)


def resolve_launch_file(target: list[str]) -> tuple[Path, list[str]]:
    """``[FILE, args...]`` or ``[PACKAGE, FILE, args...]`` -> (launch file path, ``name:=value`` args)."""
    first, rest = target[0], target[1:]
    looks_like_file = first.endswith(LAUNCH_FILE_SUFFIXES) or Path(first).is_file()
    if rest and ":=" not in rest[0] and ":=" not in first and not looks_like_file:
        package, name, rest = first, rest[0], rest[1:]
        path = find_package_share(package) / "launch" / name
        if not path.is_file():
            raise LaunchError(f"launch file '{name}' not found in package '{package}' ({path})")
        return path, rest
    path = Path(first).expanduser()
    if path.is_file():
        return path, rest
    if os.sep not in first:
        shared = package_share() / "launch" / first
        if shared.is_file():
            return shared, rest
        raise LaunchError(f"launch file not found: {first} (not in the current directory nor in {shared.parent})")
    raise LaunchError(f"launch file not found: {first}")


def default_log_dir() -> Path:
    """``$ROS_LOG_DIR`` (or ``$ROS_HOME/log``, ``~/.ros/log``) / ``<time>-<host>-<pid>``, as ros2 launch."""
    root = os.environ.get("ROS_LOG_DIR") or os.path.join(
        os.environ.get("ROS_HOME") or os.path.join(os.path.expanduser("~"), ".ros"), "log"
    )
    stamp = datetime.datetime.now().strftime("%Y-%m-%d-%H-%M-%S-%f")
    return Path(root) / f"{stamp}-{socket.gethostname()}-{os.getpid()}"


def _show_arguments(path: Path) -> None:
    declarations = declared_arguments(path, include_nested=True)
    if not declarations:
        print(f"{path} declares no launch arguments")
        return
    print(f"Arguments of {path} (pass as name:=value):")
    for declaration in declarations:
        default = "(required)" if declaration.default is None else f"default: '{declaration.default}'"
        choices = f" [choices: {', '.join(declaration.choices)}]" if declaration.choices else ""
        description = declaration.description or "no description"
        print(f"\n    '{declaration.name}':\n        {description}{choices}\n        ({default})")


if __name__ == "__main__":
    raise SystemExit(main())
