"""AirSim's image and camera methods: ``simGetImages``/``simGetImage`` rendered by the camera rig, camera
info, pose, field of view and distortion, and the detection API (``simGetDetections`` and its filters,
:mod:`aerial_sim.airsim.detections`) (AIRSIM_API.md).
"""

from __future__ import annotations

import asyncio

from aerial_sim.airsim import wire
from aerial_sim.airsim.api_sensors import stamp_ns
from aerial_sim.airsim.detections import DetectionFilters, detection_infos, image_type_of
from aerial_sim.airsim.camera_rig import EXTERNAL, EXTERNAL_POSE, CameraRig
from aerial_sim.airsim.rpc import ContainsPrepacked
from aerial_sim.airsim.wire import RpcFault


class ImageMethods:
    """AirSim's image and camera methods, mixed into :class:`~aerial_sim.airsim.api.AirSimApi`
    (whose state they use)."""

    # -- images --------------------------------------------------------------------------------
    async def rpc_simGetImages(self, requests, vehicle_name="", external=False):
        if not isinstance(requests, (list, tuple)):
            raise RpcFault(f"requests must be a list of ImageRequest, got {wire._show(requests)}")
        parsed = [wire.parse_image_request(r, f"requests[{i}]") for i, r in enumerate(requests)]
        return ContainsPrepacked(await self._render(vehicle_name, parsed, _external(external)))

    async def rpc_simGetImage(self, camera_name, image_type, vehicle_name="", external=False):
        request = wire.ImageRequest(wire.text(str(camera_name) if isinstance(camera_name, int) else camera_name,
                                              "camera_name"), wire.integer(image_type, "image_type"), False, True)
        (response,) = await self._render(vehicle_name, [request], _external(external))
        if response["message"]:  # a type not rendered here: simGetImage has no message to carry it, so an error
            raise RpcFault(response["message"])
        return response["image_data_uint8"]

    def _camera_frame(self, vehicle_name, external: bool) -> tuple[str, tuple, tuple, float]:
        """(rig key, ENU position, orientation, time) the cameras are mounted on: the vehicle, or for an
        external camera (settings ExternalCameras) the map origin facing north."""
        if external:
            now = self.graph.clock.now_s or 0.0
            return (EXTERNAL, *EXTERNAL_POSE, now)
        link = self.vehicle(vehicle_name)
        state = self.kinematics(link)
        return link.name, state.position, state.orientation, state.time_s

    async def _render(self, vehicle_name, requests, external: bool = False) -> list[dict]:
        cameras = self._cameras()
        key, position, orientation, time_s = self._camera_frame(vehicle_name, external)
        if not requests:
            return []
        return await self._on_render_thread(lambda: cameras.render(key, requests, position, orientation,
                                                                   stamp_ns(time_s)))

    async def _on_render_thread(self, job):
        """``job()`` on the render executor (rendering holds no event-loop time), or here without one."""
        if self.render_executor is None:
            return job()
        return await asyncio.get_running_loop().run_in_executor(self.render_executor, job)

    # -- detections ----------------------------------------------------------------------------
    @property
    def detection_filters(self) -> DetectionFilters:
        filters = self.__dict__.get("_detection_filters")
        if filters is None:
            filters = self._detection_filters = DetectionFilters()
        return filters

    def _detection_key(self, camera_name, image_type, vehicle_name, external) -> tuple[str, str, int]:
        """(vehicle or external, canonical camera name, image type) of a detection call; faults name a bad one."""
        key = EXTERNAL if _external(external) else self.vehicle(vehicle_name).name
        name = wire.text(str(camera_name) if isinstance(camera_name, int) else camera_name, "camera_name")
        return key, self._cameras().canonical(name, key), image_type_of(image_type)

    async def rpc_simAddDetectionFilterMeshName(self, camera_name, image_type, mesh_name, vehicle_name="",
                                                external=False):
        key = self._detection_key(camera_name, image_type, vehicle_name, external)
        self.detection_filters.add(key, wire.text(mesh_name, "mesh_name"))

    async def rpc_simSetDetectionFilterRadius(self, camera_name, image_type, radius_cm, vehicle_name="",
                                              external=False):
        key = self._detection_key(camera_name, image_type, vehicle_name, external)
        self.detection_filters.set_radius(key, wire.number(radius_cm, "radius_cm"))

    async def rpc_simClearDetectionMeshNames(self, camera_name, image_type, vehicle_name="", external=False):
        self.detection_filters.clear(self._detection_key(camera_name, image_type, vehicle_name, external))

    async def rpc_simGetDetections(self, camera_name, image_type, vehicle_name="", external=False):
        key = self._detection_key(camera_name, image_type, vehicle_name, external)
        rule = self.detection_filters.get(key)
        if not rule.patterns:
            return []
        rig, (vehicle, position, orientation, _) = self._cameras(), self._camera_frame(vehicle_name, _external(external))
        camera = rig.camera(vehicle, key[1])
        return await self._on_render_thread(lambda: detection_infos(camera, rule, position, orientation,
                                                                    self.params.home))

    def _cameras(self) -> CameraRig:
        if self.cameras is None:
            raise RpcFault("this server renders no images (started without a scene)")
        return self.cameras

    async def rpc_simGetCameraInfo(self, camera_name, vehicle_name="", external=False):
        key, position, orientation, _ = self._camera_frame(vehicle_name, _external(external))
        return self._cameras().camera_info(key, wire.text(camera_name, "camera_name"), position, orientation)

    async def rpc_simSetCameraPose(self, camera_name, pose, vehicle_name="", external=False):
        key = self._camera_frame(vehicle_name, _external(external))[0]
        position, orientation = wire.parse_pose(pose, "pose")
        self._cameras().set_pose(key, wire.text(camera_name, "camera_name"), position, orientation)

    async def rpc_simSetCameraFov(self, camera_name, fov_degrees, vehicle_name="", external=False):
        key = self._camera_frame(vehicle_name, _external(external))[0]
        self._cameras().set_fov(key, wire.text(camera_name, "camera_name"), wire.number(fov_degrees, "fov_degrees"))

    async def rpc_simGetDistortionParams(self, camera_name, vehicle_name="", external=False):
        key = self._camera_frame(vehicle_name, _external(external))[0]
        return self._cameras().distortion_params(key, wire.text(camera_name, "camera_name"))  # K1 K2 K3 P1 P2

    async def rpc_simSetDistortionParam(self, camera_name, param_name, value, vehicle_name="", external=False):
        key = self._camera_frame(vehicle_name, _external(external))[0]
        rig = self._cameras()
        return await self._on_render_thread(lambda: rig.set_distortion_param(
            key, wire.text(camera_name, "camera_name"), wire.text(param_name, "param_name"),
            wire.number(value, "value")))


def _external(value) -> bool:
    """airsim's trailing ``external`` flag; cosysairsim sends an annotation name (a string) there: not external."""
    return value if isinstance(value, bool) else False
