"""AirSim API core without ROS: NED boundary, wire structures, and the msgpack-rpc transport's ugly cases."""

from __future__ import annotations

import asyncio
import math
import socket
import time

import msgpack
import numpy as np
import pytest

from aerial_sim.airsim import ned, wire
from aerial_sim.airsim.api import AirSimApi, ApiParams
from aerial_sim.airsim.rpc import MsgpackRpcServer, RpcError
from aerial_sim.control.geometry import quat_from_yaw, quat_to_matrix


# -- NED/FRD <-> ENU/FLU -------------------------------------------------------------------------

def test_world_vectors_swap_north_east_and_flip_up():
    assert ned.world_to_ned((1.0, 2.0, 3.0)) == (2.0, 1.0, -3.0)  # east 1, north 2, up 3
    assert ned.world_to_enu(ned.world_to_ned((1.0, 2.0, 3.0))) == (1.0, 2.0, 3.0)


def test_body_vectors_flip_y_and_z():
    assert ned.body_to_frd((1.0, 2.0, 3.0)) == (1.0, -2.0, -3.0)


@pytest.mark.parametrize("yaw_enu_deg, yaw_ned_deg", [(0, 90), (90, 0), (180, -90), (-90, 180)])
def test_a_heading_converts_between_east_counter_clockwise_and_north_clockwise(yaw_enu_deg, yaw_ned_deg):
    q = ned.orientation_to_ned(quat_from_yaw(math.radians(yaw_enu_deg)))
    roll, pitch, yaw = ned.quaternion_to_euler(q)
    assert abs(roll) < 1e-12 and abs(pitch) < 1e-12
    assert math.isclose(math.cos(yaw), math.cos(math.radians(yaw_ned_deg)), abs_tol=1e-12)
    assert math.isclose(math.sin(yaw), math.sin(math.radians(yaw_ned_deg)), abs_tol=1e-12)


def test_an_attitude_rotates_the_same_physical_vector_in_both_conventions():
    rng = np.random.default_rng(3)
    for _ in range(20):
        q = rng.normal(size=4)
        q = tuple(q / np.linalg.norm(q))
        body_flu = rng.normal(size=3)
        world_enu = quat_to_matrix(q) @ body_flu
        q_ned = ned.orientation_to_ned(q)
        world_ned = quat_to_matrix(q_ned) @ np.asarray(ned.body_to_frd(body_flu))
        assert np.allclose(world_ned, ned.world_to_ned(world_enu), atol=1e-12)
        back = ned.orientation_to_enu(q_ned)
        assert np.allclose(quat_to_matrix(back), quat_to_matrix(q), atol=1e-12)


def test_euler_angles_follow_airsims_zyx_order():
    # Nose up 10 deg (FRD pitch > 0) while facing east (yaw 90 deg): the body x axis points east and up.
    q = ned.euler_to_quaternion(0.0, math.radians(10), math.radians(90))
    forward_ned = quat_to_matrix(q) @ np.array([1.0, 0.0, 0.0])
    assert np.allclose(forward_ned, [0.0, math.cos(math.radians(10)), -math.sin(math.radians(10))], atol=1e-12)
    assert np.allclose(ned.quaternion_to_euler(q), (0.0, math.radians(10), math.radians(90)), atol=1e-12)


def test_covariance_keeps_variances_and_flips_cross_terms_with_one_flipped_axis():
    c = ned.body_covariance_to_frd([1, 2, 3, 2, 4, 5, 3, 5, 6])
    assert c == [1, -2, -3, -2, 4, 5, -3, 5, 6]


# -- wire structures -------------------------------------------------------------------------------

def test_decoders_name_the_argument_that_is_wrong():
    with pytest.raises(wire.RpcFault, match=r"pose.position.x_val must be a number"):
        wire.parse_pose({"position": {"x_val": "a"}}, "pose")
    with pytest.raises(wire.RpcFault, match="velocity must be finite"):
        wire.number(math.inf, "velocity")
    with pytest.raises(wire.RpcFault, match="yaw_mode must be a map"):
        wire.parse_yaw_mode([1, 2])
    with pytest.raises(wire.RpcFault, match="timeout_sec must be >= 0"):
        wire.duration(-1, "timeout_sec")
    assert math.isnan(wire.parse_pose({"position": {"x_val": math.nan}}, "pose")[0][0])  # NaN = keep


def test_image_requests_accept_pre_1_2_camera_numbers_and_both_defaults():
    assert wire.parse_image_request({"camera_name": 0, "image_type": 1}, "r") == ("0", 1, False, True, False)
    # cosysairsim's requests carry annotation_name: its raw images are RGB where AirSim's are BGR.
    assert wire.parse_image_request({"camera_name": "0", "image_type": 0, "annotation_name": ""}, "r").rgb


# -- transport --------------------------------------------------------------------------------------

class _Methods:
    """A dispatcher with a slow and a fast method, for the transport tests."""

    def __init__(self):
        self.calls = 0

    async def __call__(self, method, params):
        self.calls += 1
        if method == "sleep":
            await asyncio.sleep(params[0])
            return params[0]
        if method == "echo":
            return params
        if method == "image":  # an uncompressed 460 x 320 x 3 image's worth of bytes
            return bytes(460 * 320 * 3)
        if method == "boom":
            raise ZeroDivisionError("handler bug")
        raise RpcError(f"rpclib: server could not find function '{method}' with argument count {len(params)}.")


@pytest.fixture
def server():
    """A transport on a free loopback port, served by a loop in a background thread."""
    import threading

    loop = asyncio.new_event_loop()
    methods = _Methods()
    rpc = MsgpackRpcServer(methods, "127.0.0.1", 0, max_request_bytes=64 * 1024, max_pending=16,
                           write_high_water_bytes=1024 * 1024)
    loop.run_until_complete(rpc.start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield rpc
    asyncio.run_coroutine_threadsafe(rpc.close(), loop).result(5)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


class _Client:
    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.unpacker = msgpack.Unpacker(raw=False)

    def send(self, *messages):
        self.sock.sendall(b"".join(msgpack.packb(m) for m in messages))

    def replies(self, count: int) -> list:
        out = []
        while len(out) < count:
            data = self.sock.recv(65536)
            if not data:
                break
            self.unpacker.feed(data)
            out.extend(self.unpacker)
        return out


def _closed_by_server(sock) -> bool:
    """The server closed the connection: an orderly end, or a reset (it left our unread bytes behind)."""
    try:
        return sock.recv(10) == b""
    except ConnectionResetError:
        return True


def test_replies_come_back_out_of_order_as_calls_finish(server):
    client = _Client(server.port)
    client.send([0, 1, "sleep", [0.3]], [0, 2, "echo", ["fast"]])
    first, second = client.replies(2)
    assert first == [1, 2, None, ["fast"]]
    assert second == [1, 1, None, 0.3]


def test_handler_failures_and_unknown_methods_are_error_replies(server):
    client = _Client(server.port)
    client.send([0, 7, "boom", []], [0, 8, "nope", [1, 2]])
    replies = {r[1]: r for r in client.replies(2)}
    assert "ZeroDivisionError" in replies[7][2]
    assert replies[8][2] == "rpclib: server could not find function 'nope' with argument count 2."


def test_garbage_closes_only_that_connection(server):
    bad = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    bad.sendall(b"\xc1" * 16)  # 0xc1 is never valid msgpack
    assert _closed_by_server(bad)
    bad.close()
    good = _Client(server.port)
    good.send([0, 1, "echo", [1]])
    assert good.replies(1) == [[1, 1, None, [1]]]


def test_a_request_over_the_size_cap_is_refused_and_the_server_lives_on(server):
    big = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    try:
        big.sendall(msgpack.packb([0, 1, "echo", ["x" * 200_000]]))
    except OSError:
        pass  # the server may close while we are still sending
    assert _closed_by_server(big)
    good = _Client(server.port)
    good.send([0, 2, "echo", ["small"]])
    assert good.replies(1) == [[1, 2, None, ["small"]]]


def test_messages_that_are_not_requests_are_skipped(server):
    client = _Client(server.port)
    client.send(42, [9, 9, 9, 9], [2, "echo", [1]], [0, 3, 17, [1]], [0, 4, "echo", [2]])
    replies = client.replies(2)
    assert replies[0][1] == 3 and "malformed request" in replies[0][2]
    assert replies[1] == [1, 4, None, [2]]


def test_a_client_leaving_mid_call_does_not_disturb_the_server(server):
    leaver = _Client(server.port)
    leaver.send([0, 1, "sleep", [0.2]])
    leaver.sock.close()
    time.sleep(0.3)
    client = _Client(server.port)
    client.send([0, 2, "echo", [1]])
    assert client.replies(1) == [[1, 2, None, [1]]]


def test_unread_pipelined_replies_are_bounded_per_connection_and_all_arrive_later(server):
    """300 image requests sent at once, replies left unread: the server holds at most ``max_pending``
    calls and about one high-water mark of unsent replies (not 300 x 440 kB), then answers all 300."""
    reply_bytes = 460 * 320 * 3
    client = _Client(server.port)
    client.send(*[[0, index, "image", []] for index in range(300)])
    time.sleep(0.5)  # the server works as far as backpressure lets it
    assert server.peak_pending <= 16
    assert server.peak_unsent_bytes <= 1024 * 1024 + reply_bytes + 1024
    client.sock.settimeout(20)
    replies = client.replies(300)
    assert sorted(r[1] for r in replies) == list(range(300))
    assert all(r[2] is None and len(r[3]) == reply_bytes for r in replies)


def test_fifty_clients_at_once_are_all_served(server):
    clients = [_Client(server.port) for _ in range(50)]
    for index, client in enumerate(clients):
        client.send([0, index, "sleep", [0.05]], [0, 1000 + index, "echo", [index]])
    for index, client in enumerate(clients):
        replies = sorted(client.replies(2), key=lambda r: r[1])
        assert replies == [[1, index, None, 0.05], [1, 1000 + index, None, [index]]]


# -- the method table ---------------------------------------------------------------------------------

class _NoVehicleGraph:
    vehicles = {"drone1": type("Link", (), {"name": "drone1", "kinematics": None})()}
    clock = None
    paused = False


def test_argument_count_and_refusals_read_like_rpclib():
    api = AirSimApi(_NoVehicleGraph(), None, ApiParams(state_wait_s=0.0))  # no physics here: do not wait for it

    def call(method, *params):
        return asyncio.run(api.dispatch(method, list(params)))

    assert call("getServerVersion") == 4 and call("getMinRequiredClientVersion") == 1 and call("ping") is True
    with pytest.raises(RpcError) as wrong_count:
        call("armDisarm")
    assert str(wrong_count.value) == (
        "rpclib: function 'armDisarm' (called with 0 arg(s)) threw an exception. The exception contained this "
        "information: Function 'armDisarm' was called with an invalid number of arguments. Expected: 1 to 2, got: 0.")
    with pytest.raises(RpcError, match="no vehicle named 'ghost'"):
        call("getMultirotorState", "ghost")
    with pytest.raises(RpcError, match="no ground truth received yet"):
        call("getMultirotorState", "")
    with pytest.raises(RpcError, match="could not find function 'setCarControls' with argument count 2"):
        call("setCarControls", {}, "")


# -- SimClock: ticks from the executor thread, sleepers in the event loop ----------------------------

def test_sim_clock_wakes_the_loop_only_for_a_due_sleeper_and_wakes_it_at_its_sim_time():
    """The AirSim server's idle event loop is not woken per /clock tick (a tenth of a core at 250 Hz):
    :meth:`SimClock.post`, called in the executor's thread, asks for a wake only when a sleeper is due;
    the time it records is what a client reads at once; a simContinueForTime-style sleep still ends at
    its sim time, and a reset (time going back) releases every sleeper."""
    import threading

    from aerial_sim.airsim.graph import SimClock

    async def scenario():
        loop = asyncio.get_running_loop()
        clock = SimClock()
        wakes = []

        def tick(time_s):  # what AirSimApiNode.on_clock does, from another thread
            if clock.post(time_s):
                wakes.append(time_s)
                loop.call_soon_threadsafe(clock.wake)

        def ticks(times):
            thread = threading.Thread(target=lambda: [tick(t) for t in times])
            thread.start()
            thread.join()

        ticks([0.004 * k for k in range(1, 251)])  # one idle second at 250 Hz
        assert wakes == [] and clock.now_s == pytest.approx(1.0)
        sleeper = loop.create_task(clock.sleep(0.1))
        await asyncio.sleep(0)
        ticks([1.0 + 0.004 * k for k in range(1, 25)])  # 1.096 s: not yet due
        await asyncio.sleep(0.01)
        assert not sleeper.done() and wakes == []
        ticks([1.1])
        await asyncio.wait_for(sleeper, 1.0)
        assert wakes == [1.1] and clock.now_s == pytest.approx(1.1)
        stranded = loop.create_task(clock.sleep(5.0))
        await asyncio.sleep(0)
        ticks([0.004])  # the physics node reset: nobody waits for the old future
        await asyncio.wait_for(stranded, 1.0)
        assert clock.now_s == pytest.approx(0.004)
        fresh = loop.create_task(clock.sleep(0.008))  # a sleep after the reset counts from the new time
        await asyncio.sleep(0)
        ticks([0.008])
        await asyncio.sleep(0.01)
        assert not fresh.done()
        ticks([0.012])
        await asyncio.wait_for(fresh, 1.0)

    asyncio.run(scenario())


def test_a_teleport_while_paused_waits_for_the_resent_state_not_the_one_sent_before_it():
    """Paused, time does not move: the state sent before the teleport and the one re-sent after it carry
    the same stamp; simSetVehiclePose must answer only once the second arrives (ci6: read back the old pose)."""
    from aerial_sim.airsim.api_simulation import shows_teleport
    from aerial_sim.airsim.graph import KinematicsReading

    def state(time_s, position, orientation=(1.0, 0.0, 0.0, 0.0)):
        return KinematicsReading(time_s, position, orientation, (0.0, 0.0, 0.0), (0.0, 0.0, 0.0))

    target, level = (3.0, -1.0, 6.0), (1.0, 0.0, 0.0, 0.0)
    assert not shows_teleport(state(2.0, (2.0, 1.0, 5.0)), 2.0, target, level)  # sent before it, same stamp
    assert shows_teleport(state(2.0, target), 2.0, target, level)  # re-sent after it
    assert shows_teleport(state(2.0, target, (-1.0, 0.0, 0.0, 0.0)), 2.0, target, level)  # -q: the same rotation
    assert not shows_teleport(state(2.0, target, (0.0, 0.0, 0.0, 1.0)), 2.0, target, level)  # only moved
    assert shows_teleport(state(2.004, (3.0, -1.0, 5.9999)), 2.0, target, level)  # stepped on from it: falling
    assert not shows_teleport(state(1.996, target), 2.0, target, level)  # older than the teleport
