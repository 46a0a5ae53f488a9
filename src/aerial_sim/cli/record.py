"""``aerial_sim record``: record topics of a running simulation into a rosbag2 (MCAP) bag.

::

    aerial_sim record [-o DIR] [TOPIC ...| --all] [--max-bag-size BYTES] [--compression lz4|zstd|none]
                      [--expected-rates TOPIC=HZ,...] [--wall-time]
    aerial_sim record --recover DIR     make a bag left by a killed recorder readable

Runs the recorder node (:mod:`aerial_sim.nodes.recorder`) in this process; stop
it with Ctrl-C. The run folder ``DIR`` receives ``bag/`` (MCAP files and
``metadata.yaml``), ``recording.txt`` and ``trajectory.png``.
"""

from __future__ import annotations

import argparse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="aerial_sim record", description=__doc__.split("\n\n")[0])
    parser.add_argument("topics", nargs="*", help="topic names or glob patterns (default: every topic but the "
                        "camera's on-demand labels and derived clouds, as a launch records)")
    parser.add_argument("-a", "--all", action="store_true", help="record every topic, the camera's labels too "
                        "(it then renders them all: about half its rate)")
    parser.add_argument("-o", "--output", default="", help="run folder (default: runs/<date_time>)")
    parser.add_argument("-x", "--exclude", default=None, help="patterns not to record (space/comma separated)")
    parser.add_argument("--max-bag-size", type=int, default=0, metavar="BYTES", help="split files at this size")
    parser.add_argument("--compression", choices=("none", "zstd", "lz4"), default=None, help="MCAP chunk compression (default lz4)")
    parser.add_argument("--expected-rates", default=None, metavar="TOPIC=HZ,...",
                        help="configured rates of periodic streams whose publisher has no rate parameter")
    parser.add_argument("--wall-time", action="store_true", help="stamp with wall-clock time instead of /clock")
    parser.add_argument("--no-report", action="store_true", help="skip recording.txt and trajectory.png at the end")
    parser.add_argument("--recover", metavar="DIR", help="repair the bag in DIR (killed recorder) and exit")
    return parser


def ros_arguments(options: argparse.Namespace) -> list[str]:
    """The recorder node's ``--ros-args`` for these command-line options."""
    if options.all and options.topics:
        raise SystemExit("aerial_sim record: give topics or --all, not both")
    params = {
        "use_sim_time": "false" if options.wall_time else "true",
        "output_dir": options.output or "auto",
        "topics": " ".join(options.topics) or "all",
        "write_report": "false" if options.no_report else "true",
        "bag.max_bag_size_bytes": str(options.max_bag_size),
    }
    if options.exclude is not None:
        params["exclude"] = options.exclude
    elif not options.topics and not options.all:  # as record.launch.yaml: labels only when asked for
        from aerial_sim.recording.recorder import ON_DEMAND_EXCLUDE

        params["exclude"] = ON_DEMAND_EXCLUDE
    if options.compression:
        params["bag.compression"] = options.compression
    if options.expected_rates:
        params["expected_rates"] = options.expected_rates
    args = ["--ros-args"]
    for name, value in params.items():
        # Quote strings so ROS does not read '' or '/a /b' as other YAML types.
        if name in ("output_dir", "topics", "exclude", "bag.compression", "expected_rates"):
            value = "'" + value.replace("'", "''") + "'"
        args += ["-p", f"{name}:={value}"]
    return args


def recover_command(path: str) -> int:
    """``--recover DIR``: repair the bag in place; a bag that cannot be read or written is one line on stderr."""
    import sys

    from aerial_sim.recording.bag import BagWriteError
    from aerial_sim.recording.bag_recovery import recover
    from aerial_sim.recording.reader import BagReadError, find_bag

    from pathlib import Path

    from aerial_sim.recording.recorder import LOG_BAG

    try:
        bags = [find_bag(path)]
        if (Path(path) / LOG_BAG / "metadata.yaml").is_file():  # a lockstep run's log lines, beside its bag
            bags.append(Path(path) / LOG_BAG)
        kept = {f"{bag.name}/{name}": count for bag in bags for name, count in recover(bag).items()}
    except (BagReadError, BagWriteError) as error:
        print(f"aerial_sim record --recover: {error}", file=sys.stderr)
        return 1
    for name, count in kept.items():
        print(f"recovered {name}: {count} messages")
    print("bag is readable" + ("" if kept else " (nothing to recover)"))
    return 0


def main(argv: list[str]) -> int:
    options = build_parser().parse_args(argv)
    if options.recover:
        return recover_command(options.recover)
    from aerial_sim.nodes.recorder import main as recorder_main

    return int(recorder_main(["aerial_sim_record", *ros_arguments(options)]) or 0)
