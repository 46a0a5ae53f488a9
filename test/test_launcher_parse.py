"""Launch-file parsing, substitutions and command lines: pure, no processes started."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from aerial_sim.launcher import cli, substitutions
from aerial_sim.launcher.commands import child_environment, node_command, process_labels, resolve_executable
from aerial_sim.launcher.description import load_launch_file, parse_cli_arguments
from aerial_sim.launcher.errors import LaunchError
from aerial_sim.launcher.plan import ParamDict, ParamFile, ProcessSpec
from aerial_sim.launcher.ros_names import coerce_parameter
from aerial_sim.launcher.substitutions import Substitution

DATA = Path(__file__).parent / "data" / "launch"
MAIN = DATA / "parse_main.launch.yaml"


@pytest.fixture
def demo_prefix(tmp_path, monkeypatch):
    """An AMENT_PREFIX_PATH prefix holding package demo_pkg with executable lib/demo_pkg/talker."""
    prefix = tmp_path / "prefix"
    executable = prefix / "lib" / "demo_pkg" / "talker"
    executable.parent.mkdir(parents=True)
    executable.write_text(f"#!{sys.executable}\n" + (DATA / "demo_talker.py").read_text())
    executable.chmod(0o755)
    marker = prefix / "share" / "ament_index" / "resource_index" / "packages" / "demo_pkg"
    marker.parent.mkdir(parents=True)
    marker.touch()
    (prefix / "share" / "demo_pkg").mkdir()
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(prefix))
    monkeypatch.delenv("DEMO_HOME", raising=False)
    return prefix


class _Context:
    def __init__(self, configurations=None, environ=None):
        self.configurations = configurations or {}
        self.environ = environ or {}
        self.current_file = Path("/launch/here/file.launch.yaml")

    def find_package_share(self, package):
        return Path("/share") / package

    def find_package_prefix(self, package):
        return Path("/prefix")


def by_name(plan):
    return {spec.name: spec for spec in plan.processes}


# -- substitutions ------------------------------------------------------------------------------


def test_substitution_grammar_nests_quotes_and_escapes():
    assert substitutions.parse("a $(var x) b") == ("a ", Substitution("var", (("x",),)), " b")
    nested = substitutions.parse("$(env 'A B' \"$(var d)/x\")")
    assert nested == (Substitution("env", (("A B",), (Substitution("var", (("d",),)), "/x"))),)
    assert substitutions.parse(r"cost \$(var x) 'quoted'") == ("cost $(var x) 'quoted'",)


def test_substitutions_evaluate_against_context():
    context = _Context({"d": "/data", "on": "true"}, {"HOME_X": "/h"})
    evaluate = lambda text: substitutions.substitute(text, context)  # noqa: E731
    assert evaluate("$(env HOME_X)/$(env MISSING $(var d))") == "/h//data"
    assert evaluate("[$(env MISSING '')]") == "[]"
    assert evaluate("$(find-pkg-share demo)/config") == "/share/demo/config"
    assert evaluate("$(dirname)") == "/launch/here"
    assert evaluate("$(not $(var on))|$(and $(var on) 1)|$(or false 0)|$(equals a a)") == "false|true|false|true"


@pytest.mark.parametrize(
    "text, culprit",
    [
        ("$(var nope)", "'nope'"),
        ("$(env AERIAL_SIM_SURELY_UNSET)", "'AERIAL_SIM_SURELY_UNSET'"),
        ("$(eval 1+1)", "'$(eval ...)'"),
        ("$(var x", "unterminated"),
        ("$(var)", "takes 1 to 2 argument"),
    ],
)
def test_substitution_errors_name_the_culprit(text, culprit):
    with pytest.raises(LaunchError) as error:
        substitutions.substitute(text, _Context({"x": "1"}))
    assert culprit in str(error.value)
    assert "\n" not in str(error.value)


# -- evaluation of a whole file -----------------------------------------------------------------


def test_file_evaluates_args_lets_groups_includes_and_conditions(demo_prefix):
    plan = load_launch_file(MAIN)
    nodes = by_name(plan)
    assert list(nodes) == ["imu", "camera", "gps", "tower", "relay", "after_group"]
    imu = nodes["imu"]
    assert imu.namespace == "/drone1"
    assert imu.arguments == ("--rate", "50", "--home", "/nowhere")
    assert imu.parameters == (
        ParamFile(DATA / "parse_params.yaml"),
        ParamDict({"rate_hz": 50}),
        ParamDict({"frame_id": "imu_link"}),
    )
    assert imu.remappings == (("chatter", "imu/drone1_raw"),)
    assert imu.output == "screen" and nodes["camera"].output == "log"
    # push-ros-namespace inside a group, then the included file's own group; absolute wins.
    assert nodes["gps"].namespace == "/fleet/drone2"
    assert nodes["gps"].parameters == (ParamDict({"data_dir": f"{demo_prefix}/share/demo_pkg/data"}),)
    assert nodes["tower"].namespace == "/ground"
    assert nodes["relay"].namespace == "/fleet/relay_ns"
    # The scoped group ended: no namespace and no leaked include argument afterwards.
    assert nodes["after_group"].namespace is None
    assert "vehicle" not in plan.configurations
    assert [a.name for a in plan.arguments] == ["ns", "use_camera", "rate", "vehicle", "share"]


def test_command_line_arguments_override_defaults_and_flip_conditions(demo_prefix, monkeypatch):
    monkeypatch.setenv("DEMO_HOME", "/home/pilot")
    plan = load_launch_file(MAIN, parse_cli_arguments(["ns:=d9", "use_camera:=false", "rate:=100"]))
    nodes = by_name(plan)
    assert "camera" not in nodes and "no_camera" in nodes
    assert nodes["imu"].namespace == "/d9"
    assert nodes["imu"].arguments == ("--rate", "100", "--home", "/home/pilot")
    assert nodes["imu"].remappings == (("chatter", "imu/d9_raw"),)
    assert nodes["no_camera"].parameters == (ParamDict({"enabled": False}),)


def test_include_is_not_scoped_and_its_arguments_beat_defaults(tmp_path):
    (tmp_path / "inner.launch.yaml").write_text(
        "launch:\n"
        "- arg: {name: who, default: inner_default}\n"
        "- let: {name: leaked, value: from_inner}\n"
    )
    (tmp_path / "outer.launch.yaml").write_text(
        "launch:\n"
        "- include: {file: $(dirname)/inner.launch.yaml, arg: [{name: who, value: outer}]}\n"
        "- executable: {cmd: echo $(var who) $(var leaked), name: shout}\n"
    )
    plan = load_launch_file(tmp_path / "outer.launch.yaml")
    (shout,) = plan.processes
    assert (shout.executable, shout.arguments, shout.is_node) == ("echo", ("outer", "from_inner"), False)


def test_a_file_changed_between_two_launches_is_read_again(tmp_path):
    """A text is parsed once per process (read_launch_entities keeps it): a file changed since is read again."""
    path = tmp_path / "edited.launch.yaml"
    path.write_text("launch:\n- executable: {cmd: echo first, name: shout}\n")
    assert load_launch_file(path).processes[0].arguments == ("first",)
    path.write_text("launch:\n- executable: {cmd: echo second one, name: shout}\n")
    assert load_launch_file(path).processes[0].arguments == ("second", "one")
    path.write_text("launch: [")
    with pytest.raises(LaunchError, match="not valid YAML"):
        load_launch_file(path)


def test_node_command_is_what_ros2_launch_passes(demo_prefix, tmp_path):
    nodes = by_name(load_launch_file(MAIN, {"use_camera": "false"}))
    talker = str(demo_prefix / "lib" / "demo_pkg" / "talker")
    imu = nodes["imu"]
    command = node_command(imu, resolve_executable(imu, imu.environment), tmp_path)
    assert command[:11] == [
        talker, "--rate", "50", "--home", "/nowhere",
        "--ros-args", "-r", "__node:=imu", "-r", "__ns:=/drone1",
        "--params-file",
    ]  # fmt: skip
    assert command[11] == str(DATA / "parse_params.yaml")
    assert command[12] == command[14] == "--params-file"
    assert command[16:] == ["-r", "chatter:=imu/drone1_raw"]
    # One generated file per inline param, keyed by the fully qualified node name.
    assert yaml.safe_load(Path(command[13]).read_text()) == {"/drone1/imu": {"ros__parameters": {"rate_hz": 50}}}
    assert yaml.safe_load(Path(command[15]).read_text()) == {"/drone1/imu": {"ros__parameters": {"frame_id": "imu_link"}}}
    # No namespace known: the wildcard key, and no __ns remap.
    no_camera = nodes["no_camera"]
    command = node_command(no_camera, resolve_executable(no_camera, no_camera.environment), tmp_path)
    assert command[:5] == [talker, "--ros-args", "-r", "__node:=no_camera", "--params-file"]
    assert yaml.safe_load(Path(command[5]).read_text()) == {"/**": {"ros__parameters": {"enabled": False}}}


def test_aerial_sim_nodes_run_as_modules_of_this_interpreter():
    spec = ProcessSpec(executable="no_such_node", package="aerial_sim")
    with pytest.raises(LaunchError, match="executable 'no_such_node' not found in package 'aerial_sim'"):
        resolve_executable(spec, {})
    spec = ProcessSpec(executable="imu", package="aerial_sim")
    assert resolve_executable(spec, {}) == [sys.executable, "-m", "aerial_sim.nodes.imu"]


def test_parameter_values_are_typed_like_launch_ros():
    assert coerce_parameter("50", None, "p") == 50 and isinstance(coerce_parameter("50", None, "p"), int)
    assert coerce_parameter("0.5", None, "p") == 0.5
    assert coerce_parameter("True", None, "p") is True
    assert coerce_parameter("[1, 2]", None, "p") == [1, 2]
    assert coerce_parameter("imu_link", None, "p") == "imu_link"
    assert coerce_parameter("50", "str", "p") == "50"
    assert coerce_parameter(3, "float", "p") == 3.0
    with pytest.raises(LaunchError, match="'abc' is not a valid int"):
        coerce_parameter("abc", "int", "p")


def test_children_get_the_launch_environment_as_ros2_launch_passes_it():
    """Nothing is added that ros2 launch would not add (discovery range, PYTHONUNBUFFERED, ROS_LOG_DIR):
    the same environment behaves the same under both launchers. Our own nodes learn the launcher's pid and
    the launch's lockstep key: one per launch, the environment's own where it names one."""
    environment = {"PATH": "/bin", "ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET"}
    assert child_environment(ProcessSpec(executable="x", environment=environment)) == environment
    ours = child_environment(ProcessSpec(executable="imu", package="aerial_sim", environment=environment))
    key = ours.pop("AERIAL_SIM_LOCKSTEP_KEY")
    assert ours == {**environment, "AERIAL_SIM_LAUNCHER_PID": str(os.getpid())} and len(key) == 32
    assert child_environment(ProcessSpec(executable="gps", package="aerial_sim", environment=environment)
                             )["AERIAL_SIM_LOCKSTEP_KEY"] == key  # the same for every node of the launch
    given = {**environment, "AERIAL_SIM_LOCKSTEP_KEY": ""}
    assert child_environment(ProcessSpec(executable="imu", package="aerial_sim", environment=given)
                             )["AERIAL_SIM_LOCKSTEP_KEY"] == ""


@pytest.mark.parametrize("exported, expected", [(None, "LOCALHOST"), ("SUBNET", "SUBNET")])
def test_sim_launch_sets_the_node_environment_itself(exported, expected):
    """sim.launch.yaml's set_env gives every node the same environment under ros2 launch and
    aerial_sim launch (neither launcher adds any): discovery on this machine unless the user chose a
    range, unbuffered Python output; ROS_LOG_DIR is left to the user under both."""
    environ = {k: v for k, v in os.environ.items() if k not in ("ROS_AUTOMATIC_DISCOVERY_RANGE", "PYTHONUNBUFFERED", "ROS_LOG_DIR")}
    if exported:
        environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = exported
    share = Path(__file__).resolve().parents[1] / "launch"
    plan = load_launch_file(share / "sim.launch.yaml", {"use_lidar": "true", "use_distance": "true"}, environ)
    assert len(plan.processes) >= 10
    for spec in plan.processes:
        assert spec.environment.get("ROS_AUTOMATIC_DISCOVERY_RANGE") == expected, spec.name
        assert spec.environment.get("PYTHONUNBUFFERED") == "1", spec.name
        assert "ROS_LOG_DIR" not in spec.environment, spec.name


def test_output_labels_are_node_names_numbered_when_repeated():
    specs = [ProcessSpec("talker", name="a"), ProcessSpec("talker"), ProcessSpec("bin/talker"), ProcessSpec("x")]
    assert process_labels(specs) == ["a", "talker-1", "talker-2", "x"]


# -- the command line ---------------------------------------------------------------------------


def run_cli(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_print_shows_each_command_without_starting_anything(demo_prefix, capsys):
    code, out, _ = run_cli(capsys, MAIN, "--print", "use_camera:=false")
    assert code == 0
    lines = out.splitlines()
    assert [line.split("]")[0] + "]" for line in lines] == [
        "[imu]", "[no_camera]", "[gps]", "[tower]", "[relay]", "[after_group]"
    ]  # fmt: skip
    assert lines[-1] == f"[after_group] {demo_prefix}/lib/demo_pkg/talker --ros-args -r __node:=after_group"


def test_bare_file_name_is_found_in_the_package_share(tmp_path, monkeypatch):
    (tmp_path / "launch").mkdir()
    (tmp_path / "launch" / "x.launch.yaml").write_text("launch: []\n")
    monkeypatch.setenv("AERIAL_SIM_SHARE", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert cli.resolve_launch_file(["x.launch.yaml", "a:=1"]) == (tmp_path / "launch" / "x.launch.yaml", ["a:=1"])
    assert cli.resolve_launch_file(["aerial_sim", "x.launch.yaml"])[0] == tmp_path / "launch" / "x.launch.yaml"


@pytest.mark.parametrize(
    "content, args, culprit",
    [
        ("launch:\n- timer: {period: 1}\n", [], "unsupported tag 'timer'"),
        ("launch:\n- executable: {cmd: echo $(var nope)}\n", [], "unknown launch argument 'nope'"),
        ("launch:\n- include: {file: /no/such/inner.launch.yaml}\n", [], "/no/such/inner.launch.yaml"),
        ("launch:\n- arg: {name: ns}\n", [], "missing launch argument 'ns'"),
        ("launch: []\n", ["rate=5"], "malformed launch argument 'rate=5'"),
        ("launch:\n- node: {pkg: demo_pkg, exec: nope}\n", [], "executable 'nope' not found in package 'demo_pkg'"),
        ("launch:\n- node: {pkg: demo_pkg, exec: talker, colour: red}\n", [], "unknown attribute 'colour'"),
        ("launch:\n- node: {pkg: demo_pkg, exec: talker, if: maybe}\n", [], "expected true or false, got 'maybe'"),
        ("launch:\n- node: {pkg: demo_pkg, exec: talker, param: [{from: /no/p.yaml}]}\n", [], "/no/p.yaml"),
        ("launch:\n- arg: {name: m, default: a, choices: [{value: a}]}\n", ["m:=b"], "expected one of: a"),
        ("launch:\n  - node: {pkg: demo_pkg\n", [], "not valid YAML"),
    ],
)
def test_launch_problems_are_one_line_naming_the_culprit(demo_prefix, tmp_path, capsys, content, args, culprit):
    path = tmp_path / "bad.launch.yaml"
    path.write_text(content)
    code, out, err = run_cli(capsys, path, *args)
    assert code == 2
    assert len(err.splitlines()) == 1, err
    assert culprit in err
    assert "Traceback" not in out + err


def test_missing_launch_file_is_one_line(tmp_path, capsys):
    code, _, err = run_cli(capsys, tmp_path / "absent.launch.yaml")
    assert (code, len(err.splitlines())) == (2, 1)
    assert "launch file not found" in err and "absent.launch.yaml" in err


def test_launcher_does_not_import_rclpy():
    probe = "import sys, aerial_sim.launcher.cli; sys.exit('rclpy' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", probe], timeout=30).returncode == 0


def test_sim_launch_vehicle_name_reaches_the_physics_node_and_the_airsim_server():
    """vehicle_name:=PX4 (what `aerial_sim airsim-settings` prints for a one-vehicle settings file): the physics
    node simulates PX4 (sim.launch.yaml's vehicles:=1 once leaked into physics.launch.yaml as a 1-vehicle grid
    named drone1, and AirSim's teleport.py found no ground truth for its PX4)."""
    share = Path(__file__).resolve().parents[1] / "launch"
    plan = load_launch_file(share / "sim.launch.yaml", {"vehicle_name": "PX4"}, dict(os.environ))
    values = {}
    for source in next(s for s in plan.processes if s.name == "physics").parameters:
        values.update(getattr(source, "values", {}))
    assert values["vehicle_names"] == ["PX4"] and values["vehicles"] == 0
