"""Scene markers node: publishes the scene's objects as ``visualization_msgs/MarkerArray`` for RViz.

Reads the ``scene`` parameter (``config/scenes/<scene>.yaml`` or a path, the same
parameter the physics and camera nodes take), converts it once with
:func:`aerial_sim.viewer.scene_view.scene_primitives` into CDR bytes
(:func:`aerial_sim.viewer.marker_array.scene_marker_array`, kept in the scene cache) and publishes them latched
(``LATCHED_QOS``) on ``scene_markers``, frame ``map``, so RViz started at any
time gets it.
"""

from __future__ import annotations

from dataclasses import dataclass

from geometry_msgs.msg import Point
from rclpy.node import Node
from std_msgs.msg import ColorRGBA
from visualization_msgs.msg import Marker, MarkerArray

from aerial_sim.config import require
from aerial_sim.nodes.ros.clocks import InputStampClock
from aerial_sim.nodes.ros.parameters import declare_params
from aerial_sim.nodes.ros.qos import LATCHED_QOS
from aerial_sim.nodes.ros.run import run_node
from aerial_sim.viewer.marker_array import scene_marker_array
from aerial_sim.viewer.scene_view import Primitive
from aerial_sim.world.scene import load_scene

MARKER_TYPES = {"box": Marker.CUBE, "cylinder": Marker.CYLINDER, "sphere": Marker.SPHERE, "mesh": Marker.TRIANGLE_LIST}


@dataclass(frozen=True)
class SceneMarkersParams:
    scene: str = "empty"
    frame_id: str = "map"
    ground_size_m: float = 120.0
    alpha: float = 1.0

    def __post_init__(self) -> None:
        require(bool(self.scene), "scene must name a scene (e.g. 'empty')")
        require(0.0 < self.alpha <= 1.0, f"alpha must be in (0, 1], got {self.alpha}")


def to_marker(primitive: Primitive, marker_id: int, frame_id: str, alpha: float) -> Marker:
    """The typed marker of one primitive (the reference the published bytes,
    :func:`~aerial_sim.viewer.marker_array.encode_marker_array`, equal; test_viewer_geometry)."""
    marker = Marker(ns=primitive.name, id=marker_id, type=MARKER_TYPES[primitive.kind], action=Marker.ADD)
    marker.header.frame_id = frame_id
    p, q = marker.pose.position, marker.pose.orientation
    p.x, p.y, p.z = primitive.position
    q.w, q.x, q.y, q.z = primitive.orientation
    marker.scale.x, marker.scale.y, marker.scale.z = primitive.size
    r, g, b = (c / 255.0 for c in primitive.color)
    marker.color = ColorRGBA(r=r, g=g, b=b, a=alpha)
    marker.frame_locked = True
    if primitive.kind == "mesh":
        corners = primitive.vertices[primitive.faces.reshape(-1)]
        marker.points = [Point(x=float(x), y=float(y), z=float(z)) for x, y, z in corners]
    return marker


class SceneMarkers(Node):
    def __init__(self):
        super().__init__("scene_markers")
        self.params = declare_params(self, SceneMarkersParams)
        scene = load_scene(self.params.scene)
        # CDR bytes written from numpy, padding zero (issue 32): the typed message's 1.1 M Point objects
        # for the city cost ~12 CPU s at start-up, beside the flight (issue 29); the same bytes, kept in the
        # scene cache after the first launch (0.6 CPU s for the city).
        data, count = scene_marker_array(scene, self.params.frame_id, self.params.alpha, self.params.ground_size_m)
        self.publisher = self.create_publisher(MarkerArray, "scene_markers", LATCHED_QOS)
        self.publisher.publish(data)
        InputStampClock(self)  # stamped 0 ("latest"): this node needs no /clock at all
        self.get_logger().info(f"scene '{scene.name}': {count} markers on {self.publisher.topic_name}")


def main(args=None):
    return run_node(SceneMarkers, args)


if __name__ == "__main__":
    raise SystemExit(main())
