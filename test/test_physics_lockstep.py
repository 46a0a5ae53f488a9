"""Lockstep for the whole graph, the pure part (:mod:`aerial_sim.physics.lockstep`): entries, the
awaited stamp of each participant, and the gate that holds the clock."""

from __future__ import annotations

import pytest

from aerial_sim.config import ParamsError
from aerial_sim.physics.lockstep import EntryRefused, LockstepGate, Participant, parse_participants

MS = 1_000_000


def test_entries_parse_and_print_back():
    entries = parse_participants(" /drone1/imu/data@200, /drone1/gps/vel@50:0.2  /drone1/lidar/points@10:0:0.1 ")
    assert entries == (Participant("/drone1/imu/data", 200.0), Participant("/drone1/gps/vel", 50.0, 0.2),
                       Participant("/drone1/lidar/points", 10.0, 0.0, 0.1))
    assert [Participant.parse(e.text()) for e in entries] == list(entries)
    assert parse_participants("") == () == parse_participants("none")


@pytest.mark.parametrize("entry", ["imu/data@200", "/drone1/imu/data", "/a@0", "/a@-1", "/a@nan", "/a@30:x",
                                   "/a@30:0:0:0", "/a/@30", "/a@1e300", "/a@30:1e300", "/a@30:0:1e300"])
def test_bad_entries_are_refused_with_the_entry_named(entry):
    with pytest.raises(ParamsError, match="lockstep participant"):
        parse_participants(entry)


def test_the_awaited_stamp_is_the_last_due_one_producible_now():
    imu = Participant("/imu", 200.0)  # due every 5 ms; the clock moves in 4 ms periods
    assert [imu.awaited_stamp_ns(t * MS) for t in (0, 4, 8, 12, 20)] == [0, 0, 5 * MS, 10 * MS, 20 * MS]
    gps = Participant("/gps", 50.0, first_s=0.2)  # nothing before its first fix at 0.2 s
    assert gps.awaited_stamp_ns(196 * MS) is None and gps.awaited_stamp_ns(200 * MS) == 200 * MS
    lidar = Participant("/lidar", 10.0, lag_s=0.1)  # the sweep stamped 0 is done at 0.1 s
    assert lidar.awaited_stamp_ns(96 * MS) is None and lidar.awaited_stamp_ns(300 * MS) == 200 * MS


def test_the_gate_holds_the_clock_until_each_participant_has_answered():
    camera, imu = Participant("/camera", 30.0), Participant("/imu", 200.0)
    gate = LockstepGate((camera, imu))
    assert {h.participant for h in gate.holdups(0)} == {camera, imu}
    gate.observe("/camera", 0)
    gate.observe("/imu", 0)
    assert [h.awaited_ns for h in gate.holdups(32 * MS)] == [30 * MS]  # the IMU owes 30 ms; the camera, nothing
    gate.observe("/imu", 30 * MS)
    assert gate.holdups(32 * MS) == []  # next camera frame due at 33.3 ms
    gate.observe("/imu", 35 * MS)
    held = gate.holdups(36 * MS)
    assert [h.participant for h in held] == [camera] and held[0].awaited_ns == 33_333_333
    gate.observe("/camera", 36 * MS)  # rendered at the first state at or after its due time: answered
    assert gate.holdups(36 * MS) == []



def test_a_bad_lockstep_participants_parameter_stops_the_physics_node_with_the_entry_named():
    pytest.importorskip("rclpy")
    from aerial_sim.nodes._physics.params import PhysicsNodeParams

    assert PhysicsNodeParams(lockstep_participants="none").lockstep_participants == "none"
    with pytest.raises(ParamsError, match="participant /drone1/depth: rate_hz"):
        PhysicsNodeParams(lockstep_participants="/drone1/imu/data@200 /drone1/depth@0")


def test_an_entry_cannot_replace_another_owners_and_a_huge_name_is_refused_in_a_short_line():
    """Issue 32: an anonymous /drone1/imu/data@0.0001 silently replaced the IMU's own entry (the IMU then went
    unawaited); a 1 MB topic name was accepted and logged whole."""
    gate = LockstepGate(parse_participants("/driver/scan@10"))
    assert gate.add(Participant("/drone1/imu/data", 200.0), "imu process")
    assert not gate.add(Participant("/drone1/imu/data", 200.0), "imu process")  # its own repeat: no change
    for topic, owner in (("/drone1/imu/data", "imu process"), ("/driver/scan", gate.CONFIGURED)):
        with pytest.raises(EntryRefused, match=f"{topic} is {owner}'s entry"):
            gate.add(Participant(topic, 0.0001), "someone else")
    assert {p.topic: p.rate_hz for p in gate.participants()} == {"/driver/scan": 10.0, "/drone1/imu/data": 200.0}
    with pytest.raises(ParamsError, match="at most 256 characters") as refused:
        Participant.parse("/" + "x" * 1_000_000 + "@250")
    assert len(str(refused.value)) < 200
    gate.remove("/drone1/imu/data")  # its announcer left: anyone may announce the topic again
    assert gate.add(Participant("/drone1/imu/data", 100.0), "a new imu process")


def test_a_feedback_participant_is_awaited_at_the_clock_itself_and_dropped_when_silent_there():
    """The physics node awaits rotor drag's wrench at the clock (no slack: the step applies it): a holdup
    there, not at the slack's clock, and a silent one is overdue through ``also_held`` like any other."""
    gate = LockstepGate((Participant("/drone1/rotor_drag/wrench", 250.0), Participant("/drone1/imu/data", 250.0)))
    for topic in ("/drone1/rotor_drag/wrench", "/drone1/imu/data"):
        gate.arm(topic, -1)
        gate.observe(topic, 96 * MS)
    clock, slack_behind = 100 * MS, 0
    feedback = gate.holdups(clock, {"/drone1/rotor_drag/wrench"})
    assert [h.participant.topic for h in feedback] == ["/drone1/rotor_drag/wrench"] and feedback[0].awaited_ns == clock
    assert gate.holdups(slack_behind) == []  # at the slack's clock nobody holds
    assert gate.overdue(slack_behind, 0.0, 5.0, tuple(feedback)) == []  # holds from now
    assert [h.participant.topic for h in gate.overdue(slack_behind, 5.0, 5.0, tuple(feedback))] == ["/drone1/rotor_drag/wrench"]
    gate.observe("/drone1/rotor_drag/wrench", clock)
    assert gate.holdups(clock, {"/drone1/rotor_drag/wrench"}) == []
    # A vehicle without rotor drag: its wrench topic takes no part, so nothing of it holds the clock.
    assert gate.holdups(clock + 40 * MS, {"/drone2/rotor_drag/wrench"}) == []
    assert [h.participant.topic for h in gate.holdups(clock + 40 * MS)] == ["/drone1/rotor_drag/wrench", "/drone1/imu/data"]


def test_a_participant_silent_past_the_timeout_is_overdue_but_a_slow_one_is_not():
    gate = LockstepGate((Participant("/silent", 100.0), Participant("/slow", 100.0)))
    for topic in ("/silent", "/slow"):
        gate.arm(topic, -1)
    clock = 50 * MS
    assert gate.overdue(clock, 0.0, 5.0) == []  # both hold the clock from now
    gate.observe("/slow", 10 * MS)  # late, but producing: its wait starts again
    assert gate.overdue(clock, 4.0, 5.0) == []
    assert [h.participant.topic for h in gate.overdue(clock, 5.0, 5.0)] == ["/silent"]
    assert [h.participant.topic for h in gate.overdue(clock, 9.5, 5.0)] == ["/silent", "/slow"]
    assert gate.overdue(clock, 1e6, 0.0) == []  # timeout 0: wait for ever
    gate.observe("/silent", clock)
    gate.observe("/slow", clock)
    assert gate.overdue(clock, 20.0, 5.0) == [] and gate.holdups(clock) == []


def test_a_signed_entry_matches_only_its_own_announcer_and_key():
    """Issue 32: an announcement is signed with the launch's key over the entry and the announcing
    node's name; another key, another node (a replay from another publisher), another entry, or no
    signature at all do not match."""
    from aerial_sim.physics.lockstep import parse_key, sign_entry, signature_matches, split_signature

    key = parse_key("00112233445566778899aabbccddeeff")
    entry = "/drone1/imu/data@200:0:0"
    signed = sign_entry(entry, "/drone1/imu", key)
    text, signature = split_signature(signed)
    assert text == entry and Participant.parse(text).topic == "/drone1/imu/data"
    assert signature_matches(entry, signature, "/drone1/imu", key)
    assert not signature_matches(entry, signature, "/forger", key)
    assert not signature_matches(entry, signature, "/drone1/imu", parse_key("another key"))
    assert not signature_matches("/drone1/imu/data@0.0001:0:0", signature, "/drone1/imu", key)
    assert not signature_matches(entry, split_signature(entry)[1], "/drone1/imu", key)  # unsigned
    assert sign_entry(entry, "/drone1/imu", parse_key("")) == entry  # no key: the bare entry
    # Bound to the publisher that sends it: a node that takes the name of one that left cannot replay it.
    gid = bytes(range(16))
    bound = split_signature(sign_entry(entry, "/drone1/imu", key, gid + bytes(8)))[1]  # rmw pads GIDs to 24 bytes
    assert signature_matches(entry, bound, "/drone1/imu", key, gid)
    assert not signature_matches(entry, bound, "/drone1/imu", key, bytes(reversed(gid)))
    assert not signature_matches(entry, signature, "/drone1/imu", key, gid)


def test_below_the_clear_bound_no_participant_holds_the_clock_and_past_it_one_soon_does():
    """The simulation thread skips the participants' rules below LockstepGate.clear_below_ns (issue 34): a
    bound that is never late (no holdup below it, for rates, offsets, arming and stamps of every kind) and
    never far early (the first holdup comes within a period of the rules after it)."""
    import math
    import random

    from aerial_sim.physics.lockstep import CLEAR_MARGIN_NS

    rng = random.Random(34)
    for _ in range(300):
        participants = [Participant(f"/p{i}", rng.choice([1.0, 30.0, 50.0, 75.0, 200.0, 250.0, rng.uniform(0.5, 400)]),
                                    rng.choice([0.0, 0.0, 0.2, rng.uniform(0, 1)]), rng.choice([0.0, 0.0, 0.004, 0.1]))
                        for i in range(rng.randint(1, 4))]
        gate = LockstepGate(tuple(participants))
        for participant in participants:
            if rng.random() < 0.8:
                gate.arm(participant.topic, rng.choice([-1, rng.randrange(0, 2_000_000_000)]))
            for _ in range(rng.randint(0, 3)):  # outputs at due stamps (k / rate + first), or anywhere
                k = rng.randrange(0, 600)
                stamp = round((participant.first_s + k / participant.rate_hz) * 1e9) if rng.random() < 0.8 \
                    else rng.randrange(0, 3_000_000_000)
                gate.observe(participant.topic, stamp)
        bound = gate.clear_below_ns()
        if math.isinf(bound):
            continue
        below = [int(bound) - d for d in (1, 1_000, 999_999, 4_000_000, 50_000_000)] + [rng.randrange(0, max(1, int(bound)))]
        assert all(not gate.holdups(clock) for clock in below if 0 <= clock < bound), (participants, bound)
        # Not far early: one of them holds within its own period (or the tolerance) past the bound.
        slowest = max(1e9 / p.rate_hz for p in participants)
        assert any(gate.holdups(int(bound + CLEAR_MARGIN_NS + d)) for d in (0, 2_000, slowest + 2_000)), (participants, bound)
    assert LockstepGate().clear_below_ns() == math.inf
