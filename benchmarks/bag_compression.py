"""Bag size against CPU: a recorded flight rewritten with each MCAP chunk compression, side by side.

    tools/dev.sh bench bag_compression [RUN_OR_BAG] [--seconds 20] [--compressions none,zstd,lz4]

Reads the messages of a recorded bag (default ``runs/latest``: the last ``tools/dev.sh sim``;
the first ``--seconds`` of sim time, held in memory) once, then writes the very same messages
(topics, QoS, receive times) through the recorder's own :class:`~aerial_sim.recording.bag.BagWriter`
with each compression in turn, in this process, and reads every result back with ``rosbags``
(as the exporter does). Prints per compression: bag MB, ratio to uncompressed, CPU seconds to
write and to read back, and the write CPU per simulated second, which is the share of a core the
recorder spends on it when the simulation runs in real time. CPU is this process's user +
system time (``time.process_time``), so the figures are the writer's own whatever else loads
the machine; the ratios come from one run. Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src")]


def load_messages(path: Path, seconds: float):
    """Topics (name, type, QoS) and the messages of the first ``seconds`` of sim time of the bag at ``path``."""
    import yaml

    from aerial_sim.recording.reader import find_bag, open_bag

    bag = find_bag(path)
    info = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    qos = {t["topic_metadata"]["name"]: t["topic_metadata"].get("offered_qos_profiles") or []
           for t in info["topics_with_message_count"]}  # fmt: skip
    topics, messages = {}, []
    with open_bag(bag) as reader:
        start = reader.start_time
        for connection, t_ns, raw in reader.messages():
            if t_ns - start > seconds * 1e9:
                break
            topics[connection.topic] = connection.msgtype
            messages.append((connection.topic, bytes(raw), t_ns))
    span_s = (messages[-1][2] - messages[0][2]) * 1e-9 if len(messages) > 1 else 0.0
    return bag, topics, qos, messages, span_s


def write_bag(target: Path, compression: str, topics, qos, messages) -> float:
    """CPU seconds to write ``messages`` into a new bag at ``target`` with ``compression``."""
    from aerial_sim.recording.bag import BagWriter, BagWriterParams

    start = time.process_time()
    with BagWriter(target, BagWriterParams(compression=compression)) as writer:
        for name, msgtype in topics.items():
            writer.add_topic(name, msgtype, qos.get(name, []))
        for topic, data, t_ns in messages:
            writer.write(topic, data, t_ns)
    return time.process_time() - start


def read_back(target: Path) -> tuple[int, float]:
    """Messages read back with rosbags (the project's reader) and the CPU seconds that took."""
    from aerial_sim.recording.reader import open_bag

    start, count = time.process_time(), 0
    with open_bag(target) as reader:
        for _connection, _t, raw in reader.messages():
            count += len(raw) > 0
    return count, time.process_time() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bag", nargs="?", default=str(REPO / "runs" / "latest"), help="run folder or bag directory")
    parser.add_argument("--seconds", type=float, default=20.0, help="sim seconds of the bag to use (default 20)")
    parser.add_argument("--compressions", default="none,zstd,lz4")
    parser.add_argument("--repeat", type=int, default=2, help="rounds over the compressions; the least CPU is kept")
    options = parser.parse_args()
    compressions = [c.strip() for c in options.compressions.split(",") if c.strip()]

    bag, topics, qos, messages, span_s = load_messages(Path(options.bag), options.seconds)
    total_mb = sum(len(m[1]) for m in messages) / 1e6
    print(f"{bag}: {len(messages)} messages, {total_mb:.1f} MB of payload over {span_s:.1f} s of sim time")
    best: dict[str, tuple[float, float, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for round_index in range(max(1, options.repeat)):  # interleaved rounds: load changes hit every variant
            for compression in compressions:
                target = Path(tmp) / f"{compression}_{round_index}"
                write_cpu = write_bag(target, compression, topics, qos, messages)
                size_mb = sum(p.stat().st_size for p in target.glob("*.mcap")) / 1e6
                count, read_cpu = read_back(target)
                assert count == len(messages), f"{compression}: read back {count} of {len(messages)} messages"
                previous = best.get(compression, (size_mb, write_cpu, read_cpu))
                best[compression] = (size_mb, min(write_cpu, previous[1]), min(read_cpu, previous[2]))
                for path in target.glob("*.mcap"):
                    path.unlink()  # keep the disk free for the next variant
    rows = [(c, *best[c]) for c in compressions]
    base = rows[0][1] if rows and rows[0][0] == "none" else None
    print(f"{'compression':<12}{'bag MB':>9}{'ratio':>8}{'write CPU s':>13}{'read CPU s':>12}{'write cores at RTF 1':>22}")
    for compression, size_mb, write_cpu, read_cpu in rows:
        ratio = f"{size_mb / base:.2f}" if base else "-"
        cores = write_cpu / span_s if span_s else float("nan")
        print(f"{compression:<12}{size_mb:9.1f}{ratio:>8}{write_cpu:13.2f}{read_cpu:12.2f}{cores:22.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
