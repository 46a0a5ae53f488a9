"""Which triangles belong to closed, outward-wound surfaces: the rows the rasteriser may skip while they face
away from a camera outside their object (back-face culling, :class:`~aerial_sim.world.pinhole_rasterizer.PinholeRasterizer`).
"""

from __future__ import annotations

import numpy as np

from aerial_sim.world.object_meshes import mesh_file_parts
from aerial_sim.world.scene import Scene
from aerial_sim.world.surface_tables import SURFACE_GROUND, render_surfaces


def closed_outward(triangles: np.ndarray) -> bool:
    """Whether ``triangles`` (T, 3, 3) form closed surfaces wound counter-clockwise seen from outside: corners
    merged by position, every directed edge (a, b) occurs exactly once and so does (b, a) (each edge shared by
    two triangles, wound opposite ways), and the enclosed signed volume (sum of v0 . (v1 x v2) / 6) is > 0.
    From outside such a surface a ray meets a triangle facing it (n . d < 0) before any facing away."""
    triangles = np.asarray(triangles, np.float64).reshape(-1, 3, 3)
    if len(triangles) < 4:
        return False
    from aerial_sim.world.lod import _indexed

    _, faces = _indexed(triangles)
    if len(faces) != len(triangles):  # a triangle with two corners at one position
        return False
    edges = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
    keys = edges[:, 0] * (int(faces.max()) + 1) + edges[:, 1]
    reverse = edges[:, 1] * (int(faces.max()) + 1) + edges[:, 0]
    keys.sort()
    reverse.sort()
    if np.any(keys[1:] == keys[:-1]) or not np.array_equal(keys, reverse):
        return False
    volume = np.einsum("ij,ij->i", triangles[:, 0], np.cross(triangles[:, 1], triangles[:, 2])).sum() / 6.0
    return bool(volume > 0)


def closed_rows(scene: Scene) -> np.ndarray:
    """(R,) bool over the rows of :func:`~aerial_sim.world.surface_tables.render_surfaces`: whether the row belongs to a closed, outward-wound
    surface (:func:`closed_outward`) of one object (checked once per mesh file and level, per OpenStreetMap
    building, per primitive shape), whose faces turned away from a camera outside the object are never seen
    first. Terrain and ground cover are open surfaces (built once per scene)."""
    if "closed_rows" in scene.cache:
        return scene.cache["closed_rows"]
    surfaces, lod = render_surfaces(scene)
    by_file = scene.cache.setdefault("closed_files", {})
    closed_object = np.zeros(len(scene.objects) + 2, bool)
    for index, obj in enumerate(scene.objects):
        if obj.ground_cover or obj.scale <= 0:
            continue
        if obj.shape != "mesh":
            closed_object[2 + index] = True  # trimesh's box, cylinder and icosphere
            continue
        path = scene.mesh_path(obj)
        if path not in by_file:
            by_file[path] = closed_outward(np.concatenate([part.triangles for part in mesh_file_parts(obj, scene)]))
        closed_object[2 + index] = by_file[path]
    closed = closed_object[surfaces.surface]
    if lod is not None:
        levels_by_file = scene.cache.get("lod_levels", {})
        level_rows = np.flatnonzero(lod.level > 0)
        closed[level_rows] = False
        checked = {}
        objects = surfaces.surface[level_rows] - 2
        for index in np.unique(objects):
            obj = scene.objects[index]
            path = scene.mesh_path(obj)
            levels = levels_by_file.get(path)
            if levels is None or not closed_object[2 + index]:
                continue
            rows = level_rows[objects == index]
            for number in np.unique(lod.level[rows]):
                key = (path, int(number))
                if key not in checked:
                    checked[key] = closed_outward(np.concatenate([part.triangles for part in levels[number].parts]))
                closed[rows[lod.level[rows] == number]] = checked[key]
    closed[surfaces.surface == SURFACE_GROUND] = False
    scene.cache["closed_rows"] = closed
    return closed
