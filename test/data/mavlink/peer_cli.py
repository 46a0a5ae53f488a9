"""The command line both autopilot peers take: PORT SECONDS [--delay S] [--steps N] [--sim-seconds S] [--keep-up]."""

import argparse


def peer_arguments() -> argparse.Namespace:
    arguments = argparse.ArgumentParser()
    arguments.add_argument("port", type=int, help="the bridge's port")
    arguments.add_argument("seconds", type=float, help="longest run, wall s")
    arguments.add_argument("--delay", type=float, default=0.0, help="wall s taken over every answer (a slow autopilot)")
    arguments.add_argument("--steps", type=int, default=0, help="stop after answering this many steps (0: no limit)")
    arguments.add_argument("--sim-seconds", type=float, default=0.0,
                           help="stop once this much simulation time has passed since the first answer (0: no limit); "
                                "on a loaded machine the simulation runs slower than the wall clock")
    arguments.add_argument("--keep-up", action="store_true",
                           help="out of lockstep: answer only the newest of the states that arrived together")
    return arguments.parse_args()
