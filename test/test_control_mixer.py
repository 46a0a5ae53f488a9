"""The mixer turns thrust and torques into rotor inputs for any vertex geometry (pure, fast)."""

import math

import numpy as np
import pytest

from aerial_sim.config import ParamsError
from aerial_sim.control.mixer import Mixer
from aerial_sim.vehicles.multirotor import load_vehicle

RHO = 1.225


@pytest.fixture(params=["quad_x", "hexa_x"])
def vehicle(request):
    return load_vehicle(request.param)


def physical_wrench(vehicle, controls):
    """Thrust and torques the rotors produce, summed per AirSim sec. 3.1 independently of the mixer."""
    force = np.zeros(3)
    torque = np.zeros(3)
    for rotor, u in zip(vehicle.rotors, controls):
        normal = np.asarray(rotor.normal)
        f = rotor.max_thrust_n(RHO) * u * normal
        force += f
        torque += np.cross(rotor.position_m, f) - rotor.turning_direction * rotor.max_torque_nm(RHO) * u * normal
    return np.array([force[2], *torque])


def test_allocation_reproduces_requested_thrust_and_torques(vehicle):
    mixer = Mixer.from_vehicle(vehicle, RHO)
    weight = vehicle.mass_kg * 9.80665
    for request in ([weight, 0.0, 0.0, 0.0], [weight, 0.3, -0.2, 0.05], [1.2 * weight, -0.25, 0.25, -0.03]):
        out = mixer.mix(request[0], request[1:])
        assert not out.saturated
        assert all(0.0 <= u <= 1.0 for u in out.controls)
        np.testing.assert_allclose(physical_wrench(vehicle, out.controls), request, atol=1e-9)


def test_hover_request_gives_equal_inputs_that_balance_weight(vehicle):
    mixer = Mixer.from_vehicle(vehicle, RHO)
    weight = vehicle.mass_kg * 9.80665
    out = mixer.mix(weight, (0.0, 0.0, 0.0))
    expected = vehicle.hover_controls(RHO, 9.80665)
    np.testing.assert_allclose(out.controls, expected, rtol=1e-9)


def test_positive_roll_torque_speeds_up_the_left_rotors(vehicle):
    """FLU: +tau_x (right-hand rule about x forward) lifts the left (y > 0) side."""
    mixer = Mixer.from_vehicle(vehicle, RHO)
    out = mixer.mix(vehicle.mass_kg * 9.80665, (0.2, 0.0, 0.0))
    for rotor, u, hover in zip(vehicle.rotors, out.controls, vehicle.hover_controls(RHO, 9.80665)):
        if rotor.position_m[1] > 1e-6:
            assert u > hover
        elif rotor.position_m[1] < -1e-6:
            assert u < hover


def test_saturation_keeps_roll_pitch_and_thrust_and_gives_up_yaw_first(vehicle):
    mixer = Mixer.from_vehicle(vehicle, RHO)
    weight = vehicle.mass_kg * 9.80665
    out = mixer.mix(weight, (0.3, 0.2, 5.0))  # yaw far beyond what the rotors can give
    achieved = np.array(out.achieved)
    assert out.saturated and 0.0 < out.yaw_scale < 1.0
    np.testing.assert_allclose(achieved[:3], [weight, 0.3, 0.2], rtol=1e-9, atol=1e-9)
    assert 0.0 < achieved[3] < 5.0  # yaw in the asked direction, reduced
    assert all(0.0 <= u <= 1.0 for u in out.controls)


def test_saturation_shifts_thrust_before_giving_up_attitude(vehicle):
    mixer = Mixer.from_vehicle(vehicle, RHO)
    # Asking for (almost) full thrust and a roll torque: the roll is kept, thrust gives way.
    full = mixer.max_thrust_n
    out = mixer.mix(full, (0.4, 0.0, 0.0))
    achieved = np.array(out.achieved)
    assert out.saturated
    assert achieved[1] == pytest.approx(0.4, rel=1e-9)
    assert achieved[0] < full
    # An impossible attitude request is scaled down but keeps its direction (never flips).
    out = mixer.mix(0.5 * full, (50.0, -50.0, 0.0))
    achieved = np.array(out.achieved)
    assert achieved[1] > 0 and achieved[2] < 0
    assert achieved[1] / -achieved[2] == pytest.approx(1.0, rel=0.2)
    assert all(0.0 <= u <= 1.0 for u in out.controls)


def test_geometry_without_yaw_authority_is_rejected():
    # Four rotors all spinning the same way cannot produce yaw torque independently.
    arm = 0.2 / math.sqrt(2)
    positions = [(arm, -arm, 0), (-arm, arm, 0), (arm, arm, 0), (-arm, -arm, 0)]
    with pytest.raises(ParamsError, match="rank"):
        Mixer(positions, [(0, 0, 1)] * 4, [1, 1, 1, 1], [4.0] * 4, [0.05] * 4)


def mix_by_priorities(mixer, thrust_n, torque_nm):
    """The three priorities one after the other with Python's own max and min (the form ``Mixer.mix`` had before
    its one-pass loops, issue 34): what ``mix`` must give bit for bit."""
    roll, pitch, yaw = torque_nm
    u_attitude = [r * roll + p * pitch for r, p in zip(mixer._roll_column, mixer._pitch_column)]
    saturated = False
    spread = max(u_attitude) - min(u_attitude)
    if spread > 1.0:
        u_attitude, saturated = [u / spread for u in u_attitude], True
    base = [t * thrust_n + u for t, u in zip(mixer._thrust_column, u_attitude)]
    pairs = list(zip(base, mixer._thrust_direction))
    low, high = max([-b / d for b, d in pairs]), min([(1.0 - b) / d for b, d in pairs])
    shift = min(max(0.0, low), high) if low <= high else 0.5 * (low + high)
    if shift != 0.0:
        base, saturated = [b + shift * d for b, d in pairs], True
    u_yaw = [y * yaw for y in mixer._yaw_column]
    scale = 1.0
    for b, y in zip(base, u_yaw):
        if y > 1e-12:
            scale = min(scale, (1.0 - b) / y)
        elif y < -1e-12:
            scale = min(scale, -b / y)
    scale = max(0.0, scale)
    controls = tuple(min(max(b + scale * y, 0.0), 1.0) for b, y in zip(base, u_yaw))
    achieved = [0.0, 0.0, 0.0, 0.0]
    for column, u in zip(mixer._allocation_columns, controls):
        achieved = [a + c * u for a, c in zip(achieved, column)]
    return controls, tuple(achieved), saturated or scale < 1.0, scale


def test_mix_gives_the_priorities_bits():
    """Quad, hexa and a tilted-rotor hexa (a thrust direction that is not uniform), requests from hover to far
    beyond every limit and a few NaNs: the same rotor inputs, wrench, saturation and yaw scale, bit for bit."""
    rng = np.random.default_rng(34)
    quad, hexa = load_vehicle("quad_x"), load_vehicle("hexa_x")
    tilted = [np.asarray(r.normal) + rng.normal(0, 0.1, 3) for r in hexa.rotors]
    mixers = [Mixer.from_vehicle(quad, RHO), Mixer.from_vehicle(hexa, RHO),
              Mixer([r.position_m for r in hexa.rotors], tilted, [r.turning_direction for r in hexa.rotors],
                    [r.max_thrust_n(RHO) for r in hexa.rotors], [r.max_torque_nm(RHO) for r in hexa.rotors])]
    assert len(set(mixers[2]._thrust_direction)) > 1
    for mixer in mixers:
        thrusts = rng.uniform(-0.2, 1.3, 4_000) * mixer.max_thrust_n
        torques = rng.normal(0, 1, (4_000, 3)) * rng.choice([0.01, 0.3, 3.0], (4_000, 1))
        torques[:8] = [[math.nan, 0, 0], [0, math.nan, 0], [0, 0, math.nan], [math.inf, 0, 0], [0, 0, -math.inf],
                       [0, 0, 0], [1e-13, -1e-13, 1e-13], [0.1, 0.1, 1e-12]]
        for thrust, torque in zip(thrusts.tolist(), torques.tolist()):
            out = mixer.mix(thrust, torque)
            assert repr(tuple(out)) == repr(mix_by_priorities(mixer, thrust, torque)), (thrust, torque)
