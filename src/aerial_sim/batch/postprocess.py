"""``python -m aerial_sim.batch.postprocess RUN_DIR [--export] [--no-plots]``: a finished run's figures, in their own process.

Reads the run's bag once, for the recorder's summary (:mod:`aerial_sim.recording.summary`:
simulated duration, real-time factor, message counts) and the content digest
(:mod:`aerial_sim.recording.digest`: per-topic digests, drops), optionally
exports it with :func:`aerial_sim.recording.export.export_bag` into
``RUN_DIR/dataset``, and writes everything to ``RUN_DIR/bag_report.json``, and
the recorder's ``recording.txt`` and ``trajectory.png`` when the recorder left them
out (a batch run's recorder does: :data:`aerial_sim.batch.execute.BATCH_NODE_DEFAULTS`),
and the mission's ``xy_over_time.png`` and ``top_view.png`` when it left them out (the same); with
``--no-plots`` (the sweep's ``run.plots: false``) none of the three PNGs, and matplotlib is not imported.
Run as a separate process so a bad bag can only fail its own run, and so
several runs' post-processing use several cores.

``python -m aerial_sim.batch.postprocess --serve``: the same for many runs, one after another, in one
process (:mod:`aerial_sim.batch.postprocessor`, what warm batch runs use): a job per line on stdin
(JSON: ``run_dir``, ``export``, ``plots``, ``log``), its output and any traceback into the job's
``log`` (file descriptors 1 and 2 point there while it runs, so a SIGUSR1 stack dump lands there
too), and one JSON line back on the original stdout per job: ``ok`` and ``cpu_s`` (this process's
CPU for the job; the first job's includes the process's start and imports). Imports (matplotlib,
the bag reader, the exporter) are paid once: the smoke sweep's post-processing took 3.2 CPU s for
a first run and 2.1-2.3 for each later one in one process.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPORT_FILE = "bag_report.json"
DATASET_DIR = "dataset"


def run_end_ns(run_dir: Path) -> int | None:
    """The end of the run: the last stamp of the mission's ``track.csv`` (the disarm's), or None without one.
    The digest stops there (:class:`aerial_sim.recording.digest.ContentCollector`)."""
    try:
        with open(run_dir / "track.csv", "rb") as stream:
            stream.seek(0, 2)
            stream.seek(max(0, stream.tell() - 4096))
            last = stream.read().decode(errors="replace").strip().splitlines()[-1]
        return round(float(last.split(",")[0]) * 1e9)
    except (OSError, IndexError, ValueError):
        return None


def bag_report(run_dir: Path, export: bool, plots: bool = True) -> dict:
    """The run's bag report; the summary, the digest and the export share one read of the bag."""
    from aerial_sim.recording.digest import ContentCollector
    from aerial_sim.recording.reader import find_bag
    from aerial_sim.recording.summary import SummaryCollector
    from aerial_sim.recording.topic_reader import read_by_topic

    bag = find_bag(run_dir)
    summarizer, digester = SummaryCollector(bag), ContentCollector(until_ns=run_end_ns(run_dir))
    consumers = [summarizer, digester]
    if export:
        from aerial_sim.recording.export import ExportCollector

        exporter = ExportCollector(bag, run_dir / DATASET_DIR)
        consumers.append(exporter)
    try:
        read_by_topic(bag, consumers)
    finally:
        if export:
            exporter.close()
    summary, content = summarizer.result(), digester.result()
    report = {
        "sim_s": summary.duration_s,
        "flight_wall_s": summary.wall_duration_s,
        "real_time_factor": summary.real_time_factor,
        "messages": content.messages,
        "drops": content.drops,
        # Streams under 95 % of the rate their publisher was configured with, and the messages known missed
        # (stamp gaps at that rate, losses the middleware reported): the recording.txt figures.
        "low_streams": {h.topic: {"delivered_hz": h.delivered_hz, "configured_hz": h.configured_hz}
                        for h in summary.low_streams},
        "missed": summary.missed,
        "bag_mb": sum(p.stat().st_size for p in summary.bag.glob("*.mcap")) / 1e6,
        "bag_digest": content.digest,
        "topics": {
            t.topic: {"type": t.msgtype, "count": t.count, "digest": t.digest, "drops": t.drops}
            for t in content.topics.values()
        },
    }
    if export:
        exporter.result()
        report["dataset"] = DATASET_DIR
    _write_run_report(summary, run_dir, plots)
    if plots:
        _write_mission_plots(run_dir)
    return report


def _write_run_report(summary, run_dir: Path, plots: bool = True) -> None:
    """``recording.txt`` and (with ``plots``) ``trajectory.png``, when the recorder left them to us (a batch
    run's default)."""
    from aerial_sim.recording.summary import REPORT_NAME

    if (run_dir / REPORT_NAME).exists():
        return
    (run_dir / REPORT_NAME).write_text(summary.text())
    if plots and summary.trajectories:
        from aerial_sim.recording.summary import plot_trajectory

        plot_trajectory(summary, run_dir / "trajectory.png")


def _write_mission_plots(run_dir: Path) -> list[Path]:
    """The mission's ``xy_over_time.png`` and ``top_view.png`` from its ``track.csv``, when it left them to us."""
    from aerial_sim.control.track import write_plots_from_csv

    track, metrics = run_dir / "track.csv", run_dir / "metrics.json"
    if track.is_file() and metrics.is_file() and not (run_dir / "top_view.png").exists():
        title = json.loads(metrics.read_text()).get("mission", {}).get("name", "mission")
        return write_plots_from_csv(run_dir, title)
    return []


def draw_plots(run_dir: Path) -> list[Path]:
    """A finished run's PNGs that are not there yet (a sweep flown with ``run.plots: false``), drawn now from its
    bag and ``track.csv``: ``aerial_sim batch SWEEP --draw-plots``. The PNGs written."""
    from aerial_sim.recording.reader import find_bag
    from aerial_sim.recording.summary import plot_trajectory, summarize

    written = []
    if not (run_dir / "trajectory.png").exists():
        summary = summarize(find_bag(run_dir))
        if summary.trajectories:
            written.append(plot_trajectory(summary, run_dir / "trajectory.png"))
    return written + _write_mission_plots(run_dir)


def serve(requests, replies) -> int:
    """The ``--serve`` loop: one job per line of ``requests`` until it ends (module doc)."""
    import os
    import resource
    import traceback

    def cpu_s() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    counted = 0.0
    for line in requests:
        if not line.strip():
            continue
        ok = False
        try:
            job = json.loads(line)
            log = open(job["log"], "a", encoding="utf-8")  # noqa: SIM115
        except (ValueError, KeyError, TypeError, OSError) as error:
            replies.write(json.dumps({"ok": False, "cpu_s": 0.0, "error": f"bad job: {error}"}) + "\n")
            replies.flush()
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            run_dir = Path(job["run_dir"])
            report = bag_report(run_dir, bool(job.get("export")), plots=bool(job.get("plots", True)))
            (run_dir / REPORT_FILE).write_text(json.dumps(report, indent=2) + "\n")
            ok = True
        except Exception:  # noqa: BLE001 - this run's failure, in its log; the next job goes on
            traceback.print_exc()
        finally:
            if "matplotlib.pyplot" in sys.modules:
                sys.modules["matplotlib.pyplot"].close("all")
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            log.close()
        now = cpu_s()
        replies.write(json.dumps({"ok": ok, "cpu_s": round(now - counted, 3)}) + "\n")
        replies.flush()
        counted = now
    return 0


def main(argv: list[str]) -> int:
    from aerial_sim import stack_dumps

    stack_dumps.register()
    if argv == ["--serve"]:
        import os

        replies = os.fdopen(os.dup(1), "w", encoding="utf-8")  # fd 1 points at each job's log while it runs
        return serve(sys.stdin, replies)
    parser = argparse.ArgumentParser(prog="python -m aerial_sim.batch.postprocess")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--export", action="store_true", help="also export the bag to RUN_DIR/dataset")
    parser.add_argument("--no-plots", action="store_true", help="draw none of the run's PNG plots")
    options = parser.parse_args(argv)
    report = bag_report(options.run_dir, options.export, plots=not options.no_plots)
    (options.run_dir / REPORT_FILE).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
