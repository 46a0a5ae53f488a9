"""Run summary over a recorded bag: duration, real-time factor, topic rates, distance flown, and a plot.

A pure function of the bag (read with ``rosbags``): the recorder calls
:func:`write_run_report` when it closes, and anyone can call it on an old bag.

- duration: simulated time spanned by the messages (first to last receive stamp);
- real-time factor: simulated duration / wall-clock duration (the recorder
  stores its wall-clock start and end in ``metadata.yaml`` ``custom_data``),
  the figure AirSim reports for its clock speed (FSR paper sec. 3, "ClockSpeed");
- topic rate: (count - 1) / (last - first receive stamp) per topic;
- distance flown: sum of |p_k+1 - p_k| over every ``nav_msgs/Odometry`` topic
  (the ground-truth odometry in ``map``, ENU);
- stream health (:mod:`aerial_sim.recording.rates`): every periodic stream's
  delivered rate in simulated time against the rate its publisher was configured
  with (the recorder stores those in ``custom_data``), flagged ``LOW`` when short,
  and the messages known to be missing (stamp gaps, and losses the middleware
  reported to the recorder).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np
import yaml

from aerial_sim.cdr.decode import cdr_header_stamp_ns
from aerial_sim.recording.digest import EXCLUDED_TOPICS, begins_with_stamp
from aerial_sim.recording.rates import (
    CONFIGURED_KEY,
    LOST_KEY,
    LOW_FRACTION,
    RATED_TYPES,
    StreamHealth,
    decode_table,
    stream_health,
)
from aerial_sim.recording.reader import find_bag, read_once, stamp_ns

ODOMETRY = "nav_msgs/msg/Odometry"
#: PyYAML's safe loader in C where it was built with libyaml (a bag's metadata.yaml: 0.1-0.2 CPU s in Python).
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class TopicStats:
    topic: str
    msgtype: str
    count: int
    rate_hz: float


@dataclass
class RunSummary:
    bag: Path
    duration_s: float
    wall_duration_s: float | None
    topics: list[TopicStats]
    #: odometry topic -> (N, 4) array of [t_s, x, y, z] in map (ENU)
    trajectories: dict[str, np.ndarray] = field(default_factory=dict)
    #: periodic topic -> delivered vs configured rate and known missed messages
    health: dict[str, StreamHealth] = field(default_factory=dict)

    @property
    def low_streams(self) -> list[StreamHealth]:
        return [h for h in self.health.values() if h.low]

    @property
    def missed(self) -> int:
        return sum(h.missed for h in self.health.values())

    @property
    def real_time_factor(self) -> float | None:
        if not self.wall_duration_s or self.wall_duration_s <= 0:
            return None
        return self.duration_s / self.wall_duration_s

    def distance_m(self, topic: str) -> float:
        xyz = self.trajectories[topic][:, 1:]
        return float(np.linalg.norm(np.diff(xyz, axis=0), axis=1).sum()) if len(xyz) > 1 else 0.0

    def text(self) -> str:
        """The human-readable summary written to ``recording.txt``."""
        lines = [f"bag: {self.bag}", f"duration: {self.duration_s:.2f} s (simulated)"]
        if self.wall_duration_s is not None:
            rtf = self.real_time_factor
            lines.append(f"wall-clock: {self.wall_duration_s:.2f} s")
            lines.append(f"real-time factor: {rtf:.3f}" if rtf is not None else "real-time factor: n/a")
        for topic in self.trajectories:
            lines.append(f"distance flown ({topic}): {self.distance_m(topic):.2f} m")
        lines.append(f"messages: {sum(t.count for t in self.topics)}")
        lines.extend(self.health_lines())
        lines.append("topics:")
        width = max((len(t.topic) for t in self.topics), default=10)
        type_width = max((len(t.msgtype) for t in self.topics), default=10)
        for t in self.topics:
            flag = self.health[t.topic].flag() if t.topic in self.health else ""
            line = f"  {t.topic:<{width}}  {t.count:>8d} msgs  {t.rate_hz:8.2f} Hz  {t.msgtype:<{type_width}}  {flag}"
            lines.append(line.rstrip())
        return "\n".join(lines) + "\n"

    def health_lines(self) -> list[str]:
        """Two lines: streams below their configured sim-time rate, and messages known missed."""
        rated = [h for h in self.health.values() if h.configured_hz is not None]
        low = self.low_streams
        if not rated:
            first = "stream rates: no configured rates in this bag (recorded without them)"
        elif low:
            names = ", ".join(f"{h.topic} ({h.delivered_text()} of {h.configured_hz:g} Hz)" for h in low)
            first = f"LOW: {len(low)} of {len(rated)} rated streams below {LOW_FRACTION:.0%} of their configured sim-time rate: {names}"
        else:
            first = f"stream rates: all {len(rated)} rated streams at their configured sim-time rate"
        gaps = sum(h.gap_missed for h in self.health.values())
        lost = sum(h.lost for h in self.health.values())
        second = f"messages known missed: {gaps + lost} ({gaps} in stamp gaps, {lost} lost in transport)"
        return [first, second]


def summarize(path: str | Path, configured_rates: Mapping[str, float] | None = None) -> RunSummary:
    """Read the bag at ``path`` (bag dir or run dir) and compute its :class:`RunSummary`.

    ``configured_rates`` (topic -> Hz) adds to, and overrides, the rates the recorder stored in the bag.
    """
    collector = SummaryCollector(find_bag(path), configured_rates)
    read_once(collector.bag, [collector])
    return collector.result()


class SummaryCollector:
    """:func:`summarize` as a consumer of :func:`aerial_sim.recording.reader.read_once` (one pass shared with others)."""

    def __init__(self, bag: Path, configured_rates: Mapping[str, float] | None = None):
        self.bag = bag
        self.custom = _custom_data(bag)
        self.configured = {**decode_table(self.custom.get(CONFIGURED_KEY)), **dict(configured_rates or {})}
        self.lost = decode_table(self.custom.get(LOST_KEY))
        self.times: dict[str, list[int]] = {}
        self.first: dict[str, int] = {}
        self.last: dict[str, int] = {}
        self.counts: dict[str, int] = {}
        self.samples: dict[str, list[tuple[float, float, float, float]]] = {}

    def begin(self, reader) -> None:
        self.types = {c.topic: c.msgtype for c in reader.connections}
        self.odometry = {c.topic for c in reader.connections if c.msgtype == ODOMETRY}
        self.rated = {c.topic: begins_with_stamp(c) for c in reader.connections
                      if c.msgtype in RATED_TYPES and c.topic not in EXCLUDED_TOPICS}
        for connection in reader.connections:
            self.counts.setdefault(connection.topic, 0)

    def messages_of(self, connection, times_ns: list[int], payloads: list[bytes]) -> bool:
        """A topic's messages at once (:mod:`aerial_sim.recording.topic_reader`): what :meth:`message` does for each,
        the stamps read with :func:`~aerial_sim.recording.cdr_columns.header_stamps_ns` and odometry with
        :func:`aerial_sim.cdr.decode.decode_odometry`; False (nothing taken) for a payload either cannot read."""
        from aerial_sim.cdr.decode import decode_odometry
        from aerial_sim.recording.cdr_columns import header_stamps_ns

        topic = connection.topic
        stamps = None
        if self.rated.get(topic) or topic in self.odometry:
            stamps = header_stamps_ns(payloads)
            if stamps is None:
                return False
        samples = []
        if topic in self.odometry:
            try:
                for raw, stamp in zip(payloads, stamps):
                    p = decode_odometry(raw).position
                    samples.append((stamp * 1e-9, p[0], p[1], p[2]))
            except ValueError:
                return False
            self.samples.setdefault(topic, []).extend(samples)
        self.counts[topic] += len(times_ns)
        if times_ns:
            self.first.setdefault(topic, times_ns[0])
            self.last[topic] = times_ns[-1]
        if topic in self.rated:
            self.times.setdefault(topic, []).extend(stamps if self.rated[topic] else times_ns)
        return True

    def message(self, connection, t_ns: int, raw, decode) -> None:
        # Counting needs no deserialization; only odometry is decoded.
        topic = connection.topic
        self.counts[topic] += 1
        self.first.setdefault(topic, t_ns)
        self.last[topic] = t_ns
        if topic in self.rated:
            stamp = cdr_header_stamp_ns(bytes(raw[:12])) if self.rated[topic] else None
            self.times.setdefault(topic, []).append(t_ns if stamp is None else stamp)
        if topic in self.odometry:
            msg = decode()
            p = msg.pose.pose.position
            self.samples.setdefault(topic, []).append((stamp_ns(msg, t_ns) * 1e-9, p.x, p.y, p.z))

    def result(self) -> RunSummary:
        counts, first, last = self.counts, self.first, self.last
        start = min(first.values(), default=0)
        end = max(last.values(), default=0)
        topics = [TopicStats(topic, self.types[topic], counts[topic], _rate(counts[topic], first.get(topic, 0), last.get(topic, 0)))
                  for topic in sorted(counts)]
        wall = None
        if "wall_start_ns" in self.custom and "wall_end_ns" in self.custom:
            wall = (int(self.custom["wall_end_ns"]) - int(self.custom["wall_start_ns"])) * 1e-9
        return RunSummary(
            bag=self.bag,
            duration_s=(end - start) * 1e-9,
            wall_duration_s=wall,
            topics=topics,
            trajectories={k: np.asarray(v, dtype=float) for k, v in self.samples.items()},
            health={topic: stream_health(topic, self.times.get(topic, []), self.configured.get(topic),
                                         int(self.lost.get(topic, 0)), stamped)
                    for topic, stamped in sorted(self.rated.items())},
        )


def plot_trajectory(summary: RunSummary, path: str | Path) -> Path:
    """Top view (east/north) and altitude over time of every odometry topic, as a PNG (matplotlib Agg).

    The figure is kept for the next plot of the same topics (a batch draws one per run) and the
    altitude thinned to the axes' pixel columns (:mod:`aerial_sim.recording.kept_figures`).
    """
    from aerial_sim.recording.kept_figures import kept_figure, thin_to_columns

    labels = tuple(topic.rsplit("/ground_truth", 1)[0] or topic for topic in summary.trajectories)
    with kept_figure(("trajectory", labels), lambda: _trajectory_figure(labels)) as (figure, top, height, lines):
        columns = round(height.get_position().width * figure.get_figwidth() * figure.dpi)  # its width in pixels
        for data, (track, start, end, altitude) in zip(summary.trajectories.values(), lines):
            track.set_data(data[:, 1], data[:, 2])
            start.set_data(data[:1, 1], data[:1, 2])
            end.set_data(data[-1:, 1], data[-1:, 2])
            altitude.set_data(*thin_to_columns(data[:, 0] - data[0, 0], data[:, 3], columns))
        for axis in (top, height):
            axis.relim()
            axis.autoscale_view()
        path = Path(path)
        figure.savefig(path)
    return path


def _trajectory_figure(labels: tuple[str, ...]):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    figure = Figure(figsize=(10, 4.5), dpi=100)
    # Fixed margins instead of tight_layout: the layout pass is a good part of the plot's time.
    figure.subplots_adjust(left=0.07, right=0.98, bottom=0.11, top=0.92, wspace=0.25)
    top, height = figure.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1.3]})
    lines = []
    for label in labels:
        track, = top.plot([], [], label=label)
        start, = top.plot([], [], "go")
        end, = top.plot([], [], "rs")
        altitude, = height.plot([], [], label=label)
        lines.append((track, start, end, altitude))
    from aerial_sim.recording.kept_figures import TITLE_Y

    top.set(xlabel="east [m]", ylabel="north [m]")
    top.set_title("trajectory (map, ENU)", y=TITLE_Y)
    top.set_aspect("equal", adjustable="datalim")
    top.grid(True, alpha=0.3)
    height.set(xlabel="time [s]", ylabel="up [m]")
    height.set_title("altitude", y=TITLE_Y)
    height.grid(True, alpha=0.3)
    if labels:
        top.legend(loc="best", fontsize=8)
    else:
        top.text(0.5, 0.5, "no odometry recorded", ha="center", va="center", transform=top.transAxes)
    return figure, top, height, lines


#: The recorder's report in the run folder; ``summary.txt`` there belongs to the mission node.
REPORT_NAME = "recording.txt"


def write_run_report(path: str | Path, run_dir: str | Path | None = None) -> tuple[Path, Path | None]:
    """Write ``recording.txt`` and ``trajectory.png`` for the bag at ``path`` into ``run_dir``.

    ``run_dir`` defaults to the folder that holds the bag directory. The mission's
    ``summary.txt`` in the same folder is left alone. A bag with no odometry (a launch
    stopped before the simulation ran) gets no plot (None): nothing flew, and importing
    matplotlib alone can outlast a launcher's stop timeout on a busy machine.
    """
    summary = summarize(path)
    run_dir = Path(run_dir) if run_dir is not None else summary.bag.parent
    run_dir.mkdir(parents=True, exist_ok=True)
    text_path = run_dir / REPORT_NAME
    text_path.write_text(summary.text())
    if not summary.trajectories:
        return text_path, None
    return text_path, plot_trajectory(summary, run_dir / "trajectory.png")


def _rate(count: int, first_ns: int, last_ns: int) -> float:
    return (count - 1) / ((last_ns - first_ns) * 1e-9) if count > 1 and last_ns > first_ns else 0.0


def _custom_data(bag: Path) -> dict[str, str]:
    """The bag's ``custom_data``, with the recorder's wall-clock span from beside the bag (WALL_CLOCK_FILE)."""
    from aerial_sim.recording.bag import WALL_CLOCK_FILE

    custom: dict[str, str] = {}
    try:
        info = yaml.load((bag / "metadata.yaml").read_text(), Loader=_SAFE_LOADER)["rosbag2_bagfile_information"]
        custom.update(info.get("custom_data") or {})
    except (OSError, KeyError, TypeError, AttributeError, yaml.YAMLError):
        pass
    try:
        wall = yaml.load((bag.parent / WALL_CLOCK_FILE).read_text(), Loader=_SAFE_LOADER)
        custom.update({key: str(wall[key]) for key in ("wall_start_ns", "wall_end_ns")})
    except (OSError, KeyError, TypeError, yaml.YAMLError):
        pass
    return custom
