"""The command line both autopilot peers take: PORT SECONDS [--delay S] [--steps N]."""

import argparse


def peer_arguments() -> argparse.Namespace:
    arguments = argparse.ArgumentParser()
    arguments.add_argument("port", type=int, help="the bridge's port")
    arguments.add_argument("seconds", type=float, help="longest run, wall s")
    arguments.add_argument("--delay", type=float, default=0.0, help="wall s taken over every answer (a slow autopilot)")
    arguments.add_argument("--steps", type=int, default=0, help="stop after answering this many steps (0: no limit)")
    return arguments.parse_args()
