"""``aerial_sim airsim-settings [FILE]``: what an AirSim settings.json means for aerial_sim.

Prints the ``sim.launch.yaml`` arguments that realise the file (vehicle count,
clock speed, port, lidar/rangefinder, ...) as one line to paste after
``aerial_sim launch sim.launch.yaml``, then one line per key it does not
support. Without FILE: AirSim's search order (~/Documents/AirSim/settings.json).
Exit status 1 with one line for a file that cannot be used.
"""

from __future__ import annotations

import argparse
import sys

from aerial_sim.airsim.settings import SettingsError, find_settings_file, launch_arguments, load_settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="aerial_sim airsim-settings", description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", default="auto", help="settings.json (default: AirSim's search order)")
    args = parser.parse_args(argv)
    try:
        path = find_settings_file(args.file)
        if path is None:
            print("no AirSim settings file (~/Documents/AirSim/settings.json): AirSim's defaults", file=sys.stderr)
            return 0
        settings = load_settings(path)
    except SettingsError as error:
        print(f"aerial_sim airsim-settings: {error}", file=sys.stderr)
        return 1
    arguments = launch_arguments(settings) | {"airsim_settings": str(path)}
    print(" ".join(f"{key}:={value}" for key, value in arguments.items()))
    for warning in settings.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return 0
