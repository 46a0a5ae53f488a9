"""Distance node: ``ground_truth/odom`` -> ``distance/range`` (sensor_msgs/Range in ``<ns>/distance_link``).

Thin adapter around :class:`aerial_sim.sensors.distance.DistanceSensor` (a
single-beam rangefinder whose beam is a cone), driven by ground truth resampled
to the exact instants ``k / rate_hz``. Range follows REP-117 (+inf: nothing in
range, -inf: too near); ``variance`` comes from the noise model. The default
``preset`` is ``tfmini_plus``; ``preset:=''`` gives AirSim's DistanceSensor.
"""

from __future__ import annotations

import math

from sensor_msgs.msg import Range

from aerial_sim.cdr.encode import encode_range
from aerial_sim.nodes._sensor import OdometrySensorNode, SceneOption
from aerial_sim.nodes.ros.parameters import declare_params
from aerial_sim.nodes.ros.run import run_node
from aerial_sim.nodes.ros.stamps import to_stamp_ns
from aerial_sim.sensors.distance import DistanceMeasurement, DistanceSensor, DistanceSensorParams
from aerial_sim.world.scene import load_scene

RADIATION_TYPES = {"ultrasound": Range.ULTRASOUND, "infrared": Range.INFRARED}


class DistanceNode(OdometrySensorNode):
    def __init__(self):
        super().__init__("distance", DistanceSensorParams, self._make_sensor, preset="tfmini_plus", frame_id="distance_link")
        p = self.params
        self.fixed_fields = dict(radiation_type=RADIATION_TYPES[p.radiation_type], field_of_view=math.radians(p.field_of_view_deg),
                                 min_range=p.min_range_m, max_range=p.max_range_m)  # fmt: skip
        self.publisher = self.output_publisher(Range, "distance/range")
        self.get_logger().info(
            f"distance sensor at {p.rate_hz:g} Hz in {self.frame_id} (preset '{self.options.preset}', "
            f"{p.cone_rays} rays over {p.field_of_view_deg:g} deg, {p.return_mode} return, scene '{self.scene.name}')"
        )

    def _make_sensor(self, params: DistanceSensorParams, home) -> DistanceSensor:
        del home  # a rangefinder needs no geodesy
        self.scene = load_scene(declare_params(self, SceneOption).scene)
        return DistanceSensor(params, self.scene)

    def publish(self, m: DistanceMeasurement) -> None:
        f = self.fixed_fields  # CDR bytes with zero padding after radiation_type (issue 32)
        self.publisher.publish(encode_range(to_stamp_ns(m.time_s), self.frame_id, f["radiation_type"], f["field_of_view"],
                                            f["min_range"], f["max_range"], m.range_m, m.variance_m2))


def main(args=None):
    return run_node(DistanceNode, args, background=True)


if __name__ == "__main__":
    raise SystemExit(main())
