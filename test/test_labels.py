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


def serialized_image(array: np.ndarray, encoding: str, t_ns: int) -> bytes:
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    types = store.types
    header = types["std_msgs/msg/Header"](stamp=types["builtin_interfaces/msg/Time"](sec=t_ns // 10**9,
                                                                                      nanosec=t_ns % 10**9),
                                          frame_id="drone1/camera_depth_optical_frame")
    message = types["sensor_msgs/msg/Image"](header=header, height=array.shape[0], width=array.shape[1],
                                             encoding=encoding, is_bigendian=0, step=array.strides[0],
                                             data=np.frombuffer(np.ascontiguousarray(array).tobytes(), np.uint8))
    return bytes(store.serialize_cdr(message, "sensor_msgs/msg/Image"))


def serialized_class_names(names: dict[int, str]) -> bytes:
    """The camera node's ``camera/class_names`` message (DiagnosticStatus, one KeyValue per class) as CDR."""
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    types = store.types
    message = types["diagnostic_msgs/msg/DiagnosticStatus"](
        level=0, name="/drone1/camera: class names", message="segmentation class id -> name", hardware_id="urban",
        values=[types["diagnostic_msgs/msg/KeyValue"](key=str(k), value=v) for k, v in names.items()])
    return bytes(store.serialize_cdr(message, "diagnostic_msgs/msg/DiagnosticStatus"))


def test_scene_class_names_come_from_the_classes_table_or_the_names_of_the_objects_of_each_class(tmp_path):
    from aerial_sim.config import ParamsError

    urban = load_scene("urban").class_names
    assert urban[1] == "ground" and urban[10] == urban[15] == "building" and urban[20] == "pole"
    assert (urban[30], urban[31], urban[50]) == ("tree_trunk", "tree_crown", "end_wall")
    named = tmp_path / "named.yaml"
    named.write_text("classes: {1: road, 7: lamp, 9: spare}\nobjects:\n  - {name: a_1, shape: sphere, radius: 1, "
                     "position: [0, 0, 2], segmentation_id: 7}\n  - {name: x_2, shape: sphere, radius: 1, "
                     "position: [5, 0, 2], segmentation_id: 8}\n  - {name: y_3, shape: sphere, radius: 1, "
                     "position: [9, 0, 2], segmentation_id: 8}\n")
    assert load_scene(named).class_names == {1: "road", 7: "lamp", 8: "class_8", 9: "spare"}
    named.write_text("classes: {70000: big}\n")
    with pytest.raises(ParamsError, match=r"named.yaml: classes.70000: a class id must be an integer 0..65535"):
        load_scene(named)
    named.write_text("classes: {3: ''}\n")
    with pytest.raises(ParamsError, match=r"classes.3: the name must be a non-empty string"):
        load_scene(named)


def test_export_writes_coco_boxes_and_masks_that_pycocotools_reads_back(urban_frames, tmp_path):
    from pycocotools.coco import COCO

    from aerial_sim.recording.bag import BagWriter
    from aerial_sim.recording.export import export_bag

    scene, camera, frames = urban_frames
    colour_frames = [camera.render(*yaw_pose(yaw), depth=False, segmentation=False) for yaw in (0.0, 60.0, 200.0)]
    topics = {"color": ("/drone1/camera/color/image_raw", "rgb8"),
              "instance": ("/drone1/camera/instance/image_raw", "mono16"),
              "segmentation": ("/drone1/camera/segmentation/image_raw", "mono16")}
    with BagWriter(tmp_path / "bag") as writer:
        for topic, _ in topics.values():
            writer.add_topic(topic, "sensor_msgs/msg/Image")
        writer.add_topic("/drone1/camera/class_names", "diagnostic_msgs/msg/DiagnosticStatus")
        writer.write("/drone1/camera/class_names", serialized_class_names(scene.class_names), 1)
        for k, (frame, colour) in enumerate(zip(frames, colour_frames)):
            t_ns = 1_000_000_000 + k * 33_333_333
            for name, array in (("color", colour.color), ("instance", frame.instance),
                                ("segmentation", frame.segmentation)):
                topic, encoding = topics[name]
                writer.write(topic, serialized_image(array, encoding, t_ns), t_ns)
    result = export_bag(tmp_path / "bag", tmp_path / "out", progress=False)
    colour_dir = tmp_path / "out" / "images" / "drone1" / "camera" / "color" / "image_raw"
    assert result.coco == {"/drone1/camera/color/image_raw": (
        "images/drone1/camera/color/image_raw/coco.json", 3, sum(len(detections_2d(f.instance, scene)) for f in frames))}

    coco = COCO(str(colour_dir / "coco.json"))  # the reference reader
    assert sorted(coco.getImgIds()) == [1, 2, 3]
    assert sorted(coco.getCatIds()) == sorted({d.class_id for f in frames for d in detections_2d(f.instance, scene)})
    # Category names: the scene's class names the camera published ("building", "pole", ...), not class_<id>.
    categories = coco.loadCats(coco.getCatIds())
    assert {c["id"]: c["name"] for c in categories} == {c["id"]: scene.class_names[c["id"]] for c in categories}
    assert "building" in {c["name"] for c in categories} and "pole" in {c["name"] for c in categories}
    assert coco.getCatIds(catNms=["building"]) == [c for c in sorted(coco.getCatIds()) if 10 <= c <= 15]
    for image_id, frame in zip((1, 2, 3), frames):
        image = coco.loadImgs(image_id)[0]
        assert (colour_dir / image["file_name"]).is_file() and (image["width"], image["height"]) == (240, 160)
        annotations = coco.loadAnns(coco.getAnnIds(imgIds=image_id))
        expected = {d.instance_id: d for d in detections_2d(frame.instance, scene)}
        assert sorted(a["instance_id"] for a in annotations) == sorted(expected)
        for annotation in annotations:
            d = expected[annotation["instance_id"]]
            assert annotation["bbox"] == d.coco_bbox and annotation["category_id"] == d.class_id
            assert np.array_equal(coco.annToMask(annotation), frame.instance == d.instance_id)  # mask, pixel for pixel
            assert annotation["area"] == d.pixels and annotation["iscrowd"] == 0
    manifest_coco = __import__("yaml").safe_load((tmp_path / "out" / "dataset.yaml").read_text())["coco"]
    assert manifest_coco["/drone1/camera/color/image_raw"]["images"] == 3


def test_export_writes_no_coco_without_instance_images_and_unknown_classes_without_segmentation(urban_frames, tmp_path):
    from pycocotools.coco import COCO

    from aerial_sim.recording.bag import BagWriter
    from aerial_sim.recording.export import export_bag

    scene, _, frames = urban_frames
    frame = frames[0]
    colour = np.zeros(frame.instance.shape + (3,), np.uint8)
    with BagWriter(tmp_path / "only_colour") as writer:
        writer.add_topic("/drone1/camera/color/image_raw", "sensor_msgs/msg/Image")
        writer.write("/drone1/camera/color/image_raw", serialized_image(colour, "rgb8", 10), 10)
    assert export_bag(tmp_path / "only_colour", tmp_path / "out1", progress=False).coco == {}
    with BagWriter(tmp_path / "no_segmentation") as writer:
        for topic in ("/drone1/camera/color/image_raw", "/drone1/camera/instance/image_raw"):
            writer.add_topic(topic, "sensor_msgs/msg/Image")
        writer.write("/drone1/camera/color/image_raw", serialized_image(colour, "rgb8", 10), 10)
        writer.write("/drone1/camera/instance/image_raw", serialized_image(frame.instance, "mono16", 10), 10)
        small = np.full((8, 8), 2, np.uint16)  # a frame of another size at another stamp: not annotated
        writer.write("/drone1/camera/instance/image_raw", serialized_image(small, "mono16", 20), 20)
        writer.write("/drone1/camera/color/image_raw", serialized_image(colour, "rgb8", 20), 20)
    result = export_bag(tmp_path / "no_segmentation", tmp_path / "out2", progress=False)
    _, images, annotations = result.coco["/drone1/camera/color/image_raw"]
    assert (images, annotations) == (1, len(detections_2d(frame.instance, scene)))
    coco = COCO(str(tmp_path / "out2" / "images" / "drone1" / "camera" / "color" / "image_raw" / "coco.json"))
    assert [c["name"] for c in coco.loadCats(coco.getCatIds())] == ["unknown"]
