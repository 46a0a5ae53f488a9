"""Export a bag to a dataset that ML tools load without ROS: PNG/NPY images, CSV sensors, aligned poses.

Layout under the output directory (topic names become folders, ``/drone1/imu/data``
-> ``drone1/imu/data``)::

    dataset.yaml                         what is where, units and conventions
    images/<topic>/000000.png ...        one file per sensor_msgs/Image message
    images/<topic>/000000.npy ...        32FC1 (depth) images also as float32 metres; 32FC2 (flow)
                                         and 32FC3 (normals) as float32 (H, W, C), normals also as PNG
    images/<topic>/frames.csv            frame, stamp, files, size, encoding, and the
                                         ground-truth pose at the image's stamp
    clouds/<topic>/000000.npy ...        one file per sensor_msgs/PointCloud2 (lidar scan, depth
    clouds/<topic>/000000.ply ...        points): every scalar field, as a NumPy structured array
                                         (height x width, as published) and as binary PLY
    clouds/<topic>/scans.csv             scan, stamps of its first and last point, files, point
                                         count, and the ground-truth pose at the scan's start and end
    sensors/<topic>.csv                  every other topic, one row per message, fields flattened
    camera_info/<topic>.yaml             first sensor_msgs/CameraInfo of each camera
    images/<ns>/camera/color/image_raw/coco.json
                                         COCO instance annotations (boxes, RLE masks, classes) of each
                                         colour frame whose instance image was recorded too
                                         (:mod:`aerial_sim.recording.coco`)

Depth (``32FC1``, metres) is written as a 16-bit PNG in millimetres (0 = no
return, clipped at 65.535 m), the usual RGB-D dataset convention (TUM RGB-D
uses a scale of 5000; we state ours, 1000, in ``dataset.yaml``), and losslessly
as ``.npy``. ``mono16`` segmentation ids stay 16-bit PNG.

Poses: each image's ``header.stamp`` is looked up in the odometry topic of the
same vehicle namespace (``<ns>/ground_truth/odom``): position is linearly
interpolated and orientation spherically interpolated (slerp) between the two
bracketing samples; outside the recorded range the nearest sample is used.
``pose_dt_s`` gives the distance in time to the nearest odometry sample.
A scan's start is its ``header.stamp`` (a lidar sweep's first firing) and its end
the stamp plus the largest per-point ``time`` (the last firing; the stamp when
the cloud has no ``time`` field): with the two poses a consumer can deskew
(points are in the cloud's ``frame_id`` at their own firing time; the poses are
``base_link``'s, the sensor mount is on ``/tf_static`` and in the node's parameters).
"""

from __future__ import annotations

import csv
import dataclasses
import operator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import yaml

from aerial_sim.recording.reader import find_bag, read_once, stamp_ns

IMAGE = "sensor_msgs/msg/Image"
POINT_CLOUD = "sensor_msgs/msg/PointCloud2"
CAMERA_INFO = "sensor_msgs/msg/CameraInfo"
ODOMETRY = "nav_msgs/msg/Odometry"
CLASS_NAMES = "diagnostic_msgs/msg/DiagnosticStatus"  # on <ns>/camera/class_names: the camera's class table
DEPTH_PNG_SCALE = 1000.0  # PNG value per metre (millimetres)
MAX_ARRAY_COLUMNS = 64  # longer arrays (blobs, point data) are not spread into CSV columns


class ExportError(ValueError):
    """The bag cannot be exported as asked (for example an unsupported image encoding)."""


def topic_path(topic: str) -> Path:
    """``/drone1/camera/color/image_raw`` -> ``drone1/camera/color/image_raw``."""
    return Path(*[part for part in topic.split("/") if part])


def image_to_array(msg) -> np.ndarray:
    """A ``sensor_msgs/Image`` (rosbags- or rclpy-deserialized) -> numpy array (H, W) or (H, W, C), RGB order."""
    layouts = {
        "rgb8": (np.uint8, 3), "bgr8": (np.uint8, 3), "rgba8": (np.uint8, 4), "bgra8": (np.uint8, 4),
        "mono8": (np.uint8, 1), "8UC1": (np.uint8, 1), "8UC3": (np.uint8, 3),
        "mono16": (np.uint16, 1), "16UC1": (np.uint16, 1), "32FC1": (np.float32, 1),
        "32FC2": (np.float32, 2), "32FC3": (np.float32, 3),
    }  # fmt: skip
    if msg.encoding not in layouts:
        raise ExportError(f"unsupported image encoding {msg.encoding!r}")
    if msg.width == 0 or msg.height == 0:
        raise ExportError(f"empty image ({msg.width}x{msg.height})")
    dtype, channels = layouts[msg.encoding]
    dtype = np.dtype(dtype).newbyteorder(">" if msg.is_bigendian else "<")
    row_bytes = msg.width * channels * dtype.itemsize
    data = msg.data
    buffer = data.view(np.uint8).reshape(-1) if isinstance(data, np.ndarray) else np.frombuffer(data, np.uint8)
    if msg.step < row_bytes or buffer.size < msg.step * msg.height:
        raise ExportError(f"image data too short for {msg.width}x{msg.height} {msg.encoding} (step {msg.step})")
    rows = buffer[: msg.step * msg.height].reshape(msg.height, msg.step)[:, :row_bytes]
    array = np.ascontiguousarray(rows).view(dtype).astype(dtype.newbyteorder("="))
    array = array.reshape(msg.height, msg.width, channels) if channels > 1 else array.reshape(msg.height, msg.width)
    if msg.encoding.startswith("bgr"):
        array = array[..., [2, 1, 0, *range(3, channels)]]
    return array


def depth_to_png_mm(depth_m: np.ndarray) -> np.ndarray:
    """Depth in metres -> uint16 millimetres; NaN, inf and <= 0 become 0 (no return)."""
    valid = np.isfinite(depth_m) & (depth_m > 0)
    millimetres = np.where(valid, np.rint(depth_m * DEPTH_PNG_SCALE), 0.0)
    return np.clip(millimetres, 0, 65535).astype(np.uint16)


def normals_to_png(normals: np.ndarray) -> np.ndarray:
    """Unit normals (H, W, 3) -> the usual 8-bit normal map, (n + 1) / 2 * 255 per axis; NaN -> 0."""
    return np.round((np.clip(np.nan_to_num(normals, nan=-1.0), -1.0, 1.0) + 1.0) * 127.5).astype(np.uint8)


def flatten_message(msg: Any, prefix: str = "", row: dict[str, Any] | None = None) -> dict[str, Any]:
    """A deserialized message -> flat ``{'pose.pose.position.x': 1.0, ...}`` for one CSV row.

    Arrays up to ``MAX_ARRAY_COLUMNS`` long become ``name.0``, ``name.1`` ...; longer
    ones (image data, point data) are left out. ``row``: a dict to add the columns to
    (returned). A run's export flattens tens of thousands of messages of a dozen classes: each
    class gets, at its first message, a function of its own that reads every field by name into
    its column (:func:`_compile_flattener`: a third of the cost of walking the fields each time);
    the columns and their order are those of the walk (:func:`flatten_fields`).
    """
    row = {} if row is None else row
    if prefix:
        return flatten_fields(msg, prefix, row)
    flatten = _FLATTENERS.get(type(msg))
    if flatten is None:
        flatten = _FLATTENERS[type(msg)] = _compile_flattener(msg)
    flatten(msg, row)
    return row


def flatten_fields(msg: Any, prefix: str = "", row: dict[str, Any] | None = None) -> dict[str, Any]:
    """:func:`flatten_message` by walking the fields (each class's fields sorted once into nested
    messages, arrays and scalars, :func:`_field_plan`)."""
    row = {} if row is None else row
    for name, kind in _field_plan(msg):
        value = getattr(msg, name)
        key = prefix + name
        if kind == _SCALAR:
            row[key] = value.item() if isinstance(value, np.generic) else value
        elif kind == _MESSAGE:
            flatten_fields(value, key + ".", row)
        else:
            _flatten_sequence(value, key, row)
    return row


def _flatten_sequence(value: Any, key: str, row: dict[str, Any]) -> None:
    """An array field's columns (none when longer than ``MAX_ARRAY_COLUMNS``)."""
    if isinstance(value, np.ndarray):
        if len(value) <= MAX_ARRAY_COLUMNS:
            for i, item in enumerate(value.tolist()):
                row[f"{key}.{i}"] = item
    elif len(value) <= MAX_ARRAY_COLUMNS:
        for i, item in enumerate(value):
            if hasattr(type(item), "__dataclass_fields__"):
                flatten_fields(item, f"{key}.{i}.", row)
            else:
                row[f"{key}.{i}"] = item.item() if isinstance(item, np.generic) else item


_FLATTENERS: dict[type, Any] = {}


def _compile_flattener(msg: Any):
    """``flatten(msg, row)`` for ``msg``'s class: straight-line code, one statement per scalar column
    (nested messages unrolled, as a class fixes its nested classes), arrays through
    :func:`_flatten_sequence` (their lengths vary); field names are identifiers by ROS's rules."""
    lines = ["def flatten(m, row):", "    pass"]

    def walk(value: Any, expression: str, key: str) -> None:
        for name, kind in _field_plan(value):
            if not name.isidentifier():
                raise ValueError(f"field name {name!r}")
            if kind == _MESSAGE:
                walk(getattr(value, name), f"{expression}.{name}", f"{key}{name}.")
            elif kind == _SCALAR:
                lines.append(f"    v = {expression}.{name}")
                lines.append(f"    row[{key + name!r}] = v.item() if isinstance(v, generic) else v")
            else:
                lines.append(f"    sequence({expression}.{name}, {key + name!r}, row)")

    try:
        walk(msg, "m", "")
    except ValueError:
        return lambda m, row: flatten_fields(m, "", row)
    namespace = {"generic": np.generic, "sequence": _flatten_sequence}
    exec(compile("\n".join(lines), f"<flatten {type(msg).__name__}>", "exec"), namespace)  # noqa: S102 - names checked
    return namespace["flatten"]


_SCALAR, _MESSAGE, _SEQUENCE = 0, 1, 2
_FIELD_PLANS: dict[type, tuple[tuple[str, int], ...]] = {}


def _field_plan(msg: Any) -> tuple[tuple[str, int], ...]:
    """(field name, kind) of ``msg``'s class, from its first instance (a field's kind is fixed by its type)."""
    plan = _FIELD_PLANS.get(type(msg))
    if plan is None:
        kinds = []
        for f in dataclasses.fields(msg):
            value = getattr(msg, f.name)
            if hasattr(type(value), "__dataclass_fields__"):
                kinds.append((f.name, _MESSAGE))
            elif isinstance(value, (np.ndarray, list, tuple)):
                kinds.append((f.name, _SEQUENCE))
            else:
                kinds.append((f.name, _SCALAR))
        plan = _FIELD_PLANS[type(msg)] = tuple(kinds)
    return plan


def quaternion_slerp(q0: np.ndarray, q1: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Spherical interpolation between rows of unit quaternions ``q0``, ``q1`` (N, 4) at fractions ``s`` (N,)."""
    dot = np.sum(q0 * q1, axis=1)
    q1 = np.where(dot[:, None] < 0, -q1, q1)  # shortest path
    dot = np.abs(dot)
    theta = np.arccos(np.clip(dot, -1.0, 1.0))
    sin_theta = np.sin(theta)
    near = sin_theta < 1e-9
    safe = np.where(near, 1.0, sin_theta)
    w0 = np.where(near, 1.0 - s, np.sin((1.0 - s) * theta) / safe)
    w1 = np.where(near, s, np.sin(s * theta) / safe)
    q = w0[:, None] * q0 + w1[:, None] * q1
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def interpolate_poses(t_pose: np.ndarray, poses: np.ndarray, t_query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Poses (N, 7: x y z qw qx qy qz) sampled at sorted ``t_pose`` -> poses at ``t_query`` and |dt| to nearest.

    Linear in position, slerp in orientation; clamped to the first/last pose outside the range.
    """
    t_pose = np.asarray(t_pose, dtype=float)
    t_query = np.asarray(t_query, dtype=float)
    upper = np.clip(np.searchsorted(t_pose, t_query, side="left"), 1, len(t_pose) - 1) if len(t_pose) > 1 else None
    if upper is None:
        return np.repeat(poses[:1], len(t_query), axis=0), np.abs(t_query - t_pose[0])
    lower = upper - 1
    span = t_pose[upper] - t_pose[lower]
    s = np.clip(np.where(span > 0, (t_query - t_pose[lower]) / np.where(span > 0, span, 1.0), 0.0), 0.0, 1.0)
    position = poses[lower, :3] + s[:, None] * (poses[upper, :3] - poses[lower, :3])
    orientation = quaternion_slerp(poses[lower, 3:], poses[upper, 3:], s)
    dt = np.minimum(np.abs(t_query - t_pose[lower]), np.abs(t_pose[upper] - t_query))
    return np.hstack([position, orientation]), dt


@dataclass
class ExportResult:
    """What an export wrote: counts per topic and the output directory."""

    out_dir: Path
    images: dict[str, int] = field(default_factory=dict)
    clouds: dict[str, int] = field(default_factory=dict)
    sensors: dict[str, int] = field(default_factory=dict)
    pose_topics: dict[str, str | None] = field(default_factory=dict)
    coco: dict[str, tuple[str, int, int]] = field(default_factory=dict)  # colour topic -> (file, images, annotations)


@dataclass
class _Scan:
    scan: int
    stamp_ns: int
    end_ns: int
    files: dict[str, str]
    points: int
    height: int
    width: int
    frame_id: str


@dataclass
class _ImageFrame:
    frame: int
    stamp_ns: int
    files: dict[str, str]
    width: int
    height: int
    encoding: str
    frame_id: str


def _pose_topic_for(topic: str, odometry_topics: list[str]) -> str | None:
    """The odometry topic sharing the longest namespace prefix with ``topic`` (ground_truth preferred)."""
    def score(candidate: str) -> tuple[int, int]:
        shared = 0
        for a, b in zip(topic.strip("/").split("/"), candidate.strip("/").split("/")):
            if a != b:
                break
            shared += 1
        return shared, int(candidate.endswith("ground_truth/odom"))

    return max(odometry_topics, key=score) if odometry_topics else None


#: Characters that make ``csv`` quote a cell (the delimiter, the quote, the line terminator's).
_CSV_SPECIAL = frozenset(',"\r\n')


class _CsvSink:
    """One CSV file per topic, columns fixed by the first row (later rows: missing columns empty, extra ones left out)."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "w", newline="")
        self._writer = csv.writer(self._file)
        self._columns: list[str] | None = None
        self._values = None
        self.rows = 0

    def write(self, row: dict[str, Any]) -> None:
        if self._columns is None:
            self._columns = list(row)
            self._values = operator.itemgetter(*self._columns)
            self._writer.writerow(self._columns)
        try:
            values = self._values(row)
        except KeyError:  # a shorter variable-length array than the first row's
            values = [row.get(column, "") for column in self._columns]
        self._writer.writerow(values if len(self._columns) > 1 else (values,))
        self.rows += 1

    def write_columns(self, columns: list[str], texts: list[list[str]], plain: bool) -> None:
        """The header (a new file's) and one row per index of ``texts`` (a list of cell texts per column, as ``csv``
        writes each value): :meth:`write` of every row at once. ``plain``: no cell needs quoting (no delimiter,
        quote or line break in it), so the rows are joined here."""
        if self._columns is None:
            self._columns = list(columns)
            self._writer.writerow(self._columns)
        if list(columns) != self._columns or len(columns) < 2:
            raise ValueError("write_columns: other columns than the file's")
        if plain:
            self._file.write("".join(",".join(row) + "\r\n" for row in zip(*texts)))
        else:
            self._writer.writerows(zip(*texts))
        self.rows += len(texts[0])

    def close(self) -> None:
        self._file.close()


def export_bag(bag: str | Path, out_dir: str | Path, progress: bool = True, png_compression: int = 1) -> ExportResult:
    """Export the bag at ``bag`` into ``out_dir`` (layout in the module docstring)."""
    collector = ExportCollector(bag, out_dir, progress, png_compression)
    try:
        read_once(collector.bag, [collector])
    finally:
        collector.close()
    return collector.result()


class ExportCollector:
    """:func:`export_bag` as a consumer of :func:`aerial_sim.recording.reader.read_once` (one pass shared with others).

    ``close()`` (always) closes the files; ``result()`` then writes the pose-aligned tables and ``dataset.yaml``.
    """

    def __init__(self, bag: str | Path, out_dir: str | Path, progress: bool = False, png_compression: int = 1):
        from PIL import Image as PilImage

        self.bag = find_bag(bag)
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.progress, self.png_compression, self.pil = progress, png_compression, PilImage
        self.frames: dict[str, list[_ImageFrame]] = {}
        self.scans: dict[str, list[_Scan]] = {}
        self.odometry: dict[str, list[tuple[int, tuple[float, ...]]]] = {}
        self.sinks: dict[str, _CsvSink] = {}
        self.calibrations: dict[str, dict[str, Any]] = {}
        self.class_names: dict[str, dict[int, str]] = {}  # <ns>/camera/class_names -> class id -> name
        self.types: dict[str, str] = {}
        self.bar = None

    def begin(self, reader) -> None:
        self.reader = reader
        self.types = {c.topic: c.msgtype for c in reader.connections}
        if self.progress:  # (tqdm's import alone is 0.05 CPU s, a batch's post-processing shows no bar)
            from tqdm import tqdm

            self.bar = tqdm(total=reader.message_count, unit="msg", desc="export")

    def messages_of(self, connection, times_ns: list[int], payloads: list[bytes]) -> bool:
        """A topic's sensor CSV written whole from its columns (:func:`aerial_sim.recording.cdr_columns.topic_columns`,
        :mod:`aerial_sim.recording.topic_reader`); False (nothing written): its messages come one by one to
        :meth:`message` (images, clouds, camera info, class names, a topic whose layout varies)."""
        from aerial_sim.recording.cdr_columns import column_text, topic_columns

        topic, msgtype = connection.topic, connection.msgtype
        if msgtype in (IMAGE, POINT_CLOUD, CAMERA_INFO, CLASS_NAMES) or topic in self.sinks or not payloads:
            return False
        typestore = self.reader.typestore
        found = topic_columns(typestore.fielddefs, msgtype, payloads, MAX_ARRAY_COLUMNS,
                              lambda raw: flatten_message(typestore.deserialize_cdr(raw, msgtype)))
        if found is None:
            return False
        keys, columns = found
        if any(name == "header" for name, _ in typestore.fielddefs[msgtype][1]):
            seconds, nanoseconds = columns[keys.index("header.stamp.sec")], columns[keys.index("header.stamp.nanosec")]
            stamps = (seconds.astype(np.int64) * 1_000_000_000 + nanoseconds.astype(np.int64)).tolist()
        else:
            stamps = list(times_ns)
        if msgtype == ODOMETRY:
            pose = [columns[keys.index(f"pose.pose.{part}")].tolist() for part in
                    ("position.x", "position.y", "position.z", "orientation.w", "orientation.x", "orientation.y", "orientation.z")]
            self.odometry.setdefault(topic, []).extend(zip(stamps, zip(*pose)))
        sink = self.sinks[topic] = _CsvSink(self.out_dir / "sensors" / topic_path(topic).with_suffix(".csv"))
        plain = not any(isinstance(c, list) and isinstance(c[0], str) and _CSV_SPECIAL.intersection(c[0]) for c in columns)
        texts = [list(map(str, times_ns)), list(map(str, stamps)), *map(column_text, columns)]
        sink.write_columns(["bag_time_ns", "stamp_ns", *keys], texts, plain)
        if self.bar is not None:
            self.bar.update(len(payloads))
        return True

    def message(self, connection, t_ns: int, raw, decode) -> None:
        if self.bar is not None:
            self.bar.update(1)
        out_dir = self.out_dir
        topic, msgtype = connection.topic, connection.msgtype
        msg = decode()
        stamp = stamp_ns(msg, t_ns)
        if msgtype == IMAGE:
            directory = out_dir / "images" / topic_path(topic)
            directory.mkdir(parents=True, exist_ok=True)
            index = len(self.frames.setdefault(topic, []))
            files = _write_image(msg, directory, index, self.pil, self.png_compression)
            self.frames[topic].append(_ImageFrame(index, stamp, files, msg.width, msg.height, msg.encoding, msg.header.frame_id))
            return
        if msgtype == POINT_CLOUD:
            directory = out_dir / "clouds" / topic_path(topic)
            directory.mkdir(parents=True, exist_ok=True)
            topic_scans = self.scans.setdefault(topic, [])
            topic_scans.append(_write_scan(msg, directory, len(topic_scans), stamp))
            return
        if msgtype == CLASS_NAMES and topic.endswith("/class_names"):
            table = {}
            for pair in msg.values:
                if pair.key.strip().isdigit():
                    table[int(pair.key)] = pair.value
            self.class_names[topic] = table  # the last one recorded (latched: normally the only one)
            return
        if msgtype == CAMERA_INFO and topic not in self.calibrations:
            self.calibrations[topic] = _calibration(msg)
        if msgtype == ODOMETRY:
            p, q = msg.pose.pose.position, msg.pose.pose.orientation
            self.odometry.setdefault(topic, []).append((stamp, (p.x, p.y, p.z, q.w, q.x, q.y, q.z)))
        sink = self.sinks.get(topic)
        if sink is None:
            sink = self.sinks[topic] = _CsvSink(out_dir / "sensors" / topic_path(topic).with_suffix(".csv"))
        row = {"bag_time_ns": t_ns, "stamp_ns": stamp}
        sink.write(flatten_message(msg, row=row))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        for sink in self.sinks.values():
            sink.close()

    def result(self) -> ExportResult:
        out_dir, odometry = self.out_dir, self.odometry
        result = ExportResult(out_dir)
        result.sensors = {topic: sink.rows for topic, sink in self.sinks.items()}
        for topic, calibration in self.calibrations.items():
            path = out_dir / "camera_info" / topic_path(topic).with_suffix(".yaml")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(yaml.safe_dump(calibration, sort_keys=False))
        for topic, topic_frames in self.frames.items():
            pose_topic = _pose_topic_for(topic, sorted(odometry))
            result.pose_topics[topic] = pose_topic
            result.images[topic] = len(topic_frames)
            _write_frames_csv(out_dir / "images" / topic_path(topic) / "frames.csv", topic_frames, odometry.get(pose_topic))
        for topic, topic_scans in self.scans.items():
            pose_topic = _pose_topic_for(topic, sorted(odometry))
            result.pose_topics[topic] = pose_topic
            result.clouds[topic] = len(topic_scans)
            _write_scans_csv(out_dir / "clouds" / topic_path(topic) / "scans.csv", topic_scans, odometry.get(pose_topic))
        self._write_coco(result)
        _write_manifest(out_dir, self.bag, self.types, result)
        return result

    def _write_coco(self, result: ExportResult) -> None:
        """A COCO file per camera whose colour and instance images were both recorded (:mod:`~aerial_sim.recording.coco`)."""
        from aerial_sim.recording.coco import CameraFrames, write_coco

        suffix = "instance/image_raw"
        for topic, instance_frames in self.frames.items():
            if not topic.endswith("/" + suffix):
                continue
            prefix = topic[: -len(suffix)]
            color_topic, segmentation_topic = prefix + "color/image_raw", prefix + "segmentation/image_raw"
            if color_topic not in self.frames:
                continue

            def paths(frames_of):
                directory = self.out_dir / "images" / topic_path(frames_of)
                return {f.stamp_ns: directory / f.files["png"] for f in self.frames.get(frames_of, [])}

            color = self.frames[color_topic]
            camera = CameraFrames(
                color_dir=self.out_dir / "images" / topic_path(color_topic),
                color={f.stamp_ns: f.files["png"] for f in color},
                instance=paths(topic) if instance_frames[0].encoding in ("mono16", "16UC1") else {},
                segmentation=paths(segmentation_topic),
                size={f.stamp_ns: (f.width, f.height) for f in color},
            )  # fmt: skip
            path, images, annotations = write_coco(camera, f"{color_topic} of {self.bag}",
                                                   self.class_names.get(prefix + "class_names"))
            result.coco[color_topic] = (str(path.relative_to(self.out_dir)), images, annotations)


def _write_image(msg, directory: Path, index: int, pil, compression: int) -> dict[str, str]:
    array = image_to_array(msg)
    stem = f"{index:06d}"
    files = {"png": f"{stem}.png"}
    if msg.encoding == "32FC1":
        np.save(directory / f"{stem}.npy", array.astype(np.float32))
        files["npy"] = f"{stem}.npy"
        array = depth_to_png_mm(array)
    elif msg.encoding in ("32FC2", "32FC3"):  # optical flow (px), unit normals: the data is the .npy
        np.save(directory / f"{stem}.npy", array.astype(np.float32))
        files["npy"] = f"{stem}.npy"
        if msg.encoding == "32FC2":  # no picture of flow without choosing a scale
            files["png"] = ""
            return files
        array = normals_to_png(array)
    if array.dtype == np.uint16 and array.ndim != 2:
        raise ExportError(f"unsupported 16-bit image with {array.shape[2]} channels")
    picture = pil.fromarray(array)  # uint16 (H, W) -> 16-bit greyscale PNG ('I;16')
    picture.save(directory / files["png"], compress_level=compression)
    return files


def _write_scan(msg, directory: Path, index: int, stamp: int) -> _Scan:
    """One PointCloud2 -> ``NNNNNN.npy`` (structured, height x width) and ``NNNNNN.ply`` (all scalar fields)."""
    from numpy.lib.recfunctions import repack_fields
    from plyfile import PlyData, PlyElement

    from aerial_sim.sensors.pointcloud import cloud_to_array

    try:
        points = cloud_to_array(msg)
    except ValueError as error:
        raise ExportError(f"point cloud {index}: {error}") from error
    stem = f"{index:06d}"
    np.save(directory / f"{stem}.npy", points.reshape(int(msg.height), int(msg.width)))
    packed = repack_fields(points)  # PLY records have no padding
    PlyData([PlyElement.describe(packed, "vertex")], byte_order="<").write(str(directory / f"{stem}.ply"))
    last = float(np.nanmax(points["time"])) if "time" in points.dtype.names and len(points) else 0.0
    return _Scan(index, stamp, stamp + int(round(last * 1e9)), {"npy": f"{stem}.npy", "ply": f"{stem}.ply"},
                 len(points), int(msg.height), int(msg.width), msg.header.frame_id)  # fmt: skip


def _poses_at(stamps_ns: np.ndarray, samples) -> tuple[np.ndarray, np.ndarray]:
    """Ground-truth poses (N, 7) interpolated at ``stamps_ns`` and the time (s) to the nearest sample (NaN without)."""
    if not samples:
        return np.full((len(stamps_ns), 7), np.nan), np.full(len(stamps_ns), np.nan)
    samples = sorted(samples, key=lambda item: item[0])
    t_pose = np.array([s[0] for s in samples], dtype=np.int64)
    return interpolate_poses((t_pose - t_pose[0]) * 1e-9, np.array([s[1] for s in samples]), (stamps_ns - t_pose[0]) * 1e-9)


def _write_scans_csv(path: Path, topic_scans: list[_Scan], samples) -> None:
    start, start_dt = _poses_at(np.array([s.stamp_ns for s in topic_scans], dtype=np.int64), samples)
    end, end_dt = _poses_at(np.array([s.end_ns for s in topic_scans], dtype=np.int64), samples)
    pose = ["x", "y", "z", "qw", "qx", "qy", "qz"]
    columns = ["scan", "stamp_ns", "end_stamp_ns", "npy", "ply", "points", "height", "width", "frame_id",
               "pose_dt_s", *(f"start_{c}" for c in pose), *(f"end_{c}" for c in pose)]  # fmt: skip
    with open(path, "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(columns)
        for s, p0, p1, gap0, gap1 in zip(topic_scans, start, end, start_dt, end_dt):
            writer.writerow([s.scan, s.stamp_ns, s.end_ns, s.files["npy"], s.files["ply"], s.points, s.height, s.width,
                             s.frame_id, f"{max(gap0, gap1):.6f}", *(f"{v:.9g}" for v in (*p0, *p1))])  # fmt: skip


def _write_frames_csv(path: Path, topic_frames: list[_ImageFrame], samples) -> None:
    stamps = np.array([f.stamp_ns for f in topic_frames], dtype=np.int64)
    poses, dt = _poses_at(stamps, samples)
    columns = ["frame", "stamp_ns", "png", "npy", "width", "height", "encoding", "frame_id", "pose_dt_s"]
    columns += ["x", "y", "z", "qw", "qx", "qy", "qz"]
    with open(path, "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(columns)
        for f, pose, gap in zip(topic_frames, poses, dt):
            writer.writerow(
                [f.frame, f.stamp_ns, f.files["png"], f.files.get("npy", ""), f.width, f.height, f.encoding,
                 f.frame_id, f"{gap:.6f}", *(f"{v:.9g}" for v in pose)]
            )  # fmt: skip


def _calibration(msg) -> dict[str, Any]:
    return {
        "frame_id": msg.header.frame_id,
        "width": int(msg.width),
        "height": int(msg.height),
        "distortion_model": msg.distortion_model,
        "d": [float(v) for v in msg.d],
        "k": [float(v) for v in msg.k],
        "r": [float(v) for v in msg.r],
        "p": [float(v) for v in msg.p],
    }


def _write_manifest(out_dir: Path, bag: Path, types: dict[str, str], result: ExportResult) -> None:
    manifest = {
        "source_bag": str(bag),
        "conventions": {
            "world_frame": "map (ENU: x east, y north, z up), metres",
            "orientation": "quaternion (qw, qx, qy, qz), body (FLU) to map",
            "stamps": "stamp_ns = header.stamp (simulation time, ns); bag_time_ns = time the recorder received it",
            "depth_png": f"uint16, value / {DEPTH_PNG_SCALE:g} = metres, 0 = no return",
            "depth_npy": "float32 metres, as published",
            "flow_normals_npy": "32FC2 optical flow (px, u v) and 32FC3 unit normals: float32 (H, W, C) .npy, as "
                                "published; normals also as an 8-bit PNG, (n + 1) / 2 * 255; flow has no PNG",
            "clouds": "npy/ply hold every scalar field of the PointCloud2, in its frame_id; lidar points are each "
                      "in the lidar frame at their firing time (time field, s after stamp_ns); start_*/end_* = "
                      "base_link pose in map at the scan's first and last firing; no-return points are absent, or "
                      "NaN in organized clouds",
        },
        "images": {
            topic: {"dir": str(Path("images") / topic_path(topic)), "type": types[topic], "frames": count,
                    "pose_topic": result.pose_topics.get(topic)}
            for topic, count in result.images.items()
        },  # fmt: skip
        "clouds": {
            topic: {"dir": str(Path("clouds") / topic_path(topic)), "type": types[topic], "scans": count,
                    "pose_topic": result.pose_topics.get(topic)}
            for topic, count in result.clouds.items()
        },  # fmt: skip
        "coco": {
            topic: {"file": file, "images": images, "annotations": annotations,
                    "format": "COCO instances: bbox [x, y, w, h] in pixels (pixel edges), segmentation as compressed "
                              "RLE, category_id = segmentation id (named from the camera's class_names topic, "
                              "class_<id> where the bag has none), instance_id = the object's id in every frame, "
                              "file_name relative to the JSON's folder"}
            for topic, (file, images, annotations) in result.coco.items()
        },  # fmt: skip
        "sensors": {
            topic: {"csv": str(Path("sensors") / topic_path(topic).with_suffix(".csv")), "type": types[topic],
                    "rows": count}
            for topic, count in result.sensors.items()
        },  # fmt: skip
    }
    (out_dir / "dataset.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))


def iter_frames(dataset_dir: str | Path, topic: str) -> Iterator[dict[str, str]]:
    """Rows of an exported image topic's ``frames.csv`` (a convenience for loaders and tests)."""
    with open(Path(dataset_dir) / "images" / topic_path(topic) / "frames.csv", newline="") as stream:
        yield from csv.DictReader(stream)
