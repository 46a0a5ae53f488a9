"""The part every ground-truth-odometry-driven sensor node shares (barometer, magnetometer, GPS).

Not an executable itself (setup.py skips modules starting with ``_``). A sensor
node subclasses :class:`OdometrySensorNode`, creates its publishers and
implements :meth:`OdometrySensorNode.publish` for one model output.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from rclpy.node import Node
from std_srvs.srv import Trigger

from aerial_sim.cdr.decode import OdometryFields
from aerial_sim.config import ParamsError, require
from aerial_sim.environment.geodesy import HomePoint
from aerial_sim.nodes.ros.clocks import InputStampClock
from aerial_sim.nodes.ros.frames import frame_in_namespace, publish_static_mount
from aerial_sim.nodes.ros.lockstep import participant_publisher
from aerial_sim.nodes.ros.parameters import declare_params, reread_params
from aerial_sim.nodes.ros.qos import stream_qos
from aerial_sim.nodes.ros.services import serve
from aerial_sim.nodes.ros.subscriptions import subscribe_odometry
from aerial_sim.sensors.mounting import sensor_mount
from aerial_sim.sensors.params import SensorNodeOptions, load_preset
from aerial_sim.sensors.resampling import Resampler, resample_for
from aerial_sim.sensors.truth import UNUSABLE_ODOMETRY, last_truth_from_odometry


#: Model parameters a reset may not change: they shape the graph (the lockstep announcement's rate, the
#: static mount transform); changing them means relaunching.
SHAPE_FIELDS = ("rate_hz", "mount", "vibration_enabled")


def serve_sensor_reset(node: Node, rebuild: Callable[[Any], None]) -> None:
    """Serve ``~/reset`` (std_srvs/Trigger) on a sensor node: its model is built again from the node's
    parameters as they are now, and ``rebuild(params)`` puts the new model and a fresh resampler in place,
    so the next sample is the first of a new run: noise streams drawn from the current ``seed`` (set
    it with ``ros2 param set`` or a ``SetParameters`` call first for a new one), bias walks, filters and
    delay lines from their start. What a warm batch run does between runs (doc/batch.md). A parameter
    that fails its check, or one of :data:`SHAPE_FIELDS` that changed, refuses the reset (one line,
    ``success`` false) and leaves the model as it was."""

    def on_reset(request, response):
        try:
            params = reread_params(node, node.params)
            changed = [name for name in SHAPE_FIELDS if getattr(params, name, None) != getattr(node.params, name, None)]
            if changed:
                raise ParamsError(f"{', '.join(changed)} changed: that needs a relaunch, not a reset")
        except ParamsError as error:
            node.get_logger().warning(f"reset refused: {error}")
            response.success, response.message = False, str(error)
            return response
        node.params = params
        rebuild(params)
        response.success, response.message = True, f"reset, seed {params.seed}"
        node.get_logger().info(f"reset: a new run from seed {params.seed}")
        return response

    serve(node, Trigger, "~/reset", on_reset)

#: What every odometry-fed sensor reads (and, in lockstep, waits to be connected to before its output enters the graph).
TRUTH_TOPIC = "ground_truth/odom"


@dataclass(frozen=True)
class SceneOption:
    """The scene a ray-casting sensor (lidar, distance) sees."""

    scene: str = "empty"  # config/scenes/<scene>.yaml, or a path

    def __post_init__(self) -> None:
        require(bool(self.scene), "scene must name a scene (e.g. 'empty')")


def sensor_defaults(node: Node, params_type: type, options: SensorNodeOptions):
    """The defaults of a sensor node's model parameters: its ``preset``, then what the AirSim settings file
    (``airsim_settings``) sets for this vehicle's sensor of that kind (aerial_sim/airsim/sensor_noise.py); a file
    that cannot be used is one error line and the preset alone (ROS parameters given still win)."""
    defaults = load_preset(params_type, options.preset)
    if options.airsim_settings in ("", "none"):
        return defaults
    from aerial_sim.airsim.sensor_noise import KIND_OF_PARAMS, vehicle_sensor_parameters
    from aerial_sim.airsim.settings import usable_settings

    found = usable_settings(options.airsim_settings,
                            lambda error: node.get_logger().error(f"{error}; the preset's noise parameters are used"))
    if found is None:
        return defaults
    path, settings = found
    vehicle = node.get_namespace().strip("/").split("/")[-1]
    changes = vehicle_sensor_parameters(settings, vehicle, KIND_OF_PARAMS.get(params_type.__name__, ""))
    if changes:
        node.get_logger().info(f"AirSim settings {path}: {', '.join(f'{k} {v}' for k, v in changes.items())}")
    return dataclasses.replace(defaults, **changes)


class OdometrySensorNode(Node):
    """Declares the sensor's options, its model's parameters (defaults from the datasheet
    ``preset``) and the home point; builds the model; feeds it ``ground_truth/odom``
    resampled to the exact sim-time instants ``k / rate_hz``."""

    def __init__(self, name: str, params_type: type, model_type: type, preset: str, frame_id: str, **node_options):
        super().__init__(name, **node_options)
        self.options = declare_params(self, SensorNodeOptions, defaults=SensorNodeOptions(preset=preset, frame_id=frame_id))
        self.params = declare_params(self, params_type, defaults=sensor_defaults(self, params_type, self.options))
        home = declare_params(self, HomePoint, prefix="home.")
        self.frame_id = frame_in_namespace(self, self.options.frame_id)
        mount = sensor_mount(self.params)
        publish_static_mount(self, self.frame_id, mount.position_m, mount.orientation)
        self.model = model_type(self.params, home)
        self.resampler = Resampler(self.params.rate_hz, self.options.interpolation)
        self.dt = 1.0 / self.params.rate_hz
        self.qos = stream_qos(self.options.lockstep)
        subscribe_odometry(self, TRUTH_TOPIC, self.on_truth, self.qos, clock=InputStampClock(self), shared=True)

        def rebuild(params) -> None:
            self.model = model_type(params, home)
            self.resampler = Resampler(params.rate_hz, self.options.interpolation)

        serve_sensor_reset(self, rebuild)

    def output_publisher(self, message_type: type, topic: str, first_s: float = 0.0, lag_s: float = 0.0):
        """The publisher of the sensor's last-published topic; with ``lockstep``, the output the physics
        node waits for, one per ``k / rate_hz`` (:func:`participant_publisher`)."""
        return participant_publisher(self, message_type, topic, self.qos, self.options.lockstep, self.params.rate_hz,
                                     first_s, lag_s, inputs=(TRUTH_TOPIC,))

    def on_truth(self, odom: OdometryFields) -> None:
        truth = last_truth_from_odometry(odom)
        if truth is None:
            self.get_logger().warning(UNUSABLE_ODOMETRY, throttle_duration_sec=5)
            return
        for sample in resample_for(self.model, self.resampler, truth):
            self.publish(self.model.step(self.dt, sample))

    def publish(self, measurement: Any) -> None:
        """Publish one output of ``self.model.step`` (stamped with its sim time, in ``self.frame_id``)."""
        raise NotImplementedError
