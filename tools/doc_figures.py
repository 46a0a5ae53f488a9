"""Draw the figures of the README and doc/ with the project's own models (no ROS graph needed).

    tools/dev.sh run python tools/doc_figures.py [OUT_DIR]     (default doc/images)

Writes ``camera_urban.png``: one frame of the simulated depth camera (``aerial_sim.world.camera``,
460x320, 90 deg, as the ``camera`` node renders it) from a vehicle hovering 3 m above the urban
scene's street, facing east along it: the colour image, the ideal depth image (before the ``depth_noise``
node; black = no return) and the segmentation ids. Writes ``city_frame.png``: the colour image of the
``city`` scene at 640x480 from the view ``tools/dev.sh bench worlds`` times (22 m up at its south-west
corner, facing north-east): buildings, asphalt roads with lane markings, land use and props with sun, shadows
and fog. Deterministic.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from aerial_sim.world.camera import CameraModel, CameraParams  # noqa: E402
from aerial_sim.world.scene import load_scene  # noqa: E402

POSITION = (-6.0, 0.0, 3.0)  # map ENU, metres
YAW_RAD = 0.0  # facing east, down the street


def camera_figure(path: Path) -> Path:
    scene = load_scene("urban")
    camera = CameraModel(CameraParams(), scene)
    orientation = (math.cos(YAW_RAD / 2), 0.0, 0.0, math.sin(YAW_RAD / 2))
    frame = camera.render(POSITION, orientation)
    depth = np.where(np.isfinite(frame.depth), frame.depth, 0.0)
    figure, axes = plt.subplots(1, 3, figsize=(13.5, 3.4), constrained_layout=True)
    axes[0].imshow(frame.color)
    axes[0].set_title("camera/color/image_raw (rgb8)")
    shown = axes[1].imshow(np.ma.masked_equal(depth, 0.0), cmap="viridis", vmin=0.0, vmax=40.0)
    axes[1].set_facecolor("black")
    axes[1].set_title("camera/depth/image_ideal (m; black: no return)")
    figure.colorbar(shown, ax=axes[1], shrink=0.8)
    axes[2].imshow(frame.segmentation % 20, cmap="tab20", interpolation="nearest")
    axes[2].set_title("camera/segmentation/image_raw (ids)")
    for axis in axes:
        axis.set_xticks([])
        axis.set_yticks([])
    figure.suptitle(f"urban scene, vehicle at {POSITION} m facing east (tools/doc_figures.py)", fontsize=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=80)
    plt.close(figure)
    return path


CITY_POSITION = (-30.0, -40.0, 22.0)  # map ENU, metres: benchmarks/worlds.py's city view
CITY_YAW_RAD = math.pi / 4  # facing north-east


def city_figure(path: Path) -> Path:
    from PIL import Image  # noqa: PLC0415 - only this figure writes a bare image

    camera = CameraModel(CameraParams(width=640, height=480), load_scene("city"))
    orientation = (math.cos(CITY_YAW_RAD / 2), 0.0, 0.0, math.sin(CITY_YAW_RAD / 2))
    Image.fromarray(camera.render(CITY_POSITION, orientation).color).save(path)
    return path


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else Path(__file__).resolve().parent.parent / "doc" / "images"
    print(camera_figure(out / "camera_urban.png"))
    print(city_figure(out / "city_frame.png"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
