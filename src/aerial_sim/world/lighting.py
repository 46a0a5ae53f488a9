"""Lighting of a scene: the sun from the time of day and the home point, shadows, sky, fog, exposure.

The ``lighting:`` section of a scene file (all optional; the defaults give the camera's
fixed-sun, shadowless, fog-free look)::

    lighting:
      time_of_day: "2026-06-21 15:30:00"   # sun from date, time and the home point (None: fixed sun)
      shadows: true                          # shadow rays toward the sun
      sky_zenith_color: [70, 120, 200]       # sky gradient from the camera's sky colour at the horizon
      fog_density_per_m: 0.004               # distance fog, Beer-Lambert transmittance exp(-k d)
      fog_color: [200, 210, 225]
      exposure_ev: 0.0                       # image brightness x 2^EV
      antialiasing: 2                        # colour supersampled s x s per pixel (cost x s^2)

Sun position: the solar azimuth A (clockwise from north) and elevation e (with atmospheric
refraction) of the ``astral`` package (NOAA's solar-position equations, after Meeus,
*Astronomical Algorithms*), at the home point's latitude and longitude; the unit direction
toward the sun in ENU is (cos e sin A, cos e cos A, sin e). ``time_of_day`` follows AirSim's
``simSetTimeOfDay(start_datetime="%Y-%m-%d %H:%M:%S")``: a date-time with a UTC offset
(ISO 8601, e.g. ``2026-06-21T15:30:00+02:00``) is that instant; one without is *local solar
time* at the home longitude (UTC = local - longitude / 15 h), so noon puts the sun due south
(north of the equator) whatever the time zone.

Daylight: with the sun below the horizon there is no direct light, and the ambient share fades
linearly from full at e = 0 to a tenth at e = -18 deg (astronomical twilight), a simple stand-in
for sky radiance (no sky-scattering model).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from aerial_sim.config import ParamsError, require

#: Elevation (deg) at which the night's ambient floor is reached.
TWILIGHT_END_DEG = -18.0
NIGHT_AMBIENT_SHARE = 0.1


@dataclass(frozen=True)
class LightingParams:
    """The ``lighting:`` section of a scene file (see the module docstring)."""

    time_of_day: str | None = None
    shadows: bool = False
    sky_zenith_color: tuple[int, int, int] | None = None  # None: a flat sky of the camera's sky colour
    fog_density_per_m: float = 0.0
    fog_color: tuple[int, int, int] = (200, 210, 225)
    exposure_ev: float = 0.0
    antialiasing: int = 1

    def __post_init__(self) -> None:
        if self.time_of_day is not None:
            parse_time_of_day(self.time_of_day, 0.0)
        require(math.isfinite(self.fog_density_per_m) and self.fog_density_per_m >= 0,
                f"fog_density_per_m: must be >= 0, got {self.fog_density_per_m!r}")
        require(math.isfinite(self.exposure_ev) and abs(self.exposure_ev) <= 16,
                f"exposure_ev: must be in [-16, 16], got {self.exposure_ev!r}")
        require(1 <= self.antialiasing <= 4, f"antialiasing: must be 1..4, got {self.antialiasing!r}")
        for name in ("sky_zenith_color", "fog_color"):
            color = getattr(self, name)
            require(color is None or (len(color) == 3 and all(0 <= c <= 255 for c in color)),
                    f"{name}: must be 3 values 0-255, got {color!r}")


def parse_time_of_day(text: str, longitude_deg: float) -> datetime:
    """The UTC instant of ``text`` (ISO 8601 / AirSim's "%Y-%m-%d %H:%M:%S"); no offset = local solar time."""
    try:
        moment = datetime.fromisoformat(str(text).strip())
    except ValueError as error:
        raise ParamsError(f"time_of_day: not a date-time like '2026-06-21 15:30:00': {text!r}") from error
    if moment.tzinfo is None:
        moment = (moment - timedelta(hours=longitude_deg / 15.0)).replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


def sun_position(moment: datetime, latitude_deg: float, longitude_deg: float) -> tuple[float, float]:
    """(azimuth clockwise from north, elevation with refraction), degrees, of the sun at ``moment`` (aware)."""
    from astral import Observer
    from astral.sun import azimuth, elevation

    observer = Observer(latitude=latitude_deg, longitude=longitude_deg, elevation=0.0)
    return float(azimuth(observer, moment)), float(elevation(observer, moment))


def sun_direction_enu(azimuth_deg: float, elevation_deg: float) -> tuple[float, float, float]:
    """Unit vector toward the sun in ENU: (cos e sin A, cos e cos A, sin e)."""
    a, e = math.radians(azimuth_deg), math.radians(elevation_deg)
    return (math.cos(e) * math.sin(a), math.cos(e) * math.cos(a), math.sin(e))


def daylight(elevation_deg: float) -> tuple[float, float]:
    """(direct-light factor, ambient factor) for a sun at this elevation (see the module docstring)."""
    if elevation_deg >= 0:
        return 1.0, 1.0
    fade = min(1.0, elevation_deg / TWILIGHT_END_DEG)
    return 0.0, 1.0 - (1.0 - NIGHT_AMBIENT_SHARE) * fade
