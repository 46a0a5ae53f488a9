"""PointCloud2 layouts as NumPy structured dtypes, both ways, without ROS imports.

A ``sensor_msgs/PointCloud2`` is a packed array of records described by its
``fields`` (name, byte offset, datatype code, count). A NumPy structured dtype
with explicit offsets is the same description, so a cloud is built with one
``tobytes()`` and read back with one ``frombuffer`` (no per-point Python).

The lidar layout, :data:`LIDAR_POINT_DTYPE`, is the Velodyne ROS driver's
``PointXYZIRT`` record as its ``PointCloud2Modifier`` packs it (no padding):
``x y z intensity`` float32 at 0/4/8/12, ``ring`` uint16 at 16, ``time``
float32 at 18 (seconds since the sweep's stamp), then our ``segmentation_id``
uint16 at 22: 24 bytes a point. Lidar-odometry packages (LIO-SAM, FAST-LIO,
KISS-ICP...) convert clouds field by field by name, so the extra field is ignored.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: sensor_msgs/PointField datatype codes.
POINTFIELD_CODES = {
    np.dtype("i1"): 1, np.dtype("u1"): 2, np.dtype("i2"): 3, np.dtype("u2"): 4,
    np.dtype("i4"): 5, np.dtype("u4"): 6, np.dtype("f4"): 7, np.dtype("f8"): 8,
}  # fmt: skip
_TYPES_OF_CODES = {code: dtype for dtype, code in POINTFIELD_CODES.items()}

LIDAR_POINT_DTYPE = np.dtype({
    "names": ["x", "y", "z", "intensity", "ring", "time", "segmentation_id"],
    "formats": ["<f4", "<f4", "<f4", "<f4", "<u2", "<f4", "<u2"],
    "offsets": [0, 4, 8, 12, 16, 18, 22],
    "itemsize": 24,
})  # fmt: skip


def point_fields(dtype: np.dtype) -> list[tuple[str, int, int, int]]:
    """The PointField descriptions ``(name, offset, datatype, count)`` of a structured dtype."""
    fields = []
    for name in dtype.names:
        field_type, offset = dtype.fields[name][:2]
        fields.append((name, offset, POINTFIELD_CODES[field_type.newbyteorder("=")], 1))
    return fields


def cloud_to_array(msg: Any) -> np.ndarray:
    """Every scalar field of a PointCloud2-shaped message (rclpy or rosbags) -> structured array (N,).

    Raises ValueError when the data is shorter than ``width * height * point_step``,
    points come with a ``point_step`` of 0, or a field lies outside ``point_step``.
    """
    count = int(msg.width) * int(msg.height)
    step = int(msg.point_step)
    if count and step <= 0:  # else the check below passes any count, and NumPy overflows on it
        raise ValueError(f"PointCloud2 of {count} points with point_step {step}")
    endian = ">" if msg.is_bigendian else "<"
    names, formats, offsets = [], [], []
    for field in msg.fields:
        if field.datatype not in _TYPES_OF_CODES or field.count != 1:
            continue
        dtype = _TYPES_OF_CODES[field.datatype].newbyteorder(endian)
        if field.offset + dtype.itemsize > step:
            raise ValueError(f"PointCloud2 field {field.name!r} lies outside point_step {step}")
        names.append(field.name)
        formats.append(dtype)
        offsets.append(field.offset)
    data = msg.data
    buffer = data.view(np.uint8).reshape(-1) if isinstance(data, np.ndarray) else np.frombuffer(bytes(data), np.uint8)
    if buffer.size < count * step:
        raise ValueError(f"PointCloud2 data holds {buffer.size} bytes, {count} points of {step} need {count * step}")
    dtype = np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": step})
    return np.frombuffer(buffer[: count * step].tobytes(), dtype=dtype, count=count)


def xyz(points: np.ndarray) -> np.ndarray:
    """(N, 3) float32 x, y, z of a structured point array (ValueError when a coordinate is missing)."""
    if points.dtype.names is None or not {"x", "y", "z"} <= set(points.dtype.names):
        raise ValueError("PointCloud2 without x, y, z fields")
    return np.stack([points["x"], points["y"], points["z"]], axis=1).astype(np.float32)
