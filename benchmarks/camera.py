"""Camera rendering speed: ms per frame for each image type and for all three together.

Goal (issue 5): depth + segmentation + colour at 30 Hz real time (< 33 ms a frame)
at the seed-004 resolution, 460x320. Run: ``tools/dev.sh bench camera [scene ...]``.
"""

from __future__ import annotations

import sys
import time

from aerial_sim.world.camera import CameraModel, CameraParams
from aerial_sim.world.scene import load_scene

POSES = {  # a view with plenty of geometry in each scene
    "empty": ((0.0, 0.0, 2.0), (1.0, 0.0, 0.0, 0.0)),
    "urban": ((0.0, 0.0, 2.0), (1.0, 0.0, 0.0, 0.0)),
    "corridor": ((5.9, 0.0, 1.5), (1.0, 0.0, 0.0, 0.0)),
}
CASES = {
    "depth": dict(depth=True, segmentation=False, color=False),
    "segmentation": dict(depth=False, segmentation=True, color=False),
    "color": dict(depth=False, segmentation=False, color=True),
    "all three": dict(depth=True, segmentation=True, color=True),
}


def time_ms(function, repeats: int) -> float:
    function()  # warm-up
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeats):
            function()
        best = min(best, (time.perf_counter() - start) / repeats)
    return best * 1e3


def main(argv: list[str]) -> int:
    names = argv or ["empty", "urban", "corridor"]
    print("460x320 frame, ms (best of 3 runs of 10 frames); goal: all three < 33.3 ms (30 Hz)")
    print(f"{'scene':<10} {'triangles':>9} " + " ".join(f"{case:>13}" for case in CASES) + "   Hz (all)")
    for name in names:
        scene = load_scene(name)
        camera = CameraModel(CameraParams(), scene)
        position, orientation = POSES.get(name, POSES["empty"])
        figures = {case: time_ms(lambda: camera.render(position, orientation, **flags), 10) for case, flags in CASES.items()}
        print(f"{name:<10} {scene.ray_caster.triangle_count:>9} "
              + " ".join(f"{figures[case]:>13.1f}" for case in CASES) + f"   {1e3 / figures['all three']:.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
