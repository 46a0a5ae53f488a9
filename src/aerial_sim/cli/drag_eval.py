"""``aerial_sim drag-eval``: the follow-on paper's drag-model evaluation on a recorded flight.

Seed 004, sec. 3.2.2, eqs. (14)-(16): from the rotor thrusts, predict the
acceleration ``a_cal = (R sum T_i + F_a) / m`` with the drag force ``F_a`` of
either AirSim's model (eq. 5; :func:`aerial_sim.physics.rotor_drag.airsim_linear_drag_body`)
or the rotor drag model (eq. 13; :mod:`aerial_sim.physics.rotor_drag`), and
report the RMSE of ``|a_measured - a_cal|`` over the flight. The comparison is
made in the body frame on the specific force (what the IMU measures), which is
eq. (15) with gravity removed from both sides, so no attitude error enters it.

    aerial_sim drag-eval BAG [--vehicle quad_x] [--namespace drone1] [--fit]
    aerial_sim drag-eval --simulate 10 OUT_BAG     # fly the paper's 80 m line and record it

A bag needs, for one vehicle: an IMU (``ground_truth/imu`` or ``imu/data``),
``rotors`` (JointState, effort = thrust) and ``ground_truth/odom``. Bags are
read with ``rosbags`` (rosbag2, MCAP or sqlite3).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from aerial_sim.config import ParamsError, params_from_mapping, unwrap_ros_parameters
from aerial_sim.paths import config_path
from aerial_sim.physics.rotor_drag import RotorDragModel, RotorDragParams, airsim_linear_drag_body, rotate_world_to_body

IMU_SUFFIXES = ("/ground_truth/imu", "/imu/data")
ROTORS_SUFFIX = "/rotors"
ODOM_SUFFIX = "/ground_truth/odom"


class DragEvalError(ValueError):
    """The bag lacks what the evaluation needs."""


@dataclass(frozen=True)
class FlightLog:
    """Time-aligned samples of one flight (N samples, K rotors), body frame FLU, SI units."""

    time_s: np.ndarray  # (N,)
    specific_force_body: np.ndarray  # (N, 3) measured (IMU)
    thrusts_n: np.ndarray  # (N, K)
    velocity_body: np.ndarray  # (N, 3)
    angular_velocity_body: np.ndarray  # (N, 3)
    orientation: np.ndarray  # (N, 4) w, x, y, z body->world

    def __len__(self) -> int:
        return len(self.time_s)


@dataclass(frozen=True)
class DragEvalResult:
    samples: int
    max_speed_m_s: float
    rmse_no_drag: float
    rmse_airsim: float
    rmse_rotor: float

    def report(self) -> str:
        return (
            f"{self.samples} samples, top speed {self.max_speed_m_s:.2f} m/s\n"
            f"RMSE of predicted acceleration (eq. 16), m/s^2:\n"
            f"  AirSim drag model (eq. 5):  {self.rmse_airsim:.3f}\n"
            f"  rotor drag model (eq. 13):  {self.rmse_rotor:.3f}\n"
            f"  no drag at all:             {self.rmse_no_drag:.3f}"
        )


def evaluate(log: FlightLog, vehicle, drag: RotorDragParams, air_density_kg_m3: float = 1.225,
             wind_enu_m_s=(0.0, 0.0, 0.0)) -> DragEvalResult:
    """Eqs. (14)-(16) for both drag models on ``log`` of ``vehicle`` (a MultirotorParams)."""
    if len(log) == 0:
        raise DragEvalError("no samples to evaluate")
    mass = vehicle.mass_kg
    normals = np.array([r.normal for r in vehicle.rotors], dtype=float)  # (K, 3)
    if log.thrusts_n.shape[1] != len(normals):
        raise DragEvalError(f"the bag has {log.thrusts_n.shape[1]} rotor thrusts, vehicle '{vehicle.name}' has {len(normals)} rotors")
    model = RotorDragModel(drag, tuple(r.position_m for r in vehicle.rotors))
    areas = vehicle.cross_section
    a_input = log.thrusts_n @ normals / mass  # eq. (14), body frame
    rotor = np.empty_like(a_input)
    airsim = np.empty_like(a_input)
    for i in range(len(log)):
        v_air = tuple(log.velocity_body[i])
        if any(wind_enu_m_s):
            wind_body = rotate_world_to_body(tuple(log.orientation[i]), tuple(wind_enu_m_s))
            v_air = tuple(v - w for v, w in zip(v_air, wind_body))
        force, _ = model.wrench(tuple(log.thrusts_n[i]), v_air, tuple(log.angular_velocity_body[i]))
        rotor[i] = force
        airsim[i] = airsim_linear_drag_body(v_air, air_density_kg_m3, vehicle.linear_drag_coefficient, areas)

    def rmse(predicted: np.ndarray) -> float:  # eq. (16) per sample, RMS over the flight
        return float(np.sqrt(np.mean(np.sum((log.specific_force_body - predicted) ** 2, axis=1))))

    return DragEvalResult(
        samples=len(log),
        max_speed_m_s=float(np.max(np.linalg.norm(log.velocity_body, axis=1))),
        rmse_no_drag=rmse(a_input),
        rmse_airsim=rmse(a_input + airsim / mass),
        rmse_rotor=rmse(a_input + rotor / mass),
    )


def fit_c_d1(log: FlightLog, vehicle, drag: RotorDragParams) -> float:
    """Least-squares c_d1 of eq. (13) from the horizontal specific force (k and b held fixed).

    ``m f_xy = -(k T + b) c_d1 v_xy`` in the body frame, so
    ``c_d1 = -sum(m f_xy . g v_xy) / sum(|g v_xy|^2)`` with ``g = k T + b``.
    """
    gain = drag.k * log.thrusts_n.sum(axis=1) + drag.b
    regressor = gain[:, None] * log.velocity_body[:, :2]
    denominator = float(np.sum(regressor**2))
    if denominator <= 0.0:
        raise DragEvalError("the vehicle never moved horizontally: c_d1 cannot be identified")
    return float(-np.sum(vehicle.mass_kg * log.specific_force_body[:, :2] * regressor) / denominator)


# -- reading a bag --------------------------------------------------------------------------


def _pick_topic(topics: dict[str, str], suffixes: tuple[str, ...], namespace: str | None, what: str) -> str:
    for suffix in suffixes:
        matches = sorted(t for t in topics if t.endswith(suffix) and (namespace is None or t == f"/{namespace}{suffix}"))
        if len(matches) > 1:
            raise DragEvalError(f"several {what} topics ({', '.join(matches)}): choose one with --namespace")
        if matches:
            return matches[0]
    raise DragEvalError(f"no {what} topic (*{' or *'.join(suffixes)}) in the bag (topics: {', '.join(sorted(topics))})")


def read_flight(bag_path: str | Path, namespace: str | None = None) -> FlightLog:
    """Samples at each IMU stamp, with the latest rotor thrusts and odometry at or before it."""
    from rosbags.highlevel import AnyReader

    path = Path(bag_path)
    if not path.exists():
        raise DragEvalError(f"{path}: no such bag")
    try:
        from aerial_sim.recording.reader import find_bag, open_bag

        reader = open_bag(find_bag(path))
    except ImportError:
        reader = AnyReader([path])
    imu, rotors, odom = [], [], []
    with reader:
        topics = {c.topic: c.msgtype for c in reader.connections}
        names = {
            "imu": _pick_topic(topics, IMU_SUFFIXES, namespace, "IMU"),
            "rotors": _pick_topic(topics, (ROTORS_SUFFIX,), namespace, "rotors"),
            "odom": _pick_topic(topics, (ODOM_SUFFIX,), namespace, "odometry"),
        }
        connections = [c for c in reader.connections if c.topic in names.values()]
        for connection, _, raw in reader.messages(connections=connections):
            message = reader.deserialize(raw, connection.msgtype)
            stamp = message.header.stamp.sec + message.header.stamp.nanosec * 1e-9
            if connection.topic == names["imu"]:
                a = message.linear_acceleration
                imu.append((stamp, a.x, a.y, a.z))
            elif connection.topic == names["rotors"]:
                rotors.append((stamp, *message.effort))
            else:
                t, p = message.twist.twist, message.pose.pose
                odom.append((stamp, t.linear.x, t.linear.y, t.linear.z, t.angular.x, t.angular.y, t.angular.z,
                             p.orientation.w, p.orientation.x, p.orientation.y, p.orientation.z))
    if not imu or not rotors or not odom:
        raise DragEvalError(f"the bag has {len(imu)} IMU, {len(rotors)} rotors and {len(odom)} odometry messages; need all three")
    imu_a, rotors_a, odom_a = (np.array(sorted(rows), dtype=float) for rows in (imu, rotors, odom))
    # Latest rotors/odometry at or before each IMU stamp (1 us tolerance for stamp rounding).
    keep = imu_a[:, 0] >= max(rotors_a[0, 0], odom_a[0, 0]) - 1e-6
    imu_a = imu_a[keep]
    rotor_index = np.searchsorted(rotors_a[:, 0], imu_a[:, 0] + 1e-6, side="right") - 1
    odom_index = np.searchsorted(odom_a[:, 0], imu_a[:, 0] + 1e-6, side="right") - 1
    rotor_rows, odom_rows = rotors_a[rotor_index], odom_a[odom_index]
    return FlightLog(
        time_s=imu_a[:, 0],
        specific_force_body=imu_a[:, 1:4],
        thrusts_n=rotor_rows[:, 1:],
        velocity_body=odom_rows[:, 1:4],
        angular_velocity_body=odom_rows[:, 4:7],
        orientation=odom_rows[:, 7:11],
    )


# -- simulating the paper's flight -----------------------------------------------------------


def simulate_line_flight(speed_m_s: float, distance_m: float = 80.0, altitude_m: float = 15.0,
                         vehicle_name: str = "quad_x", drag: RotorDragParams | None = None,
                         control_rate_hz: float = 250.0, acceleration_m_s2: float = 2.5, settle_s: float = 2.0,
                         spin_up_s: float = 1.0, truth: str = "rotor") -> tuple[FlightLog, object]:
    """Fly ``distance_m`` east, cruising at ``speed_m_s`` (trapezoidal profile), with rotor drag as the truth.

    The pure :class:`~aerial_sim.physics.world.PhysicsWorld` flies the vehicle
    and the project's cascaded controller tracks the profile. With ``truth =
    "rotor"`` the engine's AirSim drag is off and every control period the rotor
    drag model's wrench is computed from the current state and applied, as the
    rotor_drag node does; with ``truth = "airsim"`` the engine's own AirSim drag
    acts alone. Returns the log sampled once per control period, and the vehicle.
    """
    if truth not in ("rotor", "airsim"):
        raise ValueError(f"truth must be 'rotor' or 'airsim', got {truth!r}")
    from aerial_sim.control.controller import CascadedController, ControllerParams, Setpoint, VehicleState
    from aerial_sim.physics.world import PhysicsParams, PhysicsWorld
    from aerial_sim.vehicles.multirotor import load_vehicle

    # The vehicle starts in the air with its rotors still: ``spin_up_s`` of hover
    # (not logged) lets the motors reach hover speed before the profile starts.

    vehicle = load_vehicle(vehicle_name)
    drag = drag or RotorDragParams()
    model = RotorDragModel(drag, tuple(r.position_m for r in vehicle.rotors))
    world = PhysicsWorld(PhysicsParams(linear_drag_enabled=truth == "airsim", drag_law="projected"))  # airsim_linear_drag_body
    world.add_vehicle("uav", vehicle, position=(0.0, 0.0, altitude_m))
    controller = CascadedController(
        ControllerParams(max_horizontal_speed_m_s=max(8.0, 1.5 * speed_m_s), max_tilt_rad=0.8), vehicle
    )
    steps = max(1, round(world.params.rate_hz / control_rate_hz))
    dt = steps / world.params.rate_hz
    # Accelerate, cruise, brake within distance_m (a harder ramp when the line is too short for it).
    acceleration_m_s2 = max(acceleration_m_s2, speed_m_s**2 / distance_m)
    ramp_s = speed_m_s / acceleration_m_s2
    cruise_s = distance_m / speed_m_s - ramp_s
    total_s = spin_up_s + 2 * ramp_s + cruise_s + settle_s
    rows = []
    rotor_truth = truth == "rotor"
    for _ in range(int(round(total_s / dt))):
        state = world.ground_truth("uav")
        thrusts = tuple(r.thrust_n for r in world.rotor_states("uav"))
        velocity_body = rotate_world_to_body(state.orientation, state.velocity_world)
        if state.time_s >= spin_up_s:
            rows.append((state.time_s - spin_up_s, *state.specific_force_body, *velocity_body,
                         *state.angular_velocity_body, *state.orientation, *thrusts))
        if rotor_truth:
            force, torque = model.wrench(thrusts, velocity_body, state.angular_velocity_body)
            world.set_external_wrench("uav", force, torque)
        x, v, a = _trapezoid(max(0.0, state.time_s - spin_up_s), speed_m_s, acceleration_m_s2, ramp_s, cruise_s)
        setpoint = Setpoint(position=(x, 0.0, altitude_m), velocity=(v, 0.0, 0.0), acceleration=(a, 0.0, 0.0))
        world.set_controls("uav", controller.update(VehicleState.from_ground_truth(state), setpoint, dt).controls)
        world.step(steps)
    data = np.array(rows)
    log = FlightLog(time_s=data[:, 0], specific_force_body=data[:, 1:4], velocity_body=data[:, 4:7],
                    angular_velocity_body=data[:, 7:10], orientation=data[:, 10:14], thrusts_n=data[:, 14:])
    return log, vehicle


def _trapezoid(t: float, speed: float, accel: float, ramp_s: float, cruise_s: float) -> tuple[float, float, float]:
    """Position, velocity and acceleration of an accelerate-cruise-brake profile at time ``t``."""
    if t < ramp_s:
        return 0.5 * accel * t * t, accel * t, accel
    x_ramp = 0.5 * accel * ramp_s * ramp_s
    if t < ramp_s + cruise_s:
        return x_ramp + speed * (t - ramp_s), speed, 0.0
    tb = min(t - ramp_s - cruise_s, ramp_s)
    x = x_ramp + speed * cruise_s + speed * tb - 0.5 * accel * tb * tb
    return x, speed - accel * tb, (-accel if tb < ramp_s else 0.0)


def write_flight_bag(log: FlightLog, path: str | Path, namespace: str = "drone1") -> Path:
    """Record ``log`` as a rosbag2 MCAP bag with ground_truth/imu, rotors and ground_truth/odom."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_HUMBLE)
    Imu, JointState, Odometry = (store.types[n] for n in ("sensor_msgs/msg/Imu", "sensor_msgs/msg/JointState", "nav_msgs/msg/Odometry"))
    Header, Time = store.types["std_msgs/msg/Header"], store.types["builtin_interfaces/msg/Time"]
    Vector3, Quaternion = store.types["geometry_msgs/msg/Vector3"], store.types["geometry_msgs/msg/Quaternion"]
    Point, Pose = store.types["geometry_msgs/msg/Point"], store.types["geometry_msgs/msg/Pose"]
    Twist = store.types["geometry_msgs/msg/Twist"]
    PoseCov, TwistCov = store.types["geometry_msgs/msg/PoseWithCovariance"], store.types["geometry_msgs/msg/TwistWithCovariance"]
    zeros9, zeros36 = np.zeros(9), np.zeros(36)
    path = Path(path)
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        topics = {
            "imu": writer.add_connection(f"/{namespace}/ground_truth/imu", Imu.__msgtype__, typestore=store),
            "rotors": writer.add_connection(f"/{namespace}/rotors", JointState.__msgtype__, typestore=store),
            "odom": writer.add_connection(f"/{namespace}/ground_truth/odom", Odometry.__msgtype__, typestore=store),
        }
        names = [f"rotor_{i}" for i in range(log.thrusts_n.shape[1])]
        for i in range(len(log)):
            ns = int(round(log.time_s[i] * 1e9))
            stamp = Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)
            body = Header(stamp=stamp, frame_id=f"{namespace}/base_link")
            w, x, y, z = (float(q) for q in log.orientation[i])
            quaternion = Quaternion(x=x, y=y, z=z, w=w)
            imu = Imu(header=body, orientation=quaternion, orientation_covariance=zeros9,
                      angular_velocity=Vector3(*map(float, log.angular_velocity_body[i])), angular_velocity_covariance=zeros9,
                      linear_acceleration=Vector3(*map(float, log.specific_force_body[i])),
                      linear_acceleration_covariance=zeros9)
            rotors = JointState(header=Header(stamp=stamp, frame_id=""), name=names, position=np.zeros(len(names)),
                                velocity=np.zeros(len(names)), effort=np.asarray(log.thrusts_n[i], dtype=float))
            odom = Odometry(header=Header(stamp=stamp, frame_id="map"), child_frame_id=f"{namespace}/base_link",
                            pose=PoseCov(pose=Pose(position=Point(x=0.0, y=0.0, z=0.0), orientation=quaternion), covariance=zeros36),
                            twist=TwistCov(twist=Twist(linear=Vector3(*map(float, log.velocity_body[i])),
                                                       angular=Vector3(*map(float, log.angular_velocity_body[i]))),
                                           covariance=zeros36))
            for key, message in (("imu", imu), ("rotors", rotors), ("odom", odom)):
                writer.write(topics[key], ns, store.serialize_cdr(message, message.__msgtype__))
    return path


# -- command line ------------------------------------------------------------------------------


def load_drag_params(path: str | Path) -> RotorDragParams:
    """The model's coefficients from a rotor_drag node parameter file (node-only keys are skipped)."""
    path = Path(path)
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as error:
        raise ParamsError(f"{path}: cannot read rotor drag parameters: {error}") from error
    values = unwrap_ros_parameters(document)
    fields = {f.name for f in dataclasses.fields(RotorDragParams)}
    return params_from_mapping(RotorDragParams, {k: v for k, v in values.items() if k in fields}, where=path.name)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="aerial_sim drag-eval", description=__doc__.split("\n\n")[0])
    parser.add_argument("bag", help="rosbag2 directory (MCAP or sqlite3); with --simulate, where to write it")
    parser.add_argument("--vehicle", default="quad_x", help="vehicle config (mass, rotors, AirSim drag): name or path")
    parser.add_argument("--namespace", help="vehicle namespace in the bag, when it holds several")
    parser.add_argument("--config", default=None, help="rotor drag parameters (default config/rotor_drag.yaml)")
    parser.add_argument("--air-density", type=float, default=1.225, help="kg/m^3 for AirSim's drag (default 1.225)")
    parser.add_argument("--wind", type=float, nargs=3, default=(0.0, 0.0, 0.0), metavar=("E", "N", "U"), help="wind, m/s ENU")
    parser.add_argument("--fit", action="store_true", help="also identify c_d1 of eq. (13) from this flight")
    parser.add_argument("--simulate", type=float, metavar="SPEED",
                        help="fly the paper's 80 m line at SPEED m/s with rotor drag as the truth, record BAG, evaluate it")
    return parser


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        from aerial_sim.vehicles.multirotor import load_vehicle

        drag = load_drag_params(args.config or config_path("rotor_drag.yaml"))
        if args.simulate is not None:
            if not args.simulate > 0:
                raise DragEvalError("--simulate needs a positive speed")
            if Path(args.bag).exists():
                raise DragEvalError(f"{args.bag} exists; give a new bag path")
            log, _ = simulate_line_flight(args.simulate, vehicle_name=args.vehicle, drag=drag)
            write_flight_bag(log, args.bag)
            print(f"recorded a {log.time_s[-1]:.1f} s flight at {args.simulate:g} m/s to {args.bag}")
        vehicle = load_vehicle(args.vehicle)
        log = read_flight(args.bag, args.namespace)
        print(evaluate(log, vehicle, drag, args.air_density, tuple(args.wind)).report())
        if args.fit:
            print(f"identified c_d1 = {fit_c_d1(log, vehicle, drag):.4f} (kg/m)^1/2 with k = {drag.k:g}, b = {drag.b:g}")
    except (DragEvalError, ParamsError, OSError) as error:
        print(f"aerial_sim drag-eval: {error}", file=sys.stderr)
        return 2
    return 0
