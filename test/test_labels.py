"""Dataset labels from rendered frames (no ROS graph): 2D boxes against the instance image they come from."""

from __future__ import annotations

import math

import numpy as np
import pytest

from aerial_sim.world.camera import CameraModel, CameraParams
from aerial_sim.world.labels import boxes_3d, detections_2d
from aerial_sim.world.scene import load_scene


def yaw_pose(yaw_deg: float, position=(0.0, -2.0, 4.0)):
    yaw = math.radians(yaw_deg)
    return position, (math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2))


@pytest.fixture(scope="module")
def urban_frames():
    """Urban frames (buildings occluding each other, poles, trees) from three headings, with their camera."""
    scene = load_scene("urban")
    camera = CameraModel(CameraParams(width=240, height=160, mount_rpy_deg=(0.0, 10.0, 0.0)), scene)
    frames = [camera.render(*yaw_pose(yaw), depth=False, color=False, instance=True) for yaw in (0.0, 60.0, 200.0)]
    return scene, camera, frames


def test_each_2d_box_is_exactly_the_extent_of_its_instance_pixels_with_its_class(urban_frames):
    scene, _, frames = urban_frames
    seen = 0
    for frame in frames:
        detections = detections_2d(frame.instance, scene)
        ids = sorted(int(i) for i in np.unique(frame.instance) if i >= 2)
        assert [d.instance_id for d in detections] == ids  # every object in view, nothing else (not the ground)
        for d in detections:
            rows, columns = np.nonzero(frame.instance == d.instance_id)
            assert (d.u_min, d.v_min, d.u_max, d.v_max) == (columns.min(), rows.min(), columns.max(), rows.max())
            assert d.pixels == len(rows)
            assert set(frame.segmentation[rows, columns].tolist()) == {d.class_id}  # the class of those pixels
            assert d.name == scene.objects[d.instance_id - 2].name
            assert d.coco_bbox == [d.u_min, d.v_min, d.u_max - d.u_min + 1, d.v_max - d.v_min + 1]
        seen += len(detections)
    assert seen >= 6  # the poses do look at several objects


def test_an_empty_image_or_one_of_sky_and_ground_has_no_detections():
    scene = load_scene("urban")
    assert detections_2d(np.zeros((4, 5), np.uint16), scene) == []
    assert detections_2d(np.ones((4, 5), np.uint16), scene) == []
    assert boxes_3d(scene)[2].class_id == scene.objects[0].segmentation_id
