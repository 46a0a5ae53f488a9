"""Dataset labels' cost per frame (issue 29): 2D boxes, COCO masks, lens distortion and colour noise, beside the
render they come from.

CPU ms of this thread per frame (best of 3 runs of 10 frames) at 460x320 over ``urban`` from the camera
benchmark's pose: the plain depth + segmentation + colour render, the same with the instance image, the
2D boxes of that instance image (``world.labels.detections_2d``, what ``camera/detections_2d`` and
``simGetDetections`` cost beyond the render), its COCO annotations (RLE masks by pycocotools, the export's
per-frame work), the render through a plumb_bob lens (``world.lens.LensCamera``) and the colour noise.
Run: ``tools/dev.sh bench labels``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import record, row  # noqa: E402
from aerial_sim.recording.coco import instance_annotations  # noqa: E402
from aerial_sim.world.camera import CameraModel, CameraParams  # noqa: E402
from aerial_sim.world.labels import detections_2d  # noqa: E402
from aerial_sim.world.lens import LensCamera, LensParams, color_noise  # noqa: E402
from aerial_sim.world.scene import load_scene  # noqa: E402

POSE = ((0.0, 0.0, 2.0), (1.0, 0.0, 0.0, 0.0))
D = (-0.28, 0.09, 0.0012, -0.0008, -0.01)


def cpu_ms(function, repeats: int = 10) -> float:
    function()  # warm-up
    best = float("inf")
    for _ in range(3):
        start = time.thread_time()
        for _ in range(repeats):
            function()
        best = min(best, (time.thread_time() - start) / repeats)
    return best * 1e3


def main() -> None:
    scene = load_scene("urban")
    params = CameraParams(width=460, height=320)
    camera = CameraModel(params, scene)
    lens = LensCamera(params, LensParams(distortion_d=D), scene)
    frame = camera.render(*POSE, instance=True)
    objects = len(detections_2d(frame.instance, scene))
    figures = [
        ("render depth + segmentation + colour", cpu_ms(lambda: camera.render(*POSE))),
        ("same + instance image", cpu_ms(lambda: camera.render(*POSE, instance=True))),
        (f"2D boxes of the instance image ({objects} objects)", cpu_ms(lambda: detections_2d(frame.instance, scene))),
        ("COCO annotations: boxes + RLE masks", cpu_ms(lambda: instance_annotations(frame.instance.astype(int),
                                                                                     frame.segmentation.astype(int)))),
        ("render through a plumb_bob lens", cpu_ms(lambda: lens.render(*POSE))),
        ("colour noise (std 3 levels)", cpu_ms(lambda: color_noise(frame.color, 3.0, 1, 12345))),
    ]
    rows = []
    for what, ms in figures:
        print(f"{what:55s} {ms:7.2f} ms CPU per frame")
        rows.append(row(what, round(ms, 2), "ms CPU / frame", "urban, 460x320"))
    record("labels", "Dataset labels: CPU per 460x320 urban frame", rows)


if __name__ == "__main__":
    main()
