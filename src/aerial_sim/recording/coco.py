"""COCO instance annotations (boxes and masks) of an exported camera, from its instance and segmentation images.

The COCO "object detection" format (Lin et al., *Microsoft COCO: Common Objects in Context*, ECCV 2014;
the layout pycocotools, Detectron2, MMDetection and torchvision read): one JSON file with ``images``,
``annotations`` and ``categories``. For every colour frame of a camera that has an instance image of the
same stamp, each scene object seen in it (instance id >= 2; :mod:`aerial_sim.world.labels`) becomes one
annotation:

- ``bbox`` ``[x, y, w, h]``: the box of its visible pixels in COCO's pixel-edge convention
  (``x = u_min``, ``w = u_max - u_min + 1``), what ``pycocotools.mask.toBbox`` gives for its mask;
- ``segmentation``: its mask as compressed RLE (pycocotools' own encoder; column-major run lengths),
  ``area`` its pixel count, ``iscrowd`` 0;
- ``category_id``: its class, the segmentation id its pixels carry in the segmentation image of the same
  stamp (or of another frame it was seen in; 0 "unknown" if no segmentation image was recorded);
- ``instance_id``: the instance id (the same object keeps it in every frame: a track id).

Category names come from the camera's class table (``<ns>/camera/class_names``, recorded in the bag:
``building``, ``pole``, ...; :attr:`aerial_sim.world.scene.Scene.class_names`); an id the table does not
name, or every id of a bag without the table, is ``class_<id>``.

The file is written beside the colour PNGs (``images/<ns>/camera/color/image_raw/coco.json``) with
``file_name`` relative to that folder.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: Instance ids below this are not objects (0 nothing hit, 1 the ground).
FIRST_OBJECT_ID = 2
UNKNOWN_CATEGORY = 0


@dataclass(frozen=True)
class CameraFrames:
    """One camera's exported frames: file paths of the colour, instance and segmentation PNGs by stamp (ns)."""

    color_dir: Path
    color: dict[int, str]  # stamp -> colour PNG file name in color_dir
    instance: dict[int, Path]  # stamp -> instance PNG path
    segmentation: dict[int, Path]  # stamp -> segmentation PNG path
    size: dict[int, tuple[int, int]]  # stamp -> (width, height) of the colour image


def read_png(path: Path) -> np.ndarray:
    """A 16-bit (or 8-bit) single-channel PNG as an int64 array."""
    from PIL import Image

    with Image.open(path) as picture:
        return np.asarray(picture).astype(np.int64)


def instance_annotations(instance: np.ndarray, segmentation: np.ndarray | None) -> list[dict]:
    """One dict per object in ``instance``: instance_id, bbox, area, segmentation (RLE), class (None unknown)."""
    from pycocotools import mask as coco_mask

    height, width = instance.shape
    found = []
    for instance_id in np.unique(instance):
        if instance_id < FIRST_OBJECT_ID:
            continue
        pixels = instance == instance_id
        rle = coco_mask.encode(np.asfortranarray(pixels.astype(np.uint8)))
        rows, columns = np.nonzero(pixels)
        class_id = None
        if segmentation is not None:
            classes, counts = np.unique(segmentation[rows, columns], return_counts=True)
            class_id = int(classes[np.argmax(counts)])
        u_min, v_min = int(columns.min()), int(rows.min())
        found.append({
            "instance_id": int(instance_id),
            "bbox": [u_min, v_min, int(columns.max()) - u_min + 1, int(rows.max()) - v_min + 1],
            "area": int(len(rows)),
            "segmentation": {"size": [int(height), int(width)], "counts": rle["counts"].decode("ascii")},
            "class_id": class_id,
        })
    return found


def coco_dataset(camera: CameraFrames, description: str = "", class_names: dict[int, str] | None = None) -> dict:
    """The COCO dictionary of ``camera`` (module docstring)."""
    images, annotations, per_frame = [], [], []
    known_class: dict[int, int] = {}
    for stamp in sorted(set(camera.color) & set(camera.instance)):
        instance = read_png(camera.instance[stamp])
        width, height = camera.size[stamp]
        if instance.shape != (height, width):
            continue  # not the same camera (a different resolution): no annotation is better than a wrong one
        segmentation = read_png(camera.segmentation[stamp]) if stamp in camera.segmentation else None
        if segmentation is not None and segmentation.shape != instance.shape:
            segmentation = None
        image_id = len(images) + 1
        images.append({"id": image_id, "file_name": camera.color[stamp], "width": width, "height": height,
                       "stamp_ns": stamp})
        found = instance_annotations(instance, segmentation)
        for item in found:
            if item["class_id"] is not None:
                known_class.setdefault(item["instance_id"], item["class_id"])
        per_frame.append((image_id, found))
    for image_id, found in per_frame:
        for item in found:
            class_id = item["class_id"] if item["class_id"] is not None else known_class.get(item["instance_id"],
                                                                                                UNKNOWN_CATEGORY)
            annotations.append({"id": len(annotations) + 1, "image_id": image_id, "category_id": class_id,
                                "bbox": item["bbox"], "area": item["area"], "segmentation": item["segmentation"],
                                "iscrowd": 0, "instance_id": item["instance_id"]})
    names = class_names or {}
    categories = [{"id": c, "name": "unknown" if c == UNKNOWN_CATEGORY else names.get(c, f"class_{c}"),
                   "supercategory": "object"}
                  for c in sorted({a["category_id"] for a in annotations})]
    return {"info": {"description": description or "aerial_sim export", "version": "1.0"},
            "licenses": [], "images": images, "annotations": annotations, "categories": categories}


def write_coco(camera: CameraFrames, description: str = "",
               class_names: dict[int, str] | None = None) -> tuple[Path, int, int]:
    """Write ``coco.json`` beside the colour PNGs; returns (path, images, annotations)."""
    dataset = coco_dataset(camera, description, class_names)
    path = camera.color_dir / "coco.json"
    path.write_text(json.dumps(dataset, separators=(",", ":")))
    return path, len(dataset["images"]), len(dataset["annotations"])
