"""Pure-ish tests of the seeing pieces: depth back-projection, scene primitives, marker and cloud conversion."""

from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import requires_ros
from aerial_sim.viewer.depth_points import depth_to_points, intrinsics_from_k, optical_to_base
from aerial_sim.viewer.scene_view import scene_primitives
from aerial_sim.world.camera import CameraModel, CameraParams
from aerial_sim.world.scene import load_scene


def test_depth_points_reproject_onto_their_pixels():
    """Back-projected points land on the pixel they came from (the pinhole model, inverted)."""
    fx, fy, cx, cy = 230.0, 230.0, 229.5, 159.5
    rng = np.random.default_rng(3)
    depth = rng.uniform(0.5, 20.0, (320, 460)).astype(np.float32)
    depth[10, 20] = 0.0
    depth[11, 21] = np.nan
    points = depth_to_points(depth, fx, fy, cx, cy)
    assert len(points) == 320 * 460 - 2
    u = points[:, 0] * fx / points[:, 2] + cx
    v = points[:, 1] * fy / points[:, 2] + cy
    valid = np.isfinite(depth) & (depth > 0)
    vv, uu = np.nonzero(valid)
    assert np.allclose(u, uu, atol=1e-3) and np.allclose(v, vv, atol=1e-3)
    assert np.allclose(points[:, 2], depth[valid])
    assert len(depth_to_points(depth, fx, fy, cx, cy, stride=2)) == np.count_nonzero(valid[::2, ::2])


def test_rendered_depth_of_a_wall_back_projects_onto_the_wall():
    """Camera model render -> depth_to_points -> base_link: points lie on the scene's wall plane."""
    scene = load_scene("urban")
    params = CameraParams(width=92, height=64)
    model = CameraModel(params, scene)
    end_wall = next(o for o in scene.objects if o.name == "end_wall")
    position, orientation = (end_wall.position[0] - 10.0, end_wall.position[1], 3.0), (1.0, 0.0, 0.0, 0.0)
    frame = model.render(position, orientation)
    fx, fy, cx, cy = intrinsics_from_k(np.asarray(model.K).reshape(-1))
    points = depth_to_points(frame.depth, fx, fy, cx, cy)
    rotation, translation = optical_to_base(params)
    in_map = points @ rotation.T + translation + np.asarray(position)
    hits_wall = frame.segmentation[np.isfinite(frame.depth) & (frame.depth > 0)] == end_wall.segmentation_id
    face_x = end_wall.position[0] - end_wall.size[0] / 2
    assert hits_wall.sum() > 100
    assert np.abs(in_map[hits_wall, 0] - face_x).max() < 0.02


def test_scene_primitives_cover_every_object():
    scene = load_scene("urban")
    primitives = scene_primitives(scene)
    assert [p.name for p in primitives] == ["ground", *[o.name for o in scene.objects]]
    by_name = {p.name: p for p in primitives}
    for obj in scene.objects:
        p = by_name[obj.name]
        assert p.kind == obj.shape
        if obj.shape == "cylinder":
            assert p.size == (2 * obj.radius, 2 * obj.radius, obj.height)
        if obj.shape == "mesh":
            assert p.vertices.shape[1] == 3 and p.faces.max() < len(p.vertices)


@requires_ros
def test_markers_and_point_clouds_convert_exactly():
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import PointCloud2
    from std_msgs.msg import Header

    from aerial_sim.nodes.depth_to_points import to_cloud
    from aerial_sim.nodes.scene_markers import to_marker
    from aerial_sim.nodes.web_viewer import cloud_xyz

    scene = load_scene("urban")
    primitives = scene_primitives(scene)
    markers = [to_marker(p, i, "map", 1.0) for i, p in enumerate(primitives)]
    for marker, primitive in zip(markers, primitives):
        assert (marker.scale.x, marker.scale.y, marker.scale.z) == pytest.approx(primitive.size)
        assert marker.header.frame_id == "map"
        if primitive.kind == "mesh":
            assert len(marker.points) == 3 * len(primitive.faces)
    # What the node publishes, written from numpy: the typed markers' bytes with zero padding, also for a
    # sphere and a cylinder turned and coloured, a name that is not ASCII, another frame and alpha.
    from visualization_msgs.msg import MarkerArray

    from aerial_sim.nodes.ros.zero_padding import zero_padded_bytes
    from aerial_sim.viewer.marker_array import encode_marker_array
    from aerial_sim.viewer.scene_view import Primitive

    primitives += [Primitive(name="kugel_ü", kind="sphere", position=(1.5, -2.25, 3.0), orientation=(0.5, 0.5, -0.5, 0.5),
                             size=(1.0, 2.0, 3.0), color=(7, 200, 255)),
                   Primitive(name="c", kind="cylinder", position=(0.0, 0.0, 0.0), orientation=(1.0, 0.0, 0.0, 0.0),
                             size=(0.5, 0.5, 2.0), color=(1, 2, 3))]
    typed = MarkerArray(markers=[to_marker(p, i, "odom_x", 0.7) for i, p in enumerate(primitives)])
    assert encode_marker_array(primitives, "odom_x", 0.7) == zero_padded_bytes(typed)
    points = np.random.default_rng(0).normal(size=(1000, 3)).astype(np.float32)
    cloud = deserialize_message(to_cloud(points, Header(frame_id="x")), PointCloud2)  # the bytes the node sends
    assert np.array_equal(cloud_xyz(cloud), points) and cloud.header.frame_id == "x"


def test_optical_frame_looks_along_base_x():
    rotation, translation = optical_to_base(CameraParams())
    assert rotation @ np.array([0.0, 0.0, 1.0]) == pytest.approx([1.0, 0.0, 0.0])  # optical z -> forward
    assert rotation @ np.array([1.0, 0.0, 0.0]) == pytest.approx([0.0, -1.0, 0.0])  # optical x (right) -> -left
    assert math.isclose(translation[0], CameraParams().mount_position_m[0])


@requires_ros
def test_swarm_poses_convert_to_frames_and_bad_poses_are_dropped():
    from geometry_msgs.msg import Pose, PoseArray

    from aerial_sim.nodes.web_viewer import pose_array_arrays

    poses = []
    for index, (position, orientation) in enumerate((((1.0, 2.0, 3.0), (1.0, 0.0, 0.0, 0.0)),
                                                     ((math.nan, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0)),
                                                     ((4.0, 5.0, 6.0), (0.0, 0.0, 0.0, 1.0)),
                                                     ((7.0, 8.0, 9.0), (0.0, 0.0, 0.0, 0.0)))):
        pose = Pose()
        pose.position.x, pose.position.y, pose.position.z = position
        pose.orientation.w, pose.orientation.x, pose.orientation.y, pose.orientation.z = orientation
        poses.append(pose)
    positions, orientations = pose_array_arrays(PoseArray(poses=poses))
    np.testing.assert_array_equal(positions, [[1, 2, 3], [4, 5, 6]])
    np.testing.assert_array_equal(orientations, [[1, 0, 0, 0], [0, 0, 0, 1]])
    assert pose_array_arrays(PoseArray())[0].shape == (0, 3)
