"""The four sensor nodes across processes: started by sensors.launch.yaml, fed ground truth and
/clock from the test process at 250 Hz of sim time, they publish every topic at its rate with
exact sim-time stamps; in lockstep the same seed gives the same samples; bad parameters stop a
node at start-up with one clear line."""

import math
import subprocess
import sys
import time

import pytest

from conftest import requires_ros, spin_until

pytestmark = [requires_ros, pytest.mark.ros]

TRUTH_RATE_HZ = 250.0
#: The one timeout of every spin_once here. rclpy's executor keeps the ready callbacks of one wait and hands
#: them out over the following spin_once calls only while their arguments stay equal; given the time left
#: (a new float each call) it waited afresh at each call and ran the first ready subscription, imu/data (200
#: Hz), again and again: a test process short of CPU took nothing else (ci24 at load ~15: 1,429 IMU messages,
#: 1 barometer, 0 GPS in 40 s; throttling this process to a quarter of a core did the same).
SPIN_S = 0.001


class TruthFeeder:
    """Publishes /clock and <ns>/ground_truth/{odom,imu} for a vehicle flying east at 1 m/s."""

    def __init__(self, node, namespaces, lockstep):
        from nav_msgs.msg import Odometry
        from rosgraph_msgs.msg import Clock
        from sensor_msgs.msg import Imu

        from aerial_sim.nodes.ros.qos import stream_qos

        qos = stream_qos(lockstep)
        self.node = node
        self.clock = node.create_publisher(Clock, "/clock", qos)
        self.odom = [node.create_publisher(Odometry, f"/{ns}/ground_truth/odom", qos) for ns in namespaces]
        self.imu = [node.create_publisher(Imu, f"/{ns}/ground_truth/imu", qos) for ns in namespaces]
        self.k = 0
        self._types = (Clock, Odometry, Imu)

    def publish_next(self):
        from aerial_sim.nodes.ros.stamps import to_stamp

        Clock, Odometry, Imu = self._types
        t = self.k / TRUTH_RATE_HZ
        stamp = to_stamp(t)
        self.clock.publish(Clock(clock=stamp))
        odom = Odometry()
        odom.header.stamp, odom.header.frame_id = stamp, "map"
        odom.pose.pose.position.x, odom.pose.pose.position.z = 1.0 * t, 5.0
        odom.pose.pose.orientation.w = 1.0
        odom.twist.twist.linear.x = 1.0
        imu = Imu()
        imu.header.stamp = stamp
        imu.orientation.w = 1.0
        imu.linear_acceleration.z = 9.80665
        imu.angular_velocity.z = 0.1 * math.sin(t)
        for pub in self.odom:
            pub.publish(odom)
        for pub in self.imu:
            pub.publish(imu)
        self.k += 1

    def run(self, executor, periods, pace_s=1.0 / TRUTH_RATE_HZ):
        next_time = time.monotonic()
        for _ in range(periods):
            self.publish_next()
            next_time += pace_s
            while next_time - time.monotonic() > 0:
                executor.spin_once(timeout_sec=SPIN_S)

    def run_lockstep(self, executor, periods, caught_up, behind_s=0.1, stall_s=15.0, pace_s=1.0 / TRUTH_RATE_HZ):
        """``periods`` more periods with a lockstep clock: the next one goes out (at most at ``pace_s``)
        only once ``caught_up(clock_s)`` says every output due at ``behind_s`` of sim time before the
        clock last published has arrived (0.1 s: 25 truth messages, 20 IMU samples in flight, an eighth of
        the streams' 200-message histories, which drop the oldest unread sample when full; waiting for
        each step's outputs, as the physics node does, took 14.8 s instead of 4.3 s at a load of 3). A node (or this
        process) held up on a busy machine then holds the clock instead of falling behind until samples
        are lost. Returns None, or what stalled: the clock and ``stall_s`` of wall time without progress."""
        next_time = time.monotonic()
        for _ in range(periods):
            if (clock_s := (self.k - 1) / TRUTH_RATE_HZ - behind_s) >= 0.0:
                deadline = time.monotonic() + stall_s
                while not caught_up(clock_s):
                    if time.monotonic() > deadline:
                        return f"outputs due at t = {clock_s:.3f} s missing after {stall_s:g} s"
                    executor.spin_once(timeout_sec=SPIN_S)
            self.publish_next()
            next_time = max(next_time + pace_s, time.monotonic())
            while next_time - time.monotonic() > 0:
                executor.spin_once(timeout_sec=SPIN_S)
        return None


def collect(node, topics, lockstep):
    """Subscribe to each (topic, type); returns ({topic: [(stamp_s, msg), ...]}, subscriptions).

    Messages are taken raw and decoded on access, and the best-effort reader keeps a deep
    history, so this one Python process keeps up with every stream on a busy machine.
    """
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rclpy.serialization import deserialize_message

    from aerial_sim.nodes.ros.qos import stream_qos
    from aerial_sim.nodes.ros.stamps import from_stamp

    qos = stream_qos(True) if lockstep else QoSProfile(depth=200, reliability=ReliabilityPolicy.BEST_EFFORT)
    raw = {topic: [] for topic, _ in topics}
    subscriptions = [node.create_subscription(msg_type, topic, raw[topic].append, qos, raw=True) for topic, msg_type in topics]

    class Received:
        def __getitem__(self, topic):
            msgs = [deserialize_message(data, types[topic]) for data in raw[topic]]
            return [(from_stamp(m.header.stamp), m) for m in msgs]

        def latest_stamp(self, topic):
            return from_stamp(deserialize_message(raw[topic][-1], types[topic]).header.stamp) if raw[topic] else -1.0

        def counts(self):
            return {topic: len(v) for topic, v in raw.items()}

    types = dict(topics)
    return Received(), subscriptions


def make_executor(node):
    import rclpy

    executor = rclpy.executors.SingleThreadedExecutor(context=node.context)
    executor.add_node(node)
    return executor


def test_every_sensor_topic_arrives_at_its_rate_with_sim_time_stamps(ros_node, launch):
    from geometry_msgs.msg import TwistStamped
    from sensor_msgs.msg import FluidPressure, Imu, MagneticField, NavSatFix

    from aerial_sim.physics.lockstep import Participant

    graph = launch("sensors.launch.yaml", "namespace:=drone1", "seed:=1")
    rates = {"imu/data": 200.0, "air_pressure": 50.0, "magnetic_field": 75.0, "gps/fix": 50.0, "gps/vel": 50.0}
    types = {"imu/data": Imu, "air_pressure": FluidPressure, "magnetic_field": MagneticField, "gps/fix": NavSatFix,
             "gps/vel": TwistStamped}
    received, _ = collect(ros_node, [(f"/drone1/{name}", types[name]) for name in rates], lockstep=False)
    feeder = TruthFeeder(ros_node, ["drone1"], lockstep=False)
    executor = make_executor(ros_node)
    deadline = time.monotonic() + 40.0
    while not all(received.counts().values()) and time.monotonic() < deadline:  # until every node is up
        feeder.run(executor, 25)
        assert graph.alive(), graph.output()
    assert all(received.counts().values()), received.counts()
    # The rates are of sim time: it runs at most at half the wall clock's pace here, so on a loaded machine
    # this one process both feeding and reading every stream (best effort) keeps up (at full pace, 425
    # messages a second, it lost more than the 5 % the counts allow: ci11 at load 15-28). And the truth goes
    # out no more than 0.1 s of sim time ahead of any stream's outputs: a sensor node descheduled at a fixed
    # pace fell seconds behind, then published its backlog (the resampler fills the gap) in one burst that
    # the best-effort transport dropped (ci7, load 9: 149 of 800 IMU samples arrived).
    half_pace_s = 2.0 / TRUTH_RATE_HZ
    awaited = [(f"/drone1/{name}", Participant(f"/drone1/{name}", rate, 0.2 if name.startswith("gps") else 0.0))
               for name, rate in rates.items()]
    caught_up = lambda clock_s: all(  # noqa: E731
        (due := p.awaited_stamp_ns(round(clock_s * 1e9))) is None or received.latest_stamp(topic) >= due * 1e-9 - 1e-9
        for topic, p in awaited)
    start = feeder.k / TRUTH_RATE_HZ + 0.5
    stalled = feeder.run_lockstep(executor, int(5.0 * TRUTH_RATE_HZ), caught_up, pace_s=half_pace_s)  # 5 s sim
    assert stalled is None, (stalled, received.counts(), graph.output())
    end = feeder.k / TRUTH_RATE_HZ - 0.5
    deadline = time.monotonic() + 20.0  # on a loaded machine a node may lag: feed on until all caught up
    while min(received.latest_stamp(f"/drone1/{name}") for name in rates) < end and time.monotonic() < deadline:
        feeder.run(executor, 25, pace_s=half_pace_s)
    for name, rate in rates.items():
        stamps = sorted(s for s, _ in received[f"/drone1/{name}"] if start <= s < end)
        assert len(stamps) == pytest.approx(rate * (end - start), rel=0.05), name
        assert all(abs(s * rate - round(s * rate)) < 1e-6 for s in stamps), f"{name}: stamps off the 1/{rate:g} s grid"
    fix = received["/drone1/gps/fix"][-1][1]
    assert fix.header.frame_id == "drone1/gps_link" and fix.position_covariance[0] > 0
    imu = received["/drone1/imu/data"][-1][1]
    assert imu.header.frame_id == "drone1/imu_link" and imu.orientation_covariance[0] == -1.0
    assert imu.linear_acceleration.z == pytest.approx(9.80665, abs=0.3)


def test_lockstep_with_the_same_seed_gives_the_same_samples(ros_node, launch):
    from sensor_msgs.msg import Imu, NavSatFix

    from aerial_sim.physics.lockstep import Participant

    graphs = [launch("sensors.launch.yaml", f"namespace:={ns}", "lockstep:=true", "seed:=7",
                     "use_barometer:=false", "use_magnetometer:=false") for ns in ("a", "b")]
    topics = [(f"/{ns}/{name}", t) for ns in ("a", "b") for name, t in (("imu/data", Imu), ("gps/fix", NavSatFix))]
    received, subscriptions = collect(ros_node, topics, lockstep=True)
    feeder = TruthFeeder(ros_node, ["a", "b"], lockstep=True)
    connected = lambda: all(p.get_subscription_count() > 0 for p in feeder.odom + feeder.imu) and all(  # noqa: E731
        s.get_publisher_count() > 0 for s in subscriptions)
    assert spin_until(ros_node, connected, 40.0), [g.output() for g in graphs]
    spin_until(ros_node, lambda: False, 1.0)  # let the reliable writers and readers finish matching
    executor = make_executor(ros_node)
    # The clock waits, as the lockstep physics node's does, for the outputs due (the rule it applies to
    # the nodes' announcements: 200 Hz; 50 Hz from the 0.2 s latency on), 0.1 s behind. Fed at a fixed
    # wall pace instead, a sensor process descheduled on a busy machine fell behind by more than the reliable
    # streams' 200-message histories and /b/imu/data came out short of 400 (ci at load 10-18; a 1.5 s
    # SIGSTOP of b's sensor process did the same, 329 samples).
    awaited = [(f"/{ns}/{name}", Participant(f"/{ns}/{name}", rate, first)) for ns in "ab"
               for name, rate, first in (("imu/data", 200.0, 0.0), ("gps/fix", 50.0, 0.2))]
    caught_up = lambda clock_s: all(  # noqa: E731
        (due := p.awaited_stamp_ns(round(clock_s * 1e9))) is None or received.latest_stamp(topic) >= due * 1e-9 - 1e-9
        for topic, p in awaited)
    stalled = feeder.run_lockstep(executor, 500, caught_up)  # 2 s of sim time, at most in real time
    assert stalled is None, (stalled, received.counts(), [g.output() for g in graphs])
    expected = {"imu/data": 400, "gps/fix": 100 - 10}  # 200 Hz; 50 Hz less the 0.2 s latency
    done = lambda: all(received.counts()[f"/{ns}/{n}"] >= c for n, c in expected.items() for ns in "ab")  # noqa: E731
    assert spin_until(ros_node, done, 15.0), received.counts()
    for name, count in expected.items():
        a, b = received[f"/a/{name}"], received[f"/b/{name}"]
        assert len(a) == len(b) >= count
        fields = (lambda m: (m.angular_velocity.x, m.linear_acceleration.z)) if name == "imu/data" else (
            lambda m: (m.latitude, m.longitude, m.altitude))
        assert [(s, fields(m)) for s, m in a] == [(s, fields(m)) for s, m in b]


def test_bad_parameter_stops_a_node_at_start_up_naming_it():
    result = subprocess.run(
        [sys.executable, "-m", "aerial_sim.nodes.barometer", "--ros-args", "-p", "noise_std_pa:=-1.0"],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2
    assert "noise_std_pa" in result.stderr and "invalid parameter" in result.stderr


def parameter_values(node, target: str, names: list[str]):
    """``names`` of node ``target`` over its parameter service (as ``ros2 param get`` asks)."""
    from rcl_interfaces.srv import GetParameters
    from rclpy.parameter import parameter_value_to_python

    client = node.create_client(GetParameters, f"{target}/get_parameters")
    assert client.wait_for_service(timeout_sec=30.0), f"{target} has no parameter service"
    # A request sent just as the service appears can lose its answer: the server's response writer may not
    # have matched this client's reader yet (ci26, at load 4: no answer in 15 s). Ask again, as a user would.
    for _ in range(3):
        future = client.call_async(GetParameters.Request(names=names))
        if spin_until(node, future.done, 8.0):
            return [parameter_value_to_python(v) for v in future.result().values]
        client.remove_pending_request(future)
    raise AssertionError(f"{target} did not answer three requests")


def test_shared_sensor_process_gives_each_node_its_own_parameters(ros_node, tmp_path):
    """The ``sensors`` process: ``imu.rate_hz`` reaches the IMU alone, a batch's ``/**/<node>`` file
    reaches its node, ``gps.enabled:=false`` leaves the GPS out, a misspelt name is said once."""
    from aerial_sim.batch.nodeparams import write_params_file

    batch_file = write_params_file({"barometer": {"rate_hz": 25.0}}, tmp_path / "batch.yaml")
    process = subprocess.Popen(
        [sys.executable, "-m", "aerial_sim.nodes.sensors", "--ros-args", "-r", "__node:=sensors", "-r",
         "__ns:=/shared", "-p", "imu.rate_hz:=100.0", "-p", "gps.enabled:=false", "-p", "imu.rat_hz:=1.0",
         "--params-file", str(batch_file)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert parameter_values(ros_node, "/shared/imu", ["rate_hz", "preset"]) == [100.0, "mpu6000"]
        assert parameter_values(ros_node, "/shared/barometer", ["rate_hz"]) == [25.0]
        assert parameter_values(ros_node, "/shared/magnetometer", ["rate_hz"]) == [75.0]  # hmc5883l's
        # Node names come by their own discovery message, which may follow the parameter services (ci40).
        names = lambda: {(ns, n) for n, ns in ros_node.get_node_names_and_namespaces()}  # noqa: E731
        assert spin_until(ros_node, lambda: {("/shared", "imu"), ("/shared", "magnetometer")} <= names(), 10.0), names()
        assert ("/shared", "gps") not in names(), names()
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=30)
    assert process.returncode == 0, output
    assert output.count("imu.rat_hz: not a parameter of imu; ignored") == 1, output
    assert "one process for imu, barometer, magnetometer" in output, output


@pytest.mark.parametrize("parameters, line", [
    (["imu.rate_hz:=-5.0"], "[FATAL] [imu]: invalid parameter: rate_hz"),
    (["gps.enabled:=3"], "[FATAL] [sensors]: invalid parameter: gps.enabled must be true or false, got 3"),
    (["vehicles:=4", "shard:=[2, 2]"], "[FATAL] [imu]: invalid parameter: shard must be [index, count] with 0 <= index"),
    (["vehicles:=4", "swarm_link:=3"], "[FATAL] [imu]: invalid parameter: swarm_link must be true or false, got 3"),
    (["namespaces:=[a, b]", "swarm_link:=true"],
     "[FATAL] [imu]: invalid parameter: swarm_link needs fleet or vehicles (the physics node's vehicle order)"),
])
def test_bad_parameter_stops_the_shared_process_naming_the_node(parameters, line):
    arguments = [word for parameter in parameters for word in ("-p", parameter)]
    result = subprocess.run([sys.executable, "-m", "aerial_sim.nodes.sensors", "--ros-args", *arguments],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert line in result.stderr and result.stderr.count("[FATAL]") == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr


def thread_niceness(pid: int) -> list[int]:
    """The niceness of every thread of process ``pid`` (field 19 of /proc/<pid>/task/<tid>/stat)."""
    from pathlib import Path

    values = []
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            values.append(int(stat.read_text().rpartition(")")[2].split()[16]))
        except (OSError, IndexError, ValueError):
            pass  # a thread that just ended
    return values


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("lockstep, environment, expected", [
    ("true", {}, 10),  # off the control loop's critical path: the controller's answer goes first
    ("true", {"AERIAL_SIM_BACKGROUND_NICE": "0"}, 0),  # turned off
    ("true", {"AERIAL_SIM_BACKGROUND_NICE": "high"}, 0),  # refused in one line, priority kept
    ("false", {}, 0),  # real time: every stream has its own wall-clock deadline
])
def test_sensor_process_yields_the_cpu_in_lockstep_only(ros_node, lockstep, environment, expected):
    import os

    process = subprocess.Popen(
        [sys.executable, "-m", "aerial_sim.nodes.sensors", "--ros-args", "-r", "__ns:=/nice", "-p", f"lockstep:={lockstep}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, **environment})
    try:
        # The priority is lowered (or the setting refused, in one line) after every node is built and before
        # the process spins: a node that answers a parameter request is past it, so the niceness read is the
        # one it runs at. (Half a second after its 'one process for' line, read with readline, a descheduled
        # process might not have got there; and a late reader's readline had taken the refusal line into
        # its buffer with that one, where communicate(), reading the pipe itself, never saw it: ci24's
        # missing 'high' line, reproduced by reading 4 s late.)
        assert parameter_values(ros_node, "/nice/imu", ["lockstep"]) == [lockstep == "true"]
        niceness = thread_niceness(process.pid)
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=30)
    assert niceness and set(niceness) == {expected}, (niceness, output)
    if environment.get("AERIAL_SIM_BACKGROUND_NICE") == "high":
        assert output.count("'high' is not a niceness in 0..19") == 1, output
