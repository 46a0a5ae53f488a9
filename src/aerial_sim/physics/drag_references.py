"""Published pitch-for-level-flight points of real multirotors, to hold the drag laws against.

A multirotor in steady level flight at air speed ``V`` tilts until its thrust's horizontal part balances the drag:
``tan(pitch) = D_x / (T cos pitch)``, the drag-to-lift ratio. The points here are the only ones this project
found with a source it can cite and numbers it can read (doc/wind_and_drag.md, "Against real flight", says what
was searched): the reference tests ArduPilot's simulator is tuned from. Its multicopter model estimates the
vehicle's drag from "a test at fixed angle" (``refSpd``, ``refAngle``; the model files say they "should be taken
from a test with the copter flying at constant speed in zero wind"), and lists the vehicle's mass and size beside
them. The vehicles are not further identified, and one test point per vehicle gives no curve: these bracket what
a real quad of 1-2 kg needs, they do not describe the F450.

Each point: ``(name, mass_kg, diagonal_m, airspeed_m_s, pitch_deg, source)``.
"""

from __future__ import annotations

from typing import NamedTuple


class LevelFlightPoint(NamedTuple):
    """One real vehicle's pitch for steady level flight at one air speed (module docstring)."""

    name: str
    mass_kg: float
    diagonal_m: float
    airspeed_m_s: float
    pitch_deg: float
    source: str


ARDUPILOT_SITL = "ArduPilot SITL multicopter model (github.com/ArduPilot/ardupilot)"

LEVEL_FLIGHT_POINTS = (
    LevelFlightPoint("ArduPilot default quad (3 kg, 0.35 m rotors, 12 V)", 3.0, 0.35, 15.08, 45.0,
                     f"{ARDUPILOT_SITL}, libraries/SITL/SIM_Frame.h, default Model: refSpd 15.08 m/s, refAngle 45 deg "
                     "at 593 m AMSL, 25 C"),
    LevelFlightPoint("ArduPilot 5 inch FPV freestyle quad (0.8 kg)", 0.8, 0.25, 20.0, 45.0,
                     f"{ARDUPILOT_SITL}, Tools/autotest/models/freestyle.json: refSpd 20 m/s, refAngle 45 deg "
                     "at 607 m AMSL, 25 C"),
)

#: How far (a factor on tan(pitch)) a 1-2 kg quad may sit from the points and still be called "like them": the two
#: points differ by this much in drag-to-lift per V^2 (tan 45 / 15.08^2 against tan 45 / 20^2: 1.76), rounded up.
VEHICLE_SPREAD = 2.0
