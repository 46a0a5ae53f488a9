"""Each run's flight, thread by thread, inside ``aerial_sim batch`` (``bench batch --threads``).

:func:`install` wraps the batch's flight window (``aerial_sim.batch.execute._FlightCpu``: from a warm run's
un-pause, or a graph's first run's ``lockstep: starting``, to its landing) so that at its start and at its end
every thread of the run's processes is read from ``/proc/<pid>/task/<tid>/``: ``schedstat`` (nanoseconds on a
CPU, nanoseconds runnable but waiting for one) and ``status`` (voluntary and involuntary context switches).
The difference, per thread name (the physics loop and the recorder's taker name theirs, the executor thread
keeps the process's), is the flight's; :func:`per_run` pairs it with the run's entry (simulated seconds).
Two readings a run, as the batch's own, so the measuring adds nothing while the graph flies.
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from collections import defaultdict
from pathlib import Path

#: run folder -> {"wall_s": .., "threads": {name: [cpu_ns, wait_ns, voluntary, involuntary]}, "probe_ms": ..}
WINDOWS: dict[str, dict] = {}
#: (monotonic s, thread CPU ms) of each :func:`probe_work` the speed probe ran
PROBES: list[tuple[float, float]] = []
#: The probe's cost the flights are scaled to in the summary (ms).
REFERENCE_PROBE_MS = 2.0
#: Wall seconds between two probes.
PROBE_PERIOD_S = 0.1


def probe_work() -> float:
    """Thread CPU ms of a fixed piece of Python (about 2 ms on the 2-core machine at its fastest): what the
    machine gives a CPU second right now. The same work cost 13.7 to 24.8 ms (ten times this) within 20 s
    on the 2-core machine, whatever ran on its other core."""
    began = time.thread_time_ns()
    total = 0
    for value in range(20000):
        total += value * value % 7
    return (time.thread_time_ns() - began) / 1e6


def start_probe() -> threading.Event:
    """Run :func:`probe_work` every ``PROBE_PERIOD_S`` in a daemon thread until the event is set."""
    stop = threading.Event()

    def loop():
        while not stop.wait(PROBE_PERIOD_S):
            PROBES.append((time.monotonic(), probe_work()))

    threading.Thread(target=loop, name="speed-probe", daemon=True).start()
    return stop


def probe_between(began: float, ended: float) -> float | None:
    """Mean probe cost (ms) over a window; None without a probe in it."""
    times = [t for t, _ in PROBES]
    values = [v for _, v in PROBES[bisect.bisect_left(times, began):bisect.bisect_right(times, ended)]]
    return sum(values) / len(values) if values else None


def snapshot(session_id: int, marker: str) -> dict[tuple[int, int], tuple[str, list[int]]]:
    """(pid, tid) -> (thread name, [cpu ns, run-queue wait ns, voluntary, involuntary switches])."""
    from aerial_sim.batch.processes import session_processes

    found = {}
    for pid in session_processes(session_id, marker):
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            base = f"/proc/{pid}/task/{tid}"
            try:
                with open(f"{base}/schedstat") as stream:
                    run_ns, wait_ns = (int(v) for v in stream.read().split()[:2])
                with open(f"{base}/status") as stream:
                    status = stream.read()
            except (OSError, ValueError):
                continue
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            name = fields.get("Name", "?").strip()
            found[(pid, int(tid))] = (name, [run_ns, wait_ns, int(fields.get("voluntary_ctxt_switches", 0)),
                                             int(fields.get("nonvoluntary_ctxt_switches", 0))])
    return found


def difference(before: dict, after: dict) -> dict[str, list[int]]:
    """Per thread name, what the threads did between two snapshots (a thread born meanwhile: all of it)."""
    spent: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for key, (name, values) in after.items():
        old = before.get(key, (name, [0, 0, 0, 0]))[1]
        total = spent[name]
        for index, value in enumerate(values):
            total[index] += value - old[index]
    return dict(spent)


def install() -> None:
    """Wrap the batch's flight window (both modules that name the class)."""
    from aerial_sim.batch import execute, warm

    base = execute._FlightCpu

    class Probe(base):
        def begin(self) -> None:
            super().begin()
            self._threads_at = (time.monotonic(), snapshot(self.session_id, self.marker))

        def sample(self, landed: bool) -> None:
            ended = self._end is not None
            super().sample(landed)
            start = getattr(self, "_threads_at", None)
            if not ended and self._end is not None and start is not None:
                now = time.monotonic()
                WINDOWS[str(self.bag.parent)] = {"wall_s": now - start[0], "window": (start[0], now),
                                                 "threads": difference(start[1], snapshot(self.session_id, self.marker))}

    execute._FlightCpu = Probe
    warm._FlightCpu = Probe


def per_run(out: Path, entries: list[dict]) -> list[dict]:
    """Each run's flight window joined with its entry: CPU s and wait s per thread, switches."""
    runs = []
    for entry in entries:
        window = WINDOWS.get(str(out / "runs" / entry["run_id"]))
        if window is None or not entry.get("sim_s"):
            continue
        runs.append({"run": entry["run_id"], "warm": bool(entry.get("warm")), "sim_s": float(entry["sim_s"]),
                     "flight_cpu_s": float(entry.get("flight_cpu_s") or 0.0), "wall_s": window["wall_s"],
                     "probe_ms": probe_between(*window["window"]),
                     "threads": {name: [v[0] / 1e9, v[1] / 1e9, v[2], v[3]] for name, v in window["threads"].items()}})
    return runs


def summary(runs: list[dict], top: int = 4) -> list[str]:
    """Lines: per simulated second, the flight's CPU (the batch's and the threads' sum), wall time, run-queue
    wait, and per thread name CPU and context switches a 4 ms period (means over ``runs``, with the range)."""
    if not runs:
        return ["  (no flight windows)"]
    def spread(values: list[float], digits: int = 3) -> str:
        mean = sum(values) / len(values)
        return f"{mean:.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"
    names: dict[str, float] = defaultdict(float)
    for run in runs:
        for name, values in run["threads"].items():
            names[name] += values[0]
    lines = [f"  {len(runs)} runs, per simulated s: flight (batch) {spread([r['flight_cpu_s'] / r['sim_s'] for r in runs])}, "
             f"threads {spread([sum(v[0] for v in r['threads'].values()) / r['sim_s'] for r in runs])}, "
             f"wall {spread([r['wall_s'] / r['sim_s'] for r in runs])}, "
             f"waiting for a CPU {spread([sum(v[1] for v in r['threads'].values()) / r['sim_s'] for r in runs])}"]
    probed = [r for r in runs if r.get("probe_ms")]
    if probed:
        lines.append(f"  speed probe {spread([r['probe_ms'] for r in probed], 2)} ms; flight at a probe of "
                     f"{REFERENCE_PROBE_MS:g} ms: {spread([r['flight_cpu_s'] / r['sim_s'] * REFERENCE_PROBE_MS / r['probe_ms'] for r in probed])}")
    periods = lambda run: run["sim_s"] / 0.004  # noqa: E731
    shown = sorted(names, key=lambda n: -names[n])[:top]
    for name in shown + ["(others)"]:
        def pick(run, index, name=name):
            if name == "(others)":
                return sum(v[index] for n, v in run["threads"].items() if n not in shown)
            return run["threads"].get(name, [0, 0, 0, 0])[index]
        lines.append(f"  {name:>14}: CPU {spread([pick(r, 0) / r['sim_s'] for r in runs])}, "
                     f"wait {spread([pick(r, 1) / r['sim_s'] for r in runs])}, "
                     f"switches a period: voluntary {spread([pick(r, 2) / periods(r) for r in runs], 2)}, "
                     f"involuntary {spread([pick(r, 3) / periods(r) for r in runs], 2)}")
    return lines
