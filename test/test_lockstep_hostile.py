"""Lockstep announcements cannot freeze the clock (issue 32): forged entries on /lockstep/participants
against a lockstep physics node and flight controller, in their own processes: without the launch's
key (every rule that holds for any announcer), and with it (only the launch's own nodes may announce)."""

from __future__ import annotations

import time

import pytest

from conftest import requires_ros, spin_until

pytestmark = [requires_ros, pytest.mark.ros]

TIMEOUT_S = 3.0  # lockstep_timeout_s given to the physics node


def unsigned_refusals(log: str) -> list[str]:
    """The physics node's log lines refusing an announcement not signed with the launch's key."""
    return [line for line in log.splitlines() if "is not signed with this launch's AERIAL_SIM_LOCKSTEP_KEY" in line]


@pytest.fixture
def side_nodes(ros_node):
    """Nodes a test makes beside ``ros_node`` (forgers, replayers), destroyed when it ends, passed or not:
    left to the garbage collector, their latched announcements outlived the test and a later test of the
    same worker (test_warm_run's LastOutputs) counted a replayed /signer/progress as a participant (ci26)."""
    made: list = []
    yield made
    for node in made:
        try:
            node.destroy_node()
        except Exception:  # noqa: BLE001 - destroyed by the test already
            pass


def test_forged_participant_entries_leave_the_clock_running_with_an_error(launch, ros_node, side_nodes, tmp_path):
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
    from rclpy.node import Node
    from rosgraph_msgs.msg import Clock
    from std_msgs.msg import String

    from aerial_sim.nodes.ros.lockstep import LOCKSTEP_ANNOUNCEMENTS_QOS, LOCKSTEP_PARTICIPANTS_TOPIC
    from aerial_sim.nodes.ros.qos import COMMAND_QOS, LATCHED_QOS

    params = tmp_path / "physics.yaml"
    params.write_text(f"/**/physics:\n  ros__parameters:\n    lockstep_timeout_s: {TIMEOUT_S}\n")
    # Without the launch's key (ros2 launch without it): the rules that hold for any announcer.
    unsigned = {"AERIAL_SIM_LOCKSTEP_KEY": ""}
    physics = launch("physics.launch.yaml", "lockstep:=true", "--params-file", str(params),
                     "lockstep_participants:=/drone1/ground_truth/odom@50", environment=unsigned)
    control = launch("control.launch.yaml", "lockstep:=true", environment=unsigned)
    clock = []
    errors = []
    ros_node.create_subscription(Clock, "/clock", lambda m: clock.append(m.clock.sec + m.clock.nanosec * 1e-9), 10)
    ros_node.create_subscription(
        DiagnosticArray, "/diagnostics",
        lambda m: errors.extend(s.message for s in m.status if s.level == DiagnosticStatus.ERROR), COMMAND_QOS)
    assert spin_until(ros_node, lambda: clock and clock[-1] > 0.5, 40.0), physics.output() + control.output()

    # Four entries from one writer: its history must keep them all until the physics node's reader has them (a
    # latched writer keeps one: ci11 delivered only the last, the three entries before it overwritten unsent).
    forger = ros_node.create_publisher(String, LOCKSTEP_PARTICIPANTS_TOPIC, LOCKSTEP_ANNOUNCEMENTS_QOS)
    leaver = Node("leaving_announcer", context=ros_node.context)
    side_nodes.append(leaver)
    leaving = leaver.create_publisher(String, LOCKSTEP_PARTICIPANTS_TOPIC, LATCHED_QOS)
    for entry in ("/ghost/never_published@250",         # nobody ever publishes it: silent, dropped
                  "/clock@250",                          # published, but not by the announcer: refused
                  "/drone1/ground_truth/odom@0.0001",    # the physics node's configured entry: not replaced
                  "/" + "x" * 1_000_000 + "@250"):       # a 1 MB name: refused in a short line
        forger.publish(String(data=entry))
    leaving.publish(String(data="/ghost/left_behind@250"))
    # Taken before its announcer leaves (the physics node takes announcements on a 0.2 s timer of its executor,
    # which a busy machine can hold up past a fixed second): only then can it expire with it.
    assert spin_until(ros_node, lambda: "waiting for /ghost/left_behind@250" in physics.output(), 30.0), \
        physics.output()[-3000:]
    leaver.destroy_node()  # its entry expires with it
    started = clock[-1]
    # The clock stops at most TIMEOUT_S (wall) for the silent entry, then runs on.
    assert spin_until(ros_node, lambda: clock[-1] > started + 1.0, TIMEOUT_S + 30.0), physics.output()
    assert spin_until(ros_node, lambda: any("/ghost/never_published" in e for e in errors), 10.0), physics.output()
    moving_from = clock[-1]
    assert spin_until(ros_node, lambda: clock[-1] > moving_from + 0.5, 20.0), physics.output()
    log = physics.output()
    dropped = [line for line in log.splitlines() if "lockstep: participant dropped" in line]
    assert len(dropped) == 1 and "[ERROR]" in dropped[0] and "/ghost/never_published" in dropped[0], log
    assert "lockstep: entry /clock refused:" in log and "does not publish it" in log, log
    assert "lockstep participant /drone1/ground_truth/odom is the lockstep_participants parameter's entry" in log
    assert "at most 256 characters" in log and max(len(line) for line in log.splitlines()) < 2000
    assert "no longer waiting for /ghost/left_behind" in log and "has left the graph" in log, log
    assert physics.alive() and control.alive()



def test_with_the_launch_key_a_forger_that_publishes_its_topic_never_holds_the_clock(launch, ros_node, side_nodes,
                                                                                        tmp_path):
    """A node outside the launch announces a topic it publishes itself (stale stamps: without the key it
    would hold the clock for lockstep_timeout_s, then be dropped), unsigned, signed with another key, and
    with a signature replayed from another node: each refused at once; the clock never stops. A node
    with the key (this test's, the one its graphs share) is taken; once it has left, a node that takes its
    very name and replays its signed announcement (copied from the latched topic) is refused at once too:
    the signature covers the GID of the publisher that sent it."""
    import os

    from rclpy.node import Node
    from rosgraph_msgs.msg import Clock
    from std_msgs.msg import Header, String

    from aerial_sim.nodes.ros.lockstep import LOCKSTEP_PARTICIPANTS_TOPIC, announce_lockstep_participant
    from aerial_sim.nodes.ros.qos import LATCHED_QOS, LOCKSTEP_QOS
    from aerial_sim.physics.lockstep import parse_key, sign_entry

    key = parse_key(os.environ["AERIAL_SIM_LOCKSTEP_KEY"])
    params = tmp_path / "physics.yaml"
    params.write_text(f"/**/physics:\n  ros__parameters:\n    lockstep_timeout_s: {TIMEOUT_S}\n")
    physics = launch("physics.launch.yaml", "lockstep:=true", "--params-file", str(params))
    control = launch("control.launch.yaml", "lockstep:=true")
    arrivals = []  # (wall s, sim s)
    ros_node.create_subscription(Clock, "/clock", lambda m: arrivals.append(
        (time.monotonic(), m.clock.sec + m.clock.nanosec * 1e-9)), 10)
    assert spin_until(ros_node, lambda: arrivals and arrivals[-1][1] > 0.5, 40.0), physics.output() + control.output()

    forger = Node("forger", context=ros_node.context)
    side_nodes.append(forger)
    stale = forger.create_publisher(Header, "/forger/progress", LOCKSTEP_QOS)
    forger.create_timer(0.01, lambda: stale.publish(Header()))  # stamp 0, for ever
    announcements = forger.create_publisher(String, LOCKSTEP_PARTICIPANTS_TOPIC, LATCHED_QOS)
    entry = "/forger/progress@250:0:0"
    for text in (entry,                                          # unsigned
                 sign_entry(entry, "/forger", b"another launch's key"),
                 sign_entry(entry, "/drone1/flight_controller", key)):  # replayed from another node
        announcements.publish(String(data=text))
    heard = []  # what the announcements topic carries: a replayer copies the signer's from there
    ros_node.create_subscription(String, LOCKSTEP_PARTICIPANTS_TOPIC, lambda m: heard.append(m.data), LATCHED_QOS)
    signer = Node("signer", context=ros_node.context)  # a node of the launch: it has the key
    side_nodes.append(signer)
    progress = signer.create_publisher(Header, "/signer/progress", LOCKSTEP_QOS)
    signed = announce_lockstep_participant(signer, "/signer/progress", 50.0)
    executor_nodes = [forger, signer]

    def spin_all(condition, timeout_s):
        import rclpy

        executor = rclpy.executors.SingleThreadedExecutor(context=ros_node.context)
        for node in (ros_node, *executor_nodes):
            executor.add_node(node)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not condition():
            if arrivals and signer in executor_nodes:  # the signer keeps up with the clock, as a participant does
                message = Header()
                message.stamp.sec, message.stamp.nanosec = divmod(int(arrivals[-1][1] * 1e9), 1_000_000_000)
                progress.publish(message)
            executor.spin_once(timeout_sec=0.005)
        return condition()

    # Discovery brings the announcements when it does, maybe after the clock has run on a while: wait until
    # the signer is taken and the forger refused, then see the clock go on past that.
    def announcements_handled() -> bool:
        log = physics.output()
        return "lockstep: waiting for /signer/progress@50" in log and bool(unsigned_refusals(log))

    assert spin_all(announcements_handled, TIMEOUT_S + 40.0), physics.output()[-3000:]
    started = len(arrivals)
    moved = spin_all(lambda: arrivals[-1][1] > arrivals[started - 1][1] + 1.5, TIMEOUT_S + 40.0)
    log = physics.output()
    assert moved, log[-3000:]
    assert "lockstep: waiting for /signer/progress@50" in log and "announced by /signer" in log, log[-3000:]
    refusals = unsigned_refusals(log)
    assert len(refusals) == 1 and "/forger/progress@250" in refusals[0], log[-3000:]  # each refusal once
    assert "participant dropped" not in log and "waiting for /forger" not in log, log[-3000:]

    # The signer leaves; a node of the very same name replays its announcement and publishes stale stamps.
    # This process's own reader of the latched topic may hear the signer's entry later than the physics node did.
    assert spin_all(lambda: any(text.startswith("/signer/progress@50") for text in heard), 20.0), heard
    copied = next(text for text in heard if text.startswith("/signer/progress@50"))
    executor_nodes.remove(signer)
    signer.destroy_node()
    assert spin_all(lambda: "no longer waiting for /signer/progress" in physics.output(), 20.0), physics.output()[-3000:]
    replayer = Node("signer", context=ros_node.context)
    side_nodes.append(replayer)
    stale_progress = replayer.create_publisher(Header, "/signer/progress", LOCKSTEP_QOS)
    replayer.create_timer(0.01, lambda: stale_progress.publish(Header()))  # stamp 0, for ever
    replayer.create_publisher(String, LOCKSTEP_PARTICIPANTS_TOPIC, LATCHED_QOS).publish(String(data=copied))
    executor_nodes.append(replayer)
    # The replayed entry arrives when discovery brings it, maybe after the clock has run on a while: wait
    # for its refusal, then see the clock go on past it.
    assert spin_all(lambda: len(unsigned_refusals(physics.output())) == 2, TIMEOUT_S + 20.0), physics.output()[-3000:]
    refused_at = len(arrivals)
    assert spin_all(lambda: arrivals[-1][1] > arrivals[refused_at - 1][1] + 1.0, TIMEOUT_S + 20.0)
    log = physics.output()
    refusals = unsigned_refusals(log)
    assert len(refusals) == 2 and "/signer/progress@50" in refusals[1] and "from /signer" in refusals[1], log[-3000:]
    assert log.count("lockstep: waiting for /signer/progress@50") == 1, log[-3000:]
    # Never held: no gap in /clock near the forgers' timeout (the signer is waited for only a period at a time).
    gaps = [b[0] - a[0] for a, b in zip(arrivals[started - 1:], arrivals[started:])]
    assert max(gaps) < TIMEOUT_S - 1.0, max(gaps)
    del signed
    assert physics.alive() and control.alive()
