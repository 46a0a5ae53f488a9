"""A scene as drawable primitives, shared by the RViz markers and the web viewer.

Boxes, cylinders and spheres stay primitives (RViz CUBE/CYLINDER/SPHERE markers
and viser's own shapes draw them exactly); mesh objects become triangle lists
(world frame) via :func:`aerial_sim.world.object_meshes.object_mesh`, so neither
client needs the mesh file. The ground is the plane z = 0 of the scene
(:mod:`aerial_sim.world.scene`), drawn as a thin slab of ``ground_size_m``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aerial_sim.world.scene import Scene

GROUND_THICKNESS_M = 0.02


@dataclass(frozen=True)
class Primitive:
    """One drawable: a box, cylinder (axis = local z), sphere or triangle mesh, posed in ``map`` (ENU)."""

    name: str
    kind: str  # 'box' | 'cylinder' | 'sphere' | 'mesh'
    position: tuple[float, float, float]
    orientation: tuple[float, float, float, float]  # (w, x, y, z), object -> map
    size: tuple[float, float, float]  # full extents along local x, y, z (m)
    color: tuple[int, int, int]  # RGB 0-255
    segmentation_id: int = 0
    vertices: np.ndarray | None = None  # mesh: (N, 3) float32, map frame
    faces: np.ndarray | None = None  # mesh: (M, 3) uint32


def scene_primitives(scene: Scene, ground_size_m: float = 120.0) -> list[Primitive]:
    """The ground slab followed by every scene object, in the scene file's order."""
    ground = Primitive(
        name="ground", kind="box", position=(0.0, 0.0, -GROUND_THICKNESS_M / 2), orientation=(1.0, 0.0, 0.0, 0.0),
        size=(ground_size_m, ground_size_m, GROUND_THICKNESS_M), color=tuple(scene.object_color(scene.ground)),
        segmentation_id=scene.ground.segmentation_id,
    )  # fmt: skip
    primitives = [ground]
    for obj in scene.objects:
        color = tuple(int(c) for c in scene.object_color(obj))
        common = dict(name=obj.name, position=tuple(map(float, obj.position)), orientation=obj.quaternion,
                      color=color, segmentation_id=obj.segmentation_id)  # fmt: skip
        if obj.shape == "box":
            primitives.append(Primitive(kind="box", size=tuple(map(float, obj.size)), **common))
        elif obj.shape == "cylinder":
            primitives.append(Primitive(kind="cylinder", size=(2 * obj.radius, 2 * obj.radius, obj.height), **common))
        elif obj.shape == "sphere":
            primitives.append(Primitive(kind="sphere", size=(2 * obj.radius,) * 3, **common))
        else:
            from aerial_sim.world.object_meshes import object_mesh

            mesh = object_mesh(obj, scene)
            common.update(position=(0.0, 0.0, 0.0), orientation=(1.0, 0.0, 0.0, 0.0))
            primitives.append(
                Primitive(kind="mesh", size=(1.0, 1.0, 1.0), vertices=np.asarray(mesh.vertices, np.float32),
                          faces=np.asarray(mesh.faces, np.uint32), **common)  # fmt: skip
            )
    return primitives
