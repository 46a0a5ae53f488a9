"""Dataset labels from a rendered frame: 2D boxes of the instances in view and their 3D boxes in the world.

- :func:`boxes_2d`: for each instance id in an instance image, the tight pixel box
  (u_min, v_min, u_max, v_max, inclusive) of its visible pixels and their count (the COCO-style box of
  its visible part; an occluded object's box covers what is seen of it).
- :func:`detections_2d`: the same boxes with each instance's class id and name (what the camera node
  publishes on ``camera/detections_2d`` and the AirSim server answers ``simGetDetections`` with).
- :func:`boxes_3d`: each object's box in ``map``: a ``box`` object's own oriented box (centre, size,
  orientation), any other shape's axis-aligned box of its world triangles.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aerial_sim.world.object_meshes import object_parts
from aerial_sim.world.scene import Scene


@dataclass(frozen=True)
class Box3d:
    """An object's box in ``map``: centre (m), full size along its own axes (m), orientation (w, x, y, z)."""

    instance_id: int
    class_id: int
    name: str
    center: tuple[float, float, float]
    size: tuple[float, float, float]
    orientation: tuple[float, float, float, float]


def boxes_2d(instance: np.ndarray, first_object_id: int = 2) -> dict[int, tuple[int, int, int, int, int]]:
    """instance id -> (u_min, v_min, u_max, v_max, pixel count) for every object id in the image.

    One pass of ``np.bincount`` per axis: how many of each id's pixels lie in each row and each column; the
    first and last non-empty row and column are its box (``benchmarks/labels.py``).
    """
    height, width = instance.shape
    ids = instance.astype(np.intp, copy=False)
    all_counts = np.bincount(ids.ravel())
    present = np.flatnonzero(all_counts)  # the ids in the image, ascending
    counts = all_counts[present]
    keep = present >= first_object_id
    if not keep.any():
        return {}
    n = len(present)
    compact = np.zeros(len(all_counts), np.intp)
    compact[present] = np.arange(n)
    inverse = compact[ids]  # (H, W): index of each pixel's id in present
    per_row = np.bincount((inverse * height + np.arange(height)[:, None]).ravel(), minlength=n * height)
    per_column = np.bincount((inverse * width + np.arange(width)[None, :]).ravel(), minlength=n * width)
    rows = per_row.reshape(n, height) > 0
    columns = per_column.reshape(n, width) > 0
    v_min, v_max = rows.argmax(axis=1), height - 1 - rows[:, ::-1].argmax(axis=1)
    u_min, u_max = columns.argmax(axis=1), width - 1 - columns[:, ::-1].argmax(axis=1)
    return {int(present[k]): (int(u_min[k]), int(v_min[k]), int(u_max[k]), int(v_max[k]), int(counts[k]))
            for k in np.flatnonzero(keep)}


@dataclass(frozen=True)
class Box2d:
    """The visible part of one object in an image: inclusive pixel box (column u, row v) and its pixel count.

    COCO's ``bbox`` of the same pixels is ``[u_min, v_min, u_max - u_min + 1, v_max - v_min + 1]``
    (pixel edges; :attr:`coco_bbox`).
    """

    instance_id: int
    class_id: int
    name: str
    u_min: int
    v_min: int
    u_max: int
    v_max: int
    pixels: int

    @property
    def coco_bbox(self) -> list[int]:
        return [self.u_min, self.v_min, self.u_max - self.u_min + 1, self.v_max - self.v_min + 1]


def detections_2d(instance: np.ndarray, scene: Scene) -> list[Box2d]:
    """One :class:`Box2d` per scene object seen in ``instance`` (ascending instance id; the ground is not an object)."""
    boxes = boxes_3d(scene)
    found = []
    for instance_id, (u_min, v_min, u_max, v_max, count) in boxes_2d(instance).items():
        box = boxes.get(instance_id)
        if box is not None:
            found.append(Box2d(instance_id, box.class_id, box.name, u_min, v_min, u_max, v_max, count))
    return found


def boxes_3d(scene: Scene) -> dict[int, Box3d]:
    """instance id -> :class:`Box3d` for every object of the scene (built once per scene)."""
    if "boxes_3d" in scene.cache:
        return scene.cache["boxes_3d"]
    boxes = {}
    for index, obj in enumerate(scene.objects):
        if obj.ground_cover:  # a road or a lawn is ground, not a thing: no box
            continue
        instance_id = scene.instance_id(index)
        if obj.shape == "box":
            box = Box3d(instance_id, obj.segmentation_id, obj.name, tuple(map(float, obj.position)),
                        tuple(map(float, obj.size)), tuple(map(float, obj.quaternion)))
        else:
            corners = np.concatenate([part.triangles.reshape(-1, 3) for part in object_parts(obj, scene)])
            low, high = corners.min(axis=0), corners.max(axis=0)
            box = Box3d(instance_id, obj.segmentation_id, obj.name, tuple(map(float, (low + high) / 2)),
                        tuple(map(float, high - low)), (1.0, 0.0, 0.0, 0.0))
        boxes[instance_id] = box
    scene.cache["boxes_3d"] = boxes
    return boxes
