"""The shipped RViz config is valid YAML and names only topics the graph publishes, with matching types and QoS."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
INTERFACES = REPO.parent / "shared" / "INTERFACES.md"
NAMESPACE = "/drone1"
DISPLAY_TYPES = {
    "rviz_default_plugins/Odometry": "nav_msgs/msg/Odometry",
    "rviz_default_plugins/Image": "sensor_msgs/msg/Image",
    "rviz_default_plugins/PointCloud2": "sensor_msgs/msg/PointCloud2",
    "rviz_default_plugins/MarkerArray": "visualization_msgs/msg/MarkerArray",
    "rviz_default_plugins/Range": "sensor_msgs/msg/Range",
    "rviz_default_plugins/PoseArray": "geometry_msgs/msg/PoseArray",
}


def interface_topics() -> dict[str, str]:
    """Published topic -> type from INTERFACES.md's tables (relative names in the vehicle namespace)."""
    topics = {}
    for line in INTERFACES.read_text().splitlines():
        match = re.match(r"\|\s*`([^`]+)`\s*\|\s*([\w/]+/msg/\w+)", line)
        if match and "| sub |" not in line and "(sub)" not in line:
            name, msgtype = match.groups()
            topics[name if name.startswith("/") else f"{NAMESPACE}/{name}"] = msgtype
    return topics


def documented_topics() -> dict[str, str]:
    """Published topic -> type from the publishes column of doc/nodes_and_topics.md, the project's own table
    (it carries what the contract's tables do not list, such as the fleet's `/swarm/poses`)."""
    full_names = {name.rsplit("/", 1)[-1]: name for name in DISPLAY_TYPES.values()}
    topics = {}
    for line in (REPO / "doc" / "nodes_and_topics.md").read_text().splitlines():
        cells = line.split(" | ")
        if len(cells) < 4:
            continue
        for name, short_type in re.findall(r"`([^`]+)` \((\w+)", cells[2]):
            if short_type in full_names:
                topics[name if name.startswith("/") else f"{NAMESPACE}/{name}"] = full_names[short_type]
    return topics


def viewer_topics() -> dict[str, str]:
    """Topics published by this area's nodes, where viewer.launch.yaml puts them."""
    launch = yaml.safe_load((REPO / "launch" / "viewer.launch.yaml").read_text())["launch"]
    root_nodes = {e["node"]["exec"] for e in launch if "node" in e}
    grouped = [c["node"]["exec"] for e in launch if "group" in e for c in e["group"]["children"] if "node" in c]
    assert "scene_markers" in root_nodes and "depth_to_points" in grouped
    sources = {name: (REPO / "src/aerial_sim/nodes" / f"{name}.py").read_text() for name in ("scene_markers", "depth_to_points")}
    assert 'create_publisher(MarkerArray, "scene_markers"' in sources["scene_markers"]
    assert 'create_publisher(PointCloud2, "camera/depth/points"' in sources["depth_to_points"]
    return {"/scene_markers": "visualization_msgs/msg/MarkerArray",
            f"{NAMESPACE}/camera/depth/points": "sensor_msgs/msg/PointCloud2"}  # fmt: skip


@pytest.mark.skipif(not INTERFACES.is_file(), reason="shared/INTERFACES.md is not beside the repository")
def test_rviz_config_names_published_topics_with_matching_types_and_qos():
    config = yaml.safe_load((REPO / "rviz" / "sim.rviz").read_text())
    manager = config["Visualization Manager"]
    assert manager["Global Options"]["Fixed Frame"] == "map"
    published = {**interface_topics(), **documented_topics(), **viewer_topics()}
    assert f"{NAMESPACE}/ground_truth/odom" in published  # the table was parsed
    seen = {}
    for display in manager["Displays"]:
        if "Topic" not in display:
            continue
        topic = display["Topic"]["Value"]
        assert topic in published, f"{display['Name']}: {topic} is not published by the graph"
        assert DISPLAY_TYPES[display["Class"]] == published[topic], f"{display['Name']}: wrong display type"
        reliability = display["Topic"]["Reliability Policy"]
        assert reliability == ("Reliable" if topic == "/scene_markers" else "Best Effort")  # match the publishers
        seen[display["Class"]] = seen.get(display["Class"], 0) + 1
    assert seen == {"rviz_default_plugins/MarkerArray": 1, "rviz_default_plugins/Odometry": 2,
                    "rviz_default_plugins/PointCloud2": 2, "rviz_default_plugins/Image": 3,
                    "rviz_default_plugins/Range": 1, "rviz_default_plugins/PoseArray": 1}  # fmt: skip
    assert any(d["Class"] == "rviz_default_plugins/TF" for d in manager["Displays"])
