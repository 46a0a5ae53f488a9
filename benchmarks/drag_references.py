"""The F450's pitch for level flight under each drag law at the test speeds of the published real-vehicle points
(aerial_sim.physics.drag_references), and tan(pitch) against theirs.

    tools/dev.sh bench drag_references
"""

from __future__ import annotations

import math

from aerial_sim.physics.drag import DRAG_LAWS, level_flight_pitch
from aerial_sim.physics.drag_references import LEVEL_FLIGHT_POINTS, VEHICLE_SPREAD
from aerial_sim.vehicles.multirotor import load_vehicle


def main() -> None:
    f450 = load_vehicle("f450")
    print(f"F450 ({f450.mass_kg} kg) against real vehicles; 'like them' = tan(pitch) within x{VEHICLE_SPREAD:g}")
    for point in LEVEL_FLIGHT_POINTS:
        print(f"{point.name}: {point.pitch_deg:g} deg at {point.airspeed_m_s:g} m/s ({point.source})")
        for law in DRAG_LAWS:
            pitch, _ = level_flight_pitch(law, f450, point.airspeed_m_s)
            factor = math.tan(pitch) / math.tan(math.radians(point.pitch_deg))
            verdict = "like them" if 1 / VEHICLE_SPREAD < factor < VEHICLE_SPREAD else "unlike them"
            print(f"  f450 {law:9s}: {math.degrees(pitch):5.1f} deg, tan ratio {factor:5.2f} ({verdict})")


if __name__ == "__main__":
    main()
