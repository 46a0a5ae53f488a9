"""How the physics node paces ground truth for many vehicles (issue 14), without a ROS graph.

Under load the node lowers each vehicle's ground-truth rate to keep real time, but never
below ``ground_truth_min_rate_hz``: the flight controllers act on the latest odometry and
lose the vehicle at low rates (test_control_closed_loop.py flies both sides of that floor).
"""

from __future__ import annotations

import pytest
from conftest import requires_ros

from aerial_sim.config import ParamsError
from aerial_sim.control.controller import STABLE_STATE_RATE_HZ

pytestmark = requires_ros

PERIOD_HZ = 250.0  # control periods per simulated second
PUBLISH_S = 200e-6  # one vehicle's odometry, IMU, rotors and TF


def stride_for(count, physics_s=0.2, floor_hz=STABLE_STATE_RATE_HZ, budget_s=0.8, requested_hz=250.0):
    from aerial_sim.nodes._physics.publishing import ground_truth_stride

    return ground_truth_stride(PERIOD_HZ, requested_hz, floor_hz, physics_s, PUBLISH_S, count, budget_s)


def test_light_load_publishes_the_requested_rate():
    choice = stride_for(count=2)
    assert choice.stride == 1 and not choice.floored
    assert stride_for(count=2, requested_hz=125.0).stride == 2


def test_load_lowers_the_rate_to_keep_real_time_down_to_the_floor():
    # 20 vehicles: 0.2 s physics + 20 x 200 us x 250 Hz / stride must fit 0.8 s -> stride 2 (125 Hz).
    choice = stride_for(count=20)
    assert choice.stride == 2 and not choice.floored
    assert choice.cost_s <= 0.8


def test_heavy_load_holds_the_floor_and_says_real_time_is_lost():
    # 200 vehicles would need 10 s / stride of publishing: stride 17 (14.7 Hz) for real time.
    choice = stride_for(count=200)
    assert PERIOD_HZ / choice.stride == STABLE_STATE_RATE_HZ  # never below the controllers' stable rate
    assert choice.floored and choice.needed_stride == 17
    assert choice.expected_speed(0.8) == pytest.approx(0.8 / (0.2 + 200 * PUBLISH_S * PERIOD_HZ / choice.stride))
    unfloored = stride_for(count=200, floor_hz=0.0)  # no controller flies: real time wins
    assert unfloored.stride == 17 and not unfloored.floored


def test_a_requested_rate_below_the_floor_is_a_clear_error():
    from aerial_sim.nodes._physics.params import PhysicsNodeParams

    with pytest.raises(ParamsError, match="ground_truth_rate_hz .10. is below ground_truth_min_rate_hz .50."):
        PhysicsNodeParams(ground_truth_rate_hz=10.0)
    assert PhysicsNodeParams(ground_truth_rate_hz=10.0, ground_truth_min_rate_hz=0.0).ground_truth_rate_hz == 10.0
    with pytest.raises(ParamsError, match="cannot exceed publish_rate_hz"):
        PhysicsNodeParams(ground_truth_min_rate_hz=500.0)
