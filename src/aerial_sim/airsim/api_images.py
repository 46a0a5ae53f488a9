"""AirSim's image and camera methods: ``simGetImages``/``simGetImage`` rendered by the camera rig, camera
info, pose, field of view and distortion (AIRSIM_API.md).
"""

from __future__ import annotations

import asyncio

from aerial_sim.airsim import wire
from aerial_sim.airsim.api_sensors import stamp_ns
from aerial_sim.airsim.images import CameraRig
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
        return ContainsPrepacked(await self._render(vehicle_name, parsed))

    async def rpc_simGetImage(self, camera_name, image_type, vehicle_name="", external=False):
        request = (wire.text(str(camera_name) if isinstance(camera_name, int) else camera_name, "camera_name"),
                   wire.integer(image_type, "image_type"), False, True)
        (response,) = await self._render(vehicle_name, [request])
        return response["image_data_uint8"]

    async def _render(self, vehicle_name, requests) -> list[dict]:
        link = self.vehicle(vehicle_name)
        cameras = self._cameras()
        if not requests:
            return []
        state = self.kinematics(link)
        job = lambda: cameras.render(link.name, requests, state.position, state.orientation, stamp_ns(state.time_s))  # noqa: E731
        if self.render_executor is None:
            return job()
        return await asyncio.get_running_loop().run_in_executor(self.render_executor, job)

    def _cameras(self) -> CameraRig:
        if self.cameras is None:
            raise RpcFault("this server renders no images (started without a scene)")
        return self.cameras

    async def rpc_simGetCameraInfo(self, camera_name, vehicle_name="", external=False):
        link = self.vehicle(vehicle_name)
        state = self.kinematics(link)
        return self._cameras().camera_info(link.name, wire.text(camera_name, "camera_name"), state.position, state.orientation)

    async def rpc_simSetCameraPose(self, camera_name, pose, vehicle_name="", external=False):
        link = self.vehicle(vehicle_name)
        position, orientation = wire.parse_pose(pose, "pose")
        self._cameras().set_pose(link.name, wire.text(camera_name, "camera_name"), position, orientation)

    async def rpc_simSetCameraFov(self, camera_name, fov_degrees, vehicle_name="", external=False):
        link = self.vehicle(vehicle_name)
        self._cameras().set_fov(link.name, wire.text(camera_name, "camera_name"), wire.number(fov_degrees, "fov_degrees"))

    async def rpc_simGetDistortionParams(self, camera_name, vehicle_name="", external=False):
        self.vehicle(vehicle_name)
        self._cameras().canonical(wire.text(camera_name, "camera_name"))
        return [0.0, 0.0, 0.0, 0.0, 0.0]  # K1, K2, K3, P1, P2: an ideal pinhole

    async def rpc_simSetDistortionParam(self, camera_name, param_name, value, vehicle_name="", external=False):
        if wire.number(value, "value") != 0.0:
            raise RpcFault("aerial_sim cameras are ideal pinholes: distortion parameters stay 0")
