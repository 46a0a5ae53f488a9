"""A scene's primitives as the CDR bytes of one ``visualization_msgs/MarkerArray``, written from numpy.

The scene markers node publishes the scene for RViz: boxes, cylinders and spheres as CUBE, CYLINDER and
SPHERE markers, each mesh object as a TRIANGLE_LIST of its world-frame triangle corners. The shipped city
has 1.1 M corners; as ``geometry_msgs/Point`` objects, serialized by rclpy and re-serialized with zero
padding (:mod:`aerial_sim.nodes.ros.zero_padding`), they cost the node about 12 s of CPU at start-up,
taken from the flight that starts beside it (issue 29). Here each marker's fixed fields are packed with
``struct`` and its corners are one float64 array's bytes (a ``Point`` is three float64, 24 bytes, so a
sequence of them is the array itself): some 0.1 s for the city, byte for byte what the typed message
gave (``test/test_viewer_geometry.py``), padding zero.

Layout: little-endian plain CDR (XCDR1) after the 4-byte encapsulation header, each primitive aligned to
its size counted from the end of that header, strings as uint32 length (with the NUL) + bytes + NUL,
sequences as uint32 count + elements (OMG CDR, as :mod:`aerial_sim.cdr` writes the other messages).
The fields of ``visualization_msgs/Marker`` (ROS 2 Kilted): header, ns, id, type, action, pose, scale,
color, lifetime, frame_locked, points, colors, texture_resource, texture (``sensor_msgs/CompressedImage``),
uv_coordinates, text, mesh_resource, mesh_file (``visualization_msgs/MeshFile``),
mesh_use_embedded_materials.
"""

from __future__ import annotations

import struct
from typing import Sequence

import numpy as np

from aerial_sim.viewer.scene_view import Primitive

#: ``visualization_msgs/Marker`` types and actions (the message's constants).
CUBE, SPHERE, CYLINDER, TRIANGLE_LIST = 1, 2, 3, 11
ADD = 0
MARKER_TYPES = {"box": CUBE, "cylinder": CYLINDER, "sphere": SPHERE, "mesh": TRIANGLE_LIST}

_ENCAPSULATION = b"\x00\x01\x00\x00"  # CDR_LE, no options
_U32 = struct.Struct("<I")
_STAMP_ZERO = struct.Struct("<iI").pack(0, 0)
_ID_TYPE_ACTION = struct.Struct("<iii")
_POSE_SCALE = struct.Struct("<10d")  # position, orientation (x, y, z, w), scale
_COLOR = struct.Struct("<4f")
_EMPTY_STRING = _U32.pack(1) + b"\x00"


class _Writer:
    """Plain little-endian CDR into one growing buffer; offsets count from the end of the encapsulation."""

    def __init__(self):
        self.buffer = bytearray(_ENCAPSULATION)

    def align(self, size: int) -> None:
        self.buffer += bytes(-(len(self.buffer) - len(_ENCAPSULATION)) % size)

    def u32(self, value: int) -> None:
        self.align(4)
        self.buffer += _U32.pack(value)

    def string(self, text: str) -> None:
        data = text.encode()
        self.u32(len(data) + 1)
        self.buffer += data + b"\x00"

    def empty_string(self) -> None:
        self.align(4)
        self.buffer += _EMPTY_STRING

    def stamp_zero(self) -> None:
        self.align(4)
        self.buffer += _STAMP_ZERO

    def raw(self, data, alignment: int) -> None:
        self.align(alignment)
        self.buffer += data


def marker_corners(primitive: Primitive) -> np.ndarray:
    """A mesh primitive's triangle corners, three per triangle in order, as float64 (N, 3); empty otherwise."""
    if primitive.kind != "mesh":
        return np.zeros((0, 3))
    return np.asarray(primitive.vertices, np.float64)[np.asarray(primitive.faces).reshape(-1)]


def encode_marker_array(primitives: Sequence[Primitive], frame_id: str, alpha: float) -> bytes:
    """The CDR bytes of a ``MarkerArray`` with one marker per primitive: ``ns`` its name, ``id`` its index,
    stamp 0 (latest), ``frame_id``, colour its RGB / 255 with ``alpha``, ``frame_locked`` true, ADD."""
    out = _Writer()
    out.u32(len(primitives))
    for marker_id, primitive in enumerate(primitives):
        out.stamp_zero()  # header
        out.string(frame_id)
        out.string(primitive.name)  # ns
        out.raw(_ID_TYPE_ACTION.pack(marker_id, MARKER_TYPES[primitive.kind], ADD), 4)
        qw, qx, qy, qz = (float(v) for v in primitive.orientation)
        out.raw(_POSE_SCALE.pack(*(float(v) for v in primitive.position), qx, qy, qz, qw,
                                 *(float(v) for v in primitive.size)), 8)
        r, g, b = (c / 255.0 for c in primitive.color)
        out.raw(_COLOR.pack(r, g, b, alpha), 4)
        out.stamp_zero()  # lifetime
        out.buffer += b"\x01"  # frame_locked
        corners = marker_corners(primitive)
        out.u32(len(corners))  # points
        if len(corners):
            out.raw(corners.astype("<f8", copy=False).tobytes(), 8)
        out.u32(0)  # colors
        out.empty_string()  # texture_resource
        out.stamp_zero()  # texture.header
        out.empty_string()
        out.empty_string()  # texture.format
        out.u32(0)  # texture.data
        out.u32(0)  # uv_coordinates
        out.empty_string()  # text
        out.empty_string()  # mesh_resource
        out.empty_string()  # mesh_file.filename
        out.u32(0)  # mesh_file.data
        out.buffer += b"\x00"  # mesh_use_embedded_materials
    return bytes(out.buffer)


def scene_marker_array(scene, frame_id: str, alpha: float, ground_size_m: float) -> tuple[bytes, int]:
    """The CDR bytes of the scene's ``MarkerArray`` (:func:`encode_marker_array` of
    :func:`~aerial_sim.viewer.scene_view.scene_primitives`) and its marker count, from the scene cache's
    ``.markers`` file when it was made by this code for the same scene and arguments
    (:func:`aerial_sim.world.scene_cache.cached_derived`: a broken file is one warning and a rebuild, off with the
    cache): the city's 27.9 MB, 0.6 CPU s to make, read in a few hundredths."""
    from aerial_sim.viewer.scene_view import scene_primitives
    from aerial_sim.world.scene_cache import cached_derived, source_digest

    def build():
        primitives = scene_primitives(scene, ground_size_m)
        return np.frombuffer(encode_marker_array(primitives, frame_id, alpha), np.uint8), len(primitives)

    def decode(tree):
        data, count = tree
        if data.dtype != np.uint8 or data.ndim != 1 or not isinstance(count, int):
            raise ValueError("not a marker array")
        return data, count

    key = {"frame_id": frame_id, "alpha": float(alpha), "ground_size_m": float(ground_size_m),
           "code": source_digest(__file__, scene_primitives.__code__.co_filename)}
    data, count = cached_derived(scene, "markers", key, build, lambda value: list(value), decode,
                                 "the scene's markers are")
    return data.tobytes(), count
