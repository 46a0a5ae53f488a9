"""Embedded web viewer: the scene, the vehicle, its trail, every vehicle of a swarm, the depth and lidar point
clouds and the camera images.

Served by `viser <https://viser.studio>`_ (a maintained Python library that ships its
prebuilt three.js client inside the wheel, so it works offline) on
``http://127.0.0.1:<port>`` only. This class knows nothing of ROS: the
``web_viewer`` node feeds it poses, clouds and images and calls :meth:`refresh`
at a modest rate (10 Hz by default), so the browser connection costs little CPU.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from aerial_sim.config import require, require_positive
from aerial_sim.viewer.scene_view import Primitive
from aerial_sim.world.camera import CameraParams

HOST = "127.0.0.1"  # never exposed beyond this machine
VEHICLE_COLOR = (255, 0, 230)  # magenta: no scene material has it, so it stands out
TRAIL_COLOR = (255, 200, 0)
DEPTH_CLOUD_COLOR = (40, 200, 255)


@dataclass(frozen=True)
class WebViewerParams:
    """Web viewer settings; ``port`` 0 picks a free port; a taken port moves to the next free one (the URL
    printed at start-up is always the one served)."""

    port: int = 8080
    update_rate_hz: float = 10.0
    trail_length: int = 5000  # points kept
    trail_min_step_m: float = 0.05  # a new trail point every this many metres
    cloud_max_points: int = 30000
    cloud_point_size_m: float = 0.06
    image_scale: float = 0.5  # images are downscaled by this factor before being sent
    vehicle_size_m: tuple[float, float, float] = (0.6, 0.6, 0.15)
    camera_position: tuple[float, float, float] = (-18.0, -20.0, 16.0)  # initial browser viewpoint
    camera_look_at: tuple[float, float, float] = (8.0, 0.0, 0.0)
    follow: bool = True  # browsers' cameras chase the vehicle (a checkbox turns it off)
    follow_offset_m: tuple[float, float, float] = (-6.0, -6.0, 4.0)  # chase camera from the vehicle, map axes
    sun_direction_enu: tuple[float, float, float] = CameraParams.sun_direction_enu

    def __post_init__(self) -> None:
        require(0 <= self.port <= 65535, f"port must be 0..65535, got {self.port}")
        require_positive(self, "update_rate_hz", "trail_min_step_m", "cloud_point_size_m", "image_scale")
        require(self.update_rate_hz <= 60, f"update_rate_hz above 60 only costs CPU, got {self.update_rate_hz}")
        require(self.trail_length >= 2 and self.cloud_max_points >= 1, "trail_length >= 2 and cloud_max_points >= 1")


def free_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def segmentation_colors(ids: np.ndarray) -> np.ndarray:
    """mono16 ids -> distinct RGB (0 = black), a fixed hash so an id keeps its colour between frames."""
    ids = ids.astype(np.uint32)
    rgb = np.stack([(ids * 67) % 251, (ids * 139) % 241, (ids * 211) % 239], axis=-1).astype(np.uint8)
    rgb[ids == 0] = 0
    return rgb


def height_colors(z: np.ndarray, low_m: float = 0.0, high_m: float = 10.0) -> np.ndarray:
    """Heights -> RGB uint8 (N, 3) along a blue-green-red ramp from ``low_m`` to ``high_m`` (lidar clouds)."""
    f = np.clip((np.asarray(z, float) - low_m) / (high_m - low_m), 0.0, 1.0)
    red, green, blue = np.clip(2 * f - 1, 0, 1), 1 - np.abs(2 * f - 1), np.clip(1 - 2 * f, 0, 1)
    return (255 * np.stack([red, green, blue], axis=1)).astype(np.uint8)


def depth_colors(depth_m: np.ndarray, max_range_m: float = 30.0) -> np.ndarray:
    """Depth (m) -> grey RGB, near = bright; no return (0, NaN) = black."""
    valid = np.isfinite(depth_m) & (depth_m > 0)
    grey = np.where(valid, 255.0 * (1.0 - np.clip(depth_m / max_range_m, 0.0, 1.0)), 0.0).astype(np.uint8)
    return np.repeat(grey[..., None], 3, axis=-1)


class WebViewer:
    """A viser server showing one vehicle in a scene. Thread-safe enough: setters only store data."""

    def __init__(self, params: WebViewerParams, primitives: list[Primitive]):
        import viser

        self.params = params
        self.closed = False
        self.server = viser.ViserServer(host=HOST, port=params.port or free_port(), label="aerial_sim", verbose=False)
        #: The port the server bound: viser moves on to the next free one when the requested port is taken.
        self.port = self.server.get_port()
        self.server.scene.set_up_direction("+z")  # map is ENU
        self.server.scene.configure_environment_map(hdri=None)  # the default HDRI is fetched online
        # Offline lighting: sky/ground hemisphere plus a sun from the camera model's sun direction.
        self.server.scene.add_light_hemisphere("/lights/sky", sky_color=(200, 220, 255), ground_color=(90, 90, 90),
                                               intensity=1.2)  # fmt: skip
        sun = 60.0 * np.asarray(params.sun_direction_enu) / np.linalg.norm(params.sun_direction_enu)
        self.server.scene.add_light_directional("/lights/sun", intensity=2.0, position=tuple(sun))
        self.server.initial_camera.position = params.camera_position
        self.server.initial_camera.look_at = params.camera_look_at
        self.server.initial_camera.up = (0.0, 0.0, 1.0)
        self._add_scene(primitives)
        self.vehicle = self.server.scene.add_box(
            "/vehicle", color=VEHICLE_COLOR, dimensions=params.vehicle_size_m, position=(0.0, 0.0, -100.0)
        )
        self.server.scene.add_frame("/vehicle/axes", axes_length=0.6, axes_radius=0.03)
        self._swarm_handles: list = []  # one axes frame per vehicle of /swarm/poses
        self._pending_swarm = None
        self._trail: deque = deque(maxlen=params.trail_length)
        self._trail_handle = None
        self._cloud_handles: dict = {}
        self._pending_pose = None
        self._pending_clouds: dict[str, tuple[np.ndarray, tuple | np.ndarray]] = {}
        self._pending_images: dict[str, np.ndarray] = {}
        self._image_handles: dict = {}
        self.status = self.server.gui.add_markdown("waiting for ground_truth/odom ...")
        self.follow = self.server.gui.add_checkbox("follow vehicle", initial_value=params.follow)

    def has_clients(self) -> bool:
        """Whether a browser is connected (one that has sent its camera; safe from any thread)."""
        return not self.closed and bool(self.server.get_clients())

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def _add_scene(self, primitives: list[Primitive]) -> None:
        scene = self.server.scene
        for p in primitives:
            name = f"/scene/{p.name}"
            if p.kind == "box":
                scene.add_box(name, color=p.color, dimensions=p.size, position=p.position, wxyz=p.orientation)
            elif p.kind == "cylinder":
                scene.add_cylinder(name, radius=p.size[0] / 2, height=p.size[2], color=p.color, position=p.position,
                                   wxyz=p.orientation)  # fmt: skip
            elif p.kind == "sphere":
                scene.add_icosphere(name, radius=p.size[0] / 2, color=p.color, position=p.position)
            else:
                scene.add_mesh_simple(name, vertices=p.vertices, faces=p.faces, color=p.color)
        scene.add_grid("/scene/grid", width=100.0, height=100.0, cell_size=1.0, section_size=10.0, position=(0, 0, 0.005))

    # -- data in (any thread) ---------------------------------------------------
    def set_pose(self, time_s: float, position, orientation) -> None:
        """Vehicle pose in map: position (x, y, z), orientation (w, x, y, z)."""
        self._pending_pose = (time_s, tuple(position), tuple(orientation))

    def set_swarm(self, positions, orientations) -> None:
        """Every vehicle's pose in map (``/swarm/poses``): (N, 3) positions, (N, 4) orientations (w, x, y, z)."""
        self._pending_swarm = (np.asarray(positions, dtype=float), np.asarray(orientations, dtype=float))

    def set_cloud(self, points_map: np.ndarray, name: str = "depth", colors=DEPTH_CLOUD_COLOR) -> None:
        """Show a cloud (map frame) as ``/<name>_points``; ``colors``: one RGB or (N, 3) uint8 per point."""
        points = np.asarray(points_map, dtype=np.float32)
        if len(points) > self.params.cloud_max_points:
            step = math.ceil(len(points) / self.params.cloud_max_points)
            points = points[::step]
            colors = colors[::step] if isinstance(colors, np.ndarray) else colors
        self._pending_clouds[name] = (points, colors)

    def set_image(self, label: str, rgb: np.ndarray) -> None:
        step = max(1, round(1.0 / self.params.image_scale))
        self._pending_images[label] = np.ascontiguousarray(rgb[::step, ::step])

    # -- push to browsers (the node's timer) -------------------------------------
    def refresh(self) -> None:
        """Push what arrived since the last call to the browsers (nothing once closed: no encoding at shutdown)."""
        if self.closed:
            return
        pose, self._pending_pose = self._pending_pose, None
        if pose is not None:
            time_s, position, orientation = pose
            self.vehicle.position = position
            self.vehicle.wxyz = orientation
            if not self._trail or math.dist(self._trail[-1], position) >= self.params.trail_min_step_m:
                self._trail.append(position)
                self._draw_trail()
            if self.follow.value:
                self._chase(position)
            x, y, z = position
            self.status.content = f"t = {time_s:.1f} s &nbsp; position (ENU) {x:.1f}, {y:.1f}, {z:.1f} m"
        swarm, self._pending_swarm = self._pending_swarm, None
        if swarm is not None:
            self._draw_swarm(*swarm)
        clouds, self._pending_clouds = self._pending_clouds, {}
        for name, (cloud, colors) in clouds.items():
            if len(cloud):
                # Re-added rather than resized: viser keeps per-point colours sized to the first cloud.
                self._cloud_handles[name] = self.server.scene.add_point_cloud(
                    f"/{name}_points", points=cloud, colors=colors, point_size=self.params.cloud_point_size_m
                )
        images, self._pending_images = self._pending_images, {}
        for label, rgb in images.items():
            if label in self._image_handles:
                self._image_handles[label].image = rgb
            else:
                self._image_handles[label] = self.server.gui.add_image(rgb, label=label, format="jpeg")

    def _draw_swarm(self, positions: np.ndarray, orientations: np.ndarray) -> None:
        """One frame per vehicle (``/swarm/<i>``), added as vehicles appear, hidden when fewer are sent."""
        while len(self._swarm_handles) < len(positions):
            index = len(self._swarm_handles)
            self._swarm_handles.append(self.server.scene.add_frame(f"/swarm/{index}", axes_length=0.5, axes_radius=0.04))
        for index, handle in enumerate(self._swarm_handles):
            handle.visible = index < len(positions)
            if handle.visible:
                handle.position = tuple(positions[index])
                handle.wxyz = tuple(orientations[index])

    def _chase(self, position) -> None:
        eye = tuple(float(p + o) for p, o in zip(position, self.params.follow_offset_m))
        for client in self.server.get_clients().values():
            with client.atomic():
                client.camera.position = eye
                client.camera.look_at = tuple(float(p) for p in position)

    def _draw_trail(self) -> None:
        if len(self._trail) < 2:
            return
        points = np.asarray(self._trail, dtype=np.float32)
        segments = np.stack([points[:-1], points[1:]], axis=1)
        self._trail_handle = self.server.scene.add_line_segments(  # same name: replaces the old trail
            "/trail", points=segments, colors=TRAIL_COLOR, thickness=3.0, thickness_units="screen"
        )

    def close(self) -> None:
        """Stop the server once; later calls and later :meth:`refresh` calls do nothing."""
        if self.closed:
            return
        self.closed = True
        self.server.stop()
