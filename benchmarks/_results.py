"""Where the benchmarks write their figures: ``doc/results/<benchmark>.json``, rendered by the docs.

A benchmark calls :func:`record` once with the figures it printed; the file says what was measured,
on which code (the last commit that changed src/, and whether src/ had uncommitted changes), when (UTC) and on what machine
(CPU count and model, load average at the end, Python), and the command that reproduces it. The
documentation's measurements page (doc/measurements.md) shows every such file, so a figure there is
the benchmark's last run, never a hand copy. ``--no-record`` on a benchmark's command line (or
``AERIAL_SIM_NO_RECORD=1``) leaves the file alone, e.g. for a before/after run against other code.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "doc" / "results"


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> str:
    """One line describing where this ran: CPUs, model, load average, Python."""
    load = "load average %.1f / %.1f / %.1f" % os.getloadavg() if hasattr(os, "getloadavg") else "load unknown"
    return f"{os.cpu_count()} CPUs ({_cpu_model()}), {load}, Python {platform.python_version()}"


def row(what: str, value: float | int | str, unit: str = "", note: str = "") -> dict:
    """One line of a results table."""
    return {"what": what, "value": value, "unit": unit, "note": note}


def enabled(argv: list[str] | None = None) -> bool:
    """False when the caller asked not to record (``--no-record`` or ``AERIAL_SIM_NO_RECORD=1``)."""
    argv = sys.argv if argv is None else argv
    return "--no-record" not in argv and os.environ.get("AERIAL_SIM_NO_RECORD", "") not in ("1", "true")


def record(benchmark: str, title: str, rows: list[dict], command: str | None = None, notes: str = "") -> Path | None:
    """Write ``doc/results/<benchmark>.json`` (atomically) and return its path; None when disabled."""
    if not enabled():
        return None
    RESULTS.mkdir(parents=True, exist_ok=True)
    data = {
        "benchmark": benchmark,
        "title": title,
        "command": command or f"tools/dev.sh bench {benchmark}",
        "measured_at": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        # The last commit that changed src/ (the code measured; stable when a branch is rebased onto
        # main, which a HEAD of unlanded commits is not), and whether src/ had uncommitted changes.
        "commit": _git("log", "-1", "--format=%h", "--", "src") or "unknown",
        "dirty": bool(_git("status", "--porcelain", "--untracked-files=no", "--", "src")),
        "machine": machine(),
        "cpus": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 1) if hasattr(os, "getloadavg") else None,
        "notes": notes,
        "rows": rows,
    }
    path = RESULTS / f"{benchmark}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    tmp.replace(path)
    print(f"[results] written {path}")
    return path
