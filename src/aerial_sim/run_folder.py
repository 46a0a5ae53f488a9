"""The run folder: where one simulation run leaves its bag, track, plots and summary.

``auto`` (or an empty value) means a new folder per run, ``runs/<date-time>/``
under the current directory, with ``runs/latest`` a symbolic link to it. Several
nodes of one launch (the recorder and the mission runner) must agree on the same
folder without talking to each other, under ``aerial_sim launch`` and under
``ros2 launch`` alike: the folder is named after the start time of the launcher
process that started them (their parent), and claimed with a marker file naming
that launcher. A node whose parent is not a launcher (``ros2 run``, a test)
gets a folder of its own.

Pure Python, no rclpy; Linux's ``/proc`` gives process start times (elsewhere
every process gets its own folder).
"""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

#: Values of a run-folder parameter that ask for a new folder per run.
AUTO_VALUES = ("", "auto")
#: The link to the newest run folder, next to the run folders.
LATEST_LINK = "latest"
#: Marker in a run folder naming the launch that owns it.
OWNER_FILE = ".aerial_sim_launch"
#: Written last by a mission node kept for the next run (``exit_when_done: false``, a warm batch run), once
#: the clock has stopped where the run ends: ``{"run", "code", "outcome": "landed" | "failed", "why"}``.
MISSION_END_FILE = "mission_end.json"
#: How long a node waits for another node of its launch to finish claiming a folder.
CLAIM_WAIT_S = 2.0


class RunFolderError(ValueError):
    """A run folder that cannot be created or written; the message names the path."""


def resolve_run_dir(value: str, root: str | Path = "runs") -> Path:
    """The run folder for a parameter ``value``: a path as given, or the launch's own for ``auto``.

    The folder exists and is writable when this returns; otherwise
    :class:`RunFolderError` names the path and the reason.
    """
    if value.strip() not in AUTO_VALUES:
        folder = Path(value).expanduser()
        _make_writable_folder(folder)
        return folder
    owner, started = launch_identity()
    base = Path(root) / time.strftime("%Y-%m-%d_%H-%M-%S", time.localtime(started))
    folder = _claim(base, owner)
    _point_latest_link(folder)
    return folder


def launch_identity() -> tuple[str, float]:
    """(identity, start time) of the launcher that started this process, else of this process."""
    parent = os.getppid()
    if _is_launcher(parent):
        started = process_start_time(parent)
        if started is not None:
            return f"{parent} {started:.2f}", started
    started = process_start_time(os.getpid()) or time.time()
    return f"{os.getpid()} {started:.2f}", started


def process_start_time(pid: int) -> float | None:
    """Wall-clock start time of process ``pid`` (Linux ``/proc``), or None if unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22: starttime, in clock ticks after boot
        boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime"))
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def _is_launcher(pid: int) -> bool:
    """True for ``ros2 launch ...`` and ``aerial_sim launch ...`` (any interpreter in front)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    words = [os.path.basename(a.decode(errors="replace")) for a in argv if a]
    return "launch" in words and any(w in ("ros2", "aerial_sim", "aerial_sim.cli.main") for w in words)


def _claim(base: Path, owner: str) -> Path:
    """``base``, or ``base-2``, ``base-3``... : the first one that is free or already this launch's."""
    for index in itertools.count(1):
        folder = base if index == 1 else base.with_name(f"{base.name}-{index}")
        try:
            _make_writable_folder(folder.parent)
            folder.mkdir()
        except FileExistsError:
            if _owner_of(folder) == owner:
                return folder
            continue
        except OSError as error:
            raise RunFolderError(f"cannot create run folder '{folder}': {error.strerror or error}") from None
        marker = folder / f"{OWNER_FILE}.{os.getpid()}"
        marker.write_text(owner + "\n")
        marker.replace(folder / OWNER_FILE)
        return folder
    raise AssertionError("unreachable")


def _owner_of(folder: Path) -> str | None:
    """The launch that claimed ``folder``; waits briefly for a claim in progress."""
    deadline = time.monotonic() + CLAIM_WAIT_S
    while True:
        try:
            return (folder / OWNER_FILE).read_text().strip()
        except FileNotFoundError:
            if time.monotonic() > deadline or any(folder.iterdir()) and not _claim_in_progress(folder):
                return None
            time.sleep(0.02)
        except OSError:
            return None


def _claim_in_progress(folder: Path) -> bool:
    return any(p.name.startswith(OWNER_FILE + ".") for p in folder.iterdir())


def _point_latest_link(folder: Path) -> None:
    """Make ``<root>/latest`` a link to ``folder`` (atomically); a real folder there is left alone."""
    link = folder.parent / LATEST_LINK
    if link.exists() and not link.is_symlink():
        return
    temporary = folder.parent / f".{LATEST_LINK}.{os.getpid()}"
    try:
        temporary.unlink(missing_ok=True)
        temporary.symlink_to(folder.name)
        temporary.replace(link)
    except OSError:
        temporary.unlink(missing_ok=True)


def _make_writable_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise RunFolderError(f"cannot create run folder '{folder}': {error.strerror or error}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise RunFolderError(f"run folder '{folder}' is not writable")
