"""Lockstep with every node on: two runs of the same mission and seed record the same bag (issues 11, 32,
34), one with a process per node, the other with the nodes in one process (``--compose``).

Physics, IMU, barometer, magnetometer, GPS, camera, depth noise, lidar, rangefinder, scene markers, flight
controller, mission and recorder, launched twice from ``sim.launch.yaml``, side by side. (A third run
compared nothing the second does not: any difference between runs shows between two of them, and each
already meets the other's load. The composed run is the one test_container.py flew beside a process per
node, with the batch's smaller graph: these nodes hold that one's. test_warm_run.py compares a cold run
with a warm one.)
"""

from __future__ import annotations

import hashlib
import re
import time

import pytest

from conftest import REPO, requires_ros

pytestmark = [requires_ros, pytest.mark.ros]

#: Left out of the stamp-by-stamp comparison (several statuses may share a stamp); the files' bytes below cover it.
WALL_CLOCK_TOPICS = ("/diagnostics",)
#: The flight: takeoff, a 0.2 m square, landing (disarmed at 4.9 s of sim time).
MISSION = REPO / "test" / "data" / "missions" / "short_hop.yaml"
#: What two graphs side by side on a loaded 2-core machine can leave out and still test what they are
#: for: a smaller camera image than the default 460 x 320 (every camera stream, depth noise included, is
#: still in the bags), and no plots or bag report at the end (other tests check those; here they were a
#: fifth of the CPU).
LIGHTER = {"/**/camera": {"ros__parameters": {"width": 160, "height": 120}},
           "/**/recorder": {"ros__parameters": {"write_report": False}},
           "/**/mission": {"ros__parameters": {"write_plots": False}}}


def start_lockstep_flight(launch, mission, run_dir, domain_id=None, *extra):
    """The whole graph in lockstep, flying ``mission`` into ``run_dir``."""
    return launch("sim.launch.yaml", "lockstep:=true", "viewer:=false", "airsim_api:=false", "use_lidar:=true",
                  "use_distance:=true", "use_depth_points:=false", f"mission:={mission}", f"run_dir:={run_dir}",
                  *extra, domain_id=domain_id)


def lighter_nodes(folder) -> str:
    """A parameters file with LIGHTER's settings."""
    import yaml

    path = folder / "lighter.yaml"
    path.write_text(yaml.safe_dump(LIGHTER))
    return str(path)


def landing_time(graph, run_dir) -> float:
    """Wait for the launched flight to end; the disarm's sim time (s)."""
    deadline = time.monotonic() + 180.0  # about 25 s on a quiet machine; lockstep slows down, never drops
    while graph.alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not graph.alive(), "mission did not finish in 180 s:\n" + graph.output()[-5000:]
    landed = re.search(r"landed and disarmed at t = ([0-9.]+) s", graph.output())
    assert landed, graph.output()[-5000:]
    for name in ("track.csv", "summary.txt", "metrics.json"):
        assert (run_dir / name).is_file(), name
    return float(landed.group(1))


def test_two_lockstep_runs_one_composed_with_every_node_record_identical_bags(launch, spare_domain, tmp_path):
    from aerial_sim.recording.digest import EXCLUDED_TOPICS, _payloads_by_stamp

    runs = [tmp_path / f"run{index}" for index in range(2)]
    # Side by side, each in its own domain: each run also meets the other's load, as batch workers do.
    # The recorder as launched (record.launch.yaml's exclusions, nothing more): its default bag repeats.
    lighter = lighter_nodes(tmp_path)
    # Rotor drag too: its wrench goes back into the step (two runs with it recorded different flights while
    # the step applied whichever wrench had arrived).
    # The RViz scene markers as launched: in lockstep the start gate holds the clock until their one latched
    # message is out (ci13, when they were outside it: it came after the first records were written in one
    # run, before them in the other, and the files differed).
    options = ("use_rotor_drag:=true", "linear_drag:=false")
    graphs = [start_lockstep_flight(launch, MISSION, run, domain, "--params-file", lighter, *options, *extra)
              for run, domain, extra in zip(runs, (None, spare_domain()), ((), ("--compose",)))]
    landed_at = [landing_time(graph, run) for graph, run in zip(graphs, runs)]
    assert landed_at[0] == landed_at[1]
    # The second run's nodes in one process (the renderer-bound ones keep their own: doc/launch.md).
    composed = graphs[1].output()
    labels = {line.split("]", 1)[0] + "]" for line in composed.splitlines() if line.startswith("[")}
    assert "[container]" in labels and not labels & {"[physics]", "[sensors]", "[recorder]", "[mission]"}, labels
    assert "one process for imu, barometer, magnetometer, gps" in composed  # the sensors' own hosting, inside
    # The recorder takes part too: the clock never outran what it had written by more than the slack.
    assert "lockstep participant: /recorder/written@50" in graphs[0].output(), graphs[0].output()[-3000:]
    assert all("/scene_markers>/scene_markers" in graph.output() for graph in graphs)  # the start gate waits for them
    # The mission's track ends at the disarm's own stamp: the whole flight repeats, bit for bit, phase
    # labels included (a service's answer takes effect at the first due stamp after the call, whenever
    # it arrives: issue 32 found `arm` vs `takeoff` in the first 30 ms).
    tracks = [(run / "track.csv").read_text().splitlines() for run in runs]
    assert tracks[0] == tracks[1] and len(tracks[0]) > 1100  # ~4.9 s at 250 Hz
    # The batch's digest ends with the run (the disarm): the same for all, whatever the shutdown tail.
    from aerial_sim.batch.postprocess import run_end_ns
    from aerial_sim.recording.digest import bag_content

    ends = [run_end_ns(run) for run in runs]
    assert ends[0] == ends[1] is not None
    contents = [bag_content(run, until_ns=end) for run, end in zip(runs, ends)]
    topics = [content.topics for content in contents]
    counts = {name: tuple(t[name].count if name in t else None for t in topics)
              for name in sorted(set(topics[0]) | set(topics[1]))}
    differing = {name: count for name, count in counts.items()
                 if None in count or topics[0][name].in_digest and topics[0][name].digest != topics[1][name].digest}
    assert contents[0].digest == contents[1].digest, f"topics whose content differs (messages in each bag): {differing}"
    # Every stamped message, on every topic, in every bag, to the end: the mission takes part in lockstep,
    # so the clock stops where the run ends (issue 32: the bags' tails used to differ in length).
    end_ns = round(landed_at[0] * 1e9)
    bags = [_payloads_by_stamp(run, EXCLUDED_TOPICS + WALL_CLOCK_TOPICS) for run in runs]
    assert set(bags[0]) == set(bags[1])
    for topic in ("/drone1/camera/depth/image_raw", "/drone1/camera/color/image_raw", "/drone1/lidar/points",
                  "/drone1/distance/range", "/drone1/imu/data", "/drone1/gps/fix", "/drone1/ground_truth/odom",
                  "/recorder/written", "/drone1/mission/progress", "/drone1/rotor_drag/wrench", "/scene_markers"):
        assert topic in bags[0], f"{topic} was not recorded"
    for topic in sorted(bags[0]):
        for other in bags[1:]:
            first, second = bags[0][topic], other[topic]
            assert first.keys() == second.keys(), f"{topic}: {len(first)} vs {len(second)} stamps"
            differing = [stamp for stamp in first if first[stamp] != second[stamp]]
            assert not differing, f"{topic}: {len(differing)} of {len(first)} messages differ, first at {differing[0]} ns"
    # And the files themselves, byte for byte (issue 32), motor commands and /diagnostics included: the
    # recorder logs a stamped message at its stamp, an unstamped one at the /clock sent before it, and
    # writes in an order, chunking and metadata that follow from the messages alone. The log lines
    # (wall-clock content) and the lockstep announcements (signed anew by each launch) are in log_bag.
    files = [{path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted((run / "bag").iterdir())}
             for run in runs]
    if files[0] != files[1]:  # where, not only that: the first differing metadata field or MCAP record
        from aerial_sim.recording.bag_compare import first_difference

        pytest.fail(f"the bags differ ({runs[0]} vs {runs[1]}): {first_difference(runs[0] / 'bag', runs[1] / 'bag')}\n"
                    f"{[name for name in files[0] if files[0][name] != files[1].get(name)]}\n"
                    + "\n".join(line for graph in graphs for line in graph.output().splitlines()
                                 if "[recorder]" in line or "late" in line)[-4000:])
    assert "metadata.yaml" in files[0], files
    assert all("messages arrived more than order_window_s" not in graph.output() for graph in graphs)
    for run in runs:
        with open(run / "bag" / "metadata.yaml") as stream:
            recorded = stream.read()
        assert "/drone1/motor_commands" in recorded and "/diagnostics" in recorded
        assert "/rosout" not in recorded and "/lockstep/participants" not in recorded
        logged = (run / "log_bag" / "metadata.yaml").read_text()
        assert "/rosout" in logged and "/lockstep/participants" in logged
    # Every camera frame of the flight is there: 30 Hz of sim time, none lost.
    frames = [stamp for stamp in bags[0]["/drone1/camera/depth/image_raw"] if stamp <= end_ns]
    assert len(frames) >= int(landed_at[0] * 30)
