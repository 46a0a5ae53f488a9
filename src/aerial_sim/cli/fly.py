"""``aerial_sim fly <mission>``: fly a mission file against a running simulation.

Runs the mission runner node (:mod:`aerial_sim.nodes.mission`) in this process:
arm, take off, fly the pattern, land, then write the track, metrics, plots and
summary to the output folder. Exit code 0 when the mission landed, 1 when it
failed, 2 for a bad mission file or argument.
"""

from __future__ import annotations

import argparse

from aerial_sim.config import ParamsError
from aerial_sim.control.mission import load_mission


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="aerial_sim fly", description=__doc__.splitlines()[0])
    parser.add_argument("mission", help="mission under config/missions/ (square_5m, circle_10m, figure_eight) or a YAML path")
    parser.add_argument("--namespace", default="drone1", help="vehicle namespace (default drone1)")
    parser.add_argument("--output", default="", help="results folder (default runs/<date-time>-<mission>/)")
    parser.add_argument("--lockstep", action="store_true", help="the simulation runs in lockstep (reliable streams)")
    options = parser.parse_args(argv)
    try:
        load_mission(options.mission)  # fail fast, with the key named, before starting ROS
    except ParamsError as error:
        print(f"aerial_sim fly: {error}")
        return 2
    from aerial_sim.nodes.mission import run_mission

    ros_args = [
        "aerial_sim_fly",
        "--ros-args",
        "-r", f"__ns:=/{options.namespace.strip('/')}",
        "-p", "use_sim_time:=true",
        "-p", f"mission:={options.mission}",
        "-p", f"lockstep:={'true' if options.lockstep else 'false'}",
    ]
    if options.output:
        ros_args += ["-p", f"output_dir:={options.output}"]
    return run_mission(ros_args)
