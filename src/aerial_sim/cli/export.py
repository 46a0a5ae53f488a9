"""``aerial_sim export BAG DIR``: write a bag as PNG/NPY images, NPY/PLY point clouds, CSV sensors and aligned poses.

BAG is a bag directory or a run folder holding ``bag/``. The layout is described
in :mod:`aerial_sim.recording.export` and in ``DIR/dataset.yaml``.
"""

from __future__ import annotations

import argparse


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="aerial_sim export", description=__doc__.split("\n\n")[0])
    parser.add_argument("bag", help="bag directory (with metadata.yaml) or run folder")
    parser.add_argument("out_dir", help="output directory")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    options = parser.parse_args(argv)

    from rosbags.highlevel import AnyReaderError
    from rosbags.rosbag2 import ReaderError

    from aerial_sim.recording.export import ExportError, export_bag
    from aerial_sim.recording.reader import BagReadError

    try:
        result = export_bag(options.bag, options.out_dir, progress=not options.no_progress)
    except (BagReadError, ExportError) as error:
        print(f"aerial_sim export: {error}")
        return 1
    except (AnyReaderError, ReaderError, OSError) as error:  # a bag the reader refuses: one line, no traceback
        print(f"aerial_sim export: cannot read {options.bag}: {type(error).__name__}: {error}")
        return 1
    for topic, count in result.images.items():
        print(f"{topic}: {count} images (poses from {result.pose_topics[topic] or 'none: no odometry in the bag'})")
    for topic, count in result.clouds.items():
        print(f"{topic}: {count} point clouds (poses from {result.pose_topics[topic] or 'none: no odometry in the bag'})")
    for topic, (file, images, annotations) in result.coco.items():
        print(f"{topic}: COCO boxes and masks of {annotations} objects in {images} images in {file}")
    for topic, count in result.sensors.items():
        print(f"{topic}: {count} rows")
    print(f"dataset written to {result.out_dir}")
    return 0
