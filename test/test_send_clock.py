"""Deterministic lockstep bags (issue 32; pure, no ROS): the log time of an unstamped message (the /clock
sent before it, whatever the arrival order), and how far held messages are written."""

from __future__ import annotations

import itertools

from aerial_sim.recording.send_clock import SendClock

MS = 1_000_000
PERIOD_NS = 4 * MS


def lockstep_sends(periods: int):
    """What a lockstep physics node and a flight controller send, in send order: ``/clock`` t (wall
    time 10 ms * k), then the command answering the state of t a little later (0.3 ms to 9 ms)."""
    for k in range(periods):
        yield ("clock", 10 * MS * k, k * PERIOD_NS)
        yield ("command", 10 * MS * k + (300_000 + 1_000_000 * (k % 9)), f"u{k}")


def log_times(arrivals) -> dict[str, int]:
    """The recorder's rule applied to messages in the order they arrive."""
    clock, logged = SendClock(), {}
    for kind, sent_ns, value in arrivals:
        if kind == "clock":
            logged.update({item: t for t, item in clock.tick(sent_ns, value)})
        elif (t := clock.place(sent_ns, value)) is not None:
            logged[value] = t
    logged.update({item: t for t, item in clock.drain()})
    return logged


def test_a_command_is_logged_at_the_clock_it_answers_in_every_arrival_order():
    sends = list(lockstep_sends(6))
    expected = {f"u{k}": k * PERIOD_NS for k in range(6)}
    clocks = [s for s in sends if s[0] == "clock"]
    commands = [s for s in sends if s[0] == "command"]
    # DDS keeps each writer's order, not the order across writers: every interleaving of the two streams.
    orders = 0
    for positions in itertools.combinations(range(len(sends)), len(commands)):
        arrivals, c, m = [], iter(clocks), iter(commands)
        for index in range(len(sends)):
            arrivals.append(next(m) if index in positions else next(c))
        assert log_times(arrivals) == expected, arrivals
        orders += 1
    assert orders == 924  # C(12, 6)


def test_messages_sent_before_the_first_clock_are_logged_at_zero_and_after_the_last_at_the_last():
    clock = SendClock()
    assert clock.place(5, "announcement") is None and clock.waiting == 1
    assert clock.tick(10, 0) == [(0, "announcement")]
    assert clock.tick(20, PERIOD_NS) == []
    assert clock.place(30, "last command") is None
    assert clock.drain() == [(PERIOD_NS, "last command")] and clock.waiting == 0
    # One that arrives late, after later /clock messages, still gets the clock sent before it.
    assert clock.tick(40, 2 * PERIOD_NS) == []
    assert clock.place(15, "late") == 0
    assert clock.place(35, "late too") == PERIOD_NS


def test_a_restart_sending_the_clock_back_and_a_wall_clock_step_back_keep_the_rule():
    clock = SendClock()
    clock.tick(100, 8 * PERIOD_NS)
    clock.tick(200, 0)  # /physics/restart: sim time back to 0
    assert clock.place(250, "first command of the new run") is None
    assert clock.tick(300, PERIOD_NS) == [(0, "first command of the new run")]
    clock.tick(290, 2 * PERIOD_NS)  # the host's wall clock stepped back 10 ns: kept in send order
    assert clock.place(310, "x") is None
    assert clock.tick(400, 3 * PERIOD_NS) == [(2 * PERIOD_NS, "x")]


def test_a_message_older_than_the_history_gets_its_oldest_stamp():
    clock = SendClock(history=3)
    for k in range(5):
        clock.tick(10 * (k + 1), k * PERIOD_NS)
    assert clock.place(5, "very late") == 2 * PERIOD_NS


def test_the_release_waits_for_a_participants_output_that_is_late_in_transport_but_not_for_a_dropped_one():
    from aerial_sim.recording.recorder import release_point_ns

    window = 300 * MS
    clock = 5000 * MS
    assert release_point_ns(clock, window, []) == clock - window
    assert release_point_ns(clock, window, [None, clock - 100 * MS]) == clock - window  # all caught up
    # A lidar sweep on its way: nothing after its newest stamp is written until it has come.
    assert release_point_ns(clock, window, [clock - 100 * MS, clock - 450 * MS]) == clock - 450 * MS
    # One more than four windows behind (dropped by the physics node, or gone): the window decides.
    assert release_point_ns(clock, window, [clock - 1300 * MS]) == clock - window


def test_written_stamps_are_every_due_time_of_the_grid_in_turn_whatever_clock_reached_the_recorder():
    from aerial_sim.physics.lockstep import Participant
    from aerial_sim.recording.recorder import written_stamps

    written = Participant("/recorder/written", 50.0)  # a due time every 20 ms
    assert written_stamps(written, 0, -1, 50) == (range(0, 1, 20 * MS), 0)
    assert list(written_stamps(written, 16 * MS, 0, 50)[0]) == []  # no new due time yet
    # A /clock that came late (a reliable resend) skips 20 and 40 ms: they are stamped all the same.
    stamps, due = written_stamps(written, 64 * MS, 0, 50)
    assert list(stamps) == [20 * MS, 40 * MS, 60 * MS] and due == 60 * MS
    # A clock that jumped ahead: only the newest max_burst due times.
    stamps, due = written_stamps(written, 10_000 * MS, due, 50)
    assert len(stamps) == 50 and stamps[-1] == due == 10_000 * MS


def test_the_outputs_owed_at_the_stopped_clock_follow_the_gates_rule_and_skip_the_runs_ender():
    """~/new_bag closes a run's bag once nothing is owed: a sensor's output due at the stopped clock, not its next."""
    from aerial_sim.physics.lockstep import Participant
    from aerial_sim.recording.recorder import owed_outputs

    imu, gps = Participant("/drone1/imu", 200.0), Participant("/drone1/gps/fix", 10.0)
    progress, lidar = Participant("/drone1/mission/progress", 10.0), Participant("/drone1/lidar", 10.0, lag_s=0.1)
    everyone = (imu, gps, progress, lidar)
    clock = 5_537 * MS
    caught_up = {"/drone1/imu": 5_535 * MS, "/drone1/gps/fix": 5_500 * MS, "/drone1/lidar": 5_400 * MS}
    assert owed_outputs(everyone, caught_up, clock, skip={"/drone1/mission/progress"}) == []
    late = dict(caught_up, **{"/drone1/imu": 5_530 * MS, "/drone1/lidar": 5_300 * MS})
    assert owed_outputs(everyone, late, clock, skip={"/drone1/mission/progress"}) == [
        "/drone1/imu (due 5.535 s, got 5.530 s)", "/drone1/lidar (due 5.400 s, got 5.300 s)"]
    assert owed_outputs(everyone, caught_up, clock, skip=()) == ["/drone1/mission/progress (due 5.500 s, got nothing)"]
    assert owed_outputs(everyone, {}, 0, skip={"/drone1/lidar"}) == [  # the first outputs are due at 0, a lag's not yet
        "/drone1/gps/fix (due 0.000 s, got nothing)", "/drone1/imu (due 0.000 s, got nothing)",
        "/drone1/mission/progress (due 0.000 s, got nothing)"]
