"""Surface materials: the depth-noise coefficient and render colour of each scene surface.

The coefficient ``depth_noise_m`` is ``m`` in the stereo-IR depth-camera noise
model std = 0.005 m * exp(m * d) (seed 004, sec. 2.3, eq. (4)): 0.85 1/m for
plastic, 0.50 for cement and 0.55 for formboard, measured with an Intel
RealSense D435 at 0.5-8 m. ``lidar_reflectivity`` is the diffuse (Lambertian)
reflectance at the near-infrared wavelengths of lidars (850-905 nm), 0..1; it
sets a lidar return's intensity and how far a surface is still detected
(:mod:`aerial_sim.sensors.lidar`). The table lives in ``config/materials.yaml``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

from aerial_sim.config import ParamsError, params_from_mapping, read_yaml_file, require
from aerial_sim.paths import config_path
from aerial_sim.world.errors import located

#: Name of the material used when an object names none.
DEFAULT_MATERIAL = "default"


@dataclass(frozen=True)
class Material:
    """One surface material; depth noise and colour are required in the table (no silent defaults).

    ``lidar_reflectivity`` may be left out of older tables: 0.5 is then assumed.
    """

    depth_noise_m: float  # m in std = 0.005*exp(m*d), 1/m (seed 004, eq. (4))
    color: tuple[int, int, int]  # RGB 0-255, before Lambert shading
    lidar_reflectivity: float = 0.5  # diffuse reflectance at 850-905 nm, 0..1
    name: str = ""

    def __post_init__(self) -> None:
        require(
            math.isfinite(self.depth_noise_m) and self.depth_noise_m >= 0,
            f"depth_noise_m must be a number >= 0, got {self.depth_noise_m!r}",
        )
        require(all(0 <= c <= 255 for c in self.color), f"color must be 0-255 per channel, got {self.color!r}")
        require(
            math.isfinite(self.lidar_reflectivity) and 0 <= self.lidar_reflectivity <= 1,
            f"lidar_reflectivity must be in [0, 1], got {self.lidar_reflectivity!r}",
        )


def load_materials(path: str | Path | None = None) -> dict[str, Material]:
    """Read the material table (``config/materials.yaml`` by default): name -> :class:`Material`.

    The table must define ``default``. A bad entry raises :class:`ParamsError`
    naming the material and field, e.g. ``materials.yaml: materials.cement.depth_noise_m: ...``.
    """
    path = Path(path) if path is not None else config_path("materials.yaml")
    document = read_yaml_file(path)
    entries = document.get("materials") if isinstance(document, dict) else None
    if not isinstance(entries, dict):
        raise ParamsError(f"{path.name}: expected a top-level 'materials:' mapping")
    table = {}
    for name, values in entries.items():
        where = f"{path.name}: materials.{name}"
        if isinstance(values, dict) and "name" in values:
            raise ParamsError(f"{where}.name: unknown parameter (the key is the name)")
        with located(where):
            material = params_from_mapping(Material, values, where=where)
        table[str(name)] = dataclasses.replace(material, name=str(name))
    if DEFAULT_MATERIAL not in table:
        raise ParamsError(f"{path.name}: materials: no '{DEFAULT_MATERIAL}' entry")
    return table
