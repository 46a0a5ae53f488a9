"""What a batch of rays hit: the result the ray caster and the pinhole rasteriser both return."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RayHits:
    """Result of casting N rays: per ray distance, surface index and unit world normal."""

    distance: np.ndarray  # (N,) float32, metres along the unit ray direction; +inf where nothing was hit
    surface: np.ndarray  # (N,) int32: SURFACE_NONE, SURFACE_GROUND or 2 + object index
    normal: np.ndarray  # (N, 3) float32 unit world normals facing the ray origin; zero where nothing was hit
    #                     ((0, 3) when the cast was asked for no normals)
    triangle: np.ndarray | None = None  # (N,) int32 index into SceneSurfaces.triangles, -1: none or ground plane
