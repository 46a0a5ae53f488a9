"""Conformance of ``aerial_sim launch`` with ros2 launch / launch_yaml / launch_ros, construct by construct.

Every construct the files in ``launch/`` use has a case here whose expected value was derived
by reading the real implementation (ros2/launch rolling 02595ba, launch 3.x as in Kilted;
ros2/launch_ros rolling f9ab937); the comment above each case names the file and function.
Where ros2 launch refuses something, the embedded launcher must refuse it too (a file that works
here must work under ``ros2 launch``). ``test_launcher_real_parity.py`` compares the two launchers
end to end where the real tools are installed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from aerial_sim.launcher import substitutions
from aerial_sim.launcher.commands import node_command
from aerial_sim.launcher.description import load_launch_file
from aerial_sim.launcher.errors import LaunchError
from aerial_sim.launcher.plan import ParamDict, ParamFile

LAUNCH_DIR = Path(__file__).resolve().parents[1] / "launch"


class _Context:
    def __init__(self, configurations=None, environ=None):
        self.configurations = dict(configurations or {})
        self.environ = dict(environ or {})
        self.current_file = Path("/l/f.launch.yaml")

    def find_package_share(self, package):
        return Path("/share") / package

    def find_package_prefix(self, package):
        return Path("/prefix")


def sub(text, **configurations):
    return substitutions.substitute(text, _Context(configurations, {"SET": "v"}))


def plan_of(tmp_path, text, arguments=None, environ=None, name="t.launch.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return load_launch_file(path, arguments or {}, environ if environ is not None else {"PATH": "/bin"})


# -- substitution parsing and quoting ------------------------------------------------------------
# launch/frontend/grammar.lark (template, substitution, arguments: one space between, none after),
# launch/frontend/parse_substitution.py (ExtractSubstitution: quoted_string keeps spaces, the other
# quote is literal inside; escaped '\$(' is text).


@pytest.mark.parametrize(
    "text, expected",
    [
        ("plain 'quotes' stay", "plain 'quotes' stay"),  # text outside $() is literal
        (r"\$(var a)", "$(var a)"),  # escape
        ("$(var a)$(var b)", "AB"),  # adjacent substitutions concatenate
        ("x/$(var a)/y", "x/A/y"),
        ("$(env NOPE 'two words')", "two words"),  # quoted argument keeps its space
        ('$(env NOPE "it\'s")', "it's"),  # the other quote is an ordinary character
        ("$(env NOPE \"$(var a)-z\")", "A-z"),  # substitutions inside a quoted argument
        ("$(env SET)", "v"),
    ],
)
def test_substitution_text(text, expected):
    assert sub(text, a="A", b="B") == expected


@pytest.mark.parametrize("text", ["$(var  a)", "$(var a )", "$(var a", "$(env 'unterminated)"])
def test_substitution_syntax_ros2_launch_refuses(text):
    # grammar.lark: exactly one space between arguments and none before ')'.
    with pytest.raises(LaunchError):
        sub(text, a="A")


# -- empty strings '' ---------------------------------------------------------------------------
# parse_substitution.py: an empty quoted argument is an empty list of substitutions.
# launch/substitutions/environment_variable.py EnvironmentVariable.perform: default [] -> ''.
# launch/substitutions/equals_substitution.py EqualsSubstitution.__init__: an argument that is not
# a substitution (launch/utilities/type_utils.py is_substitution: an empty list is not one) goes
# through str(): '' compares as the text '[]'. launch/substitutions/not_substitution.py and
# and/or (perform_typed_substitution(..., bool)) refuse an empty value.


def test_empty_quoted_argument():
    assert sub("[$(env NOPE '')]") == "[]"
    assert sub("$(equals '' '')") == "true"  # '[]' == '[]'
    assert sub("$(equals $(var e) '')", e="") == "false"  # '' != '[]'
    assert sub("$(not-equals $(var e) '')", e="") == "true"  # why launch files compare with a word
    assert sub("$(not-equals $(var m) none)", m="none") == "false"  # control.launch.yaml's way
    with pytest.raises(LaunchError):
        sub("$(not '')")


def test_equals_compares_booleans_and_numbers_as_launch_does():
    # equals_substitution.py EqualsSubstitution.perform: _str_is_bool both -> booleans;
    # both floats -> math.isclose; else text.
    assert sub("$(equals TRUE 1)") == "true"
    assert sub("$(equals 1.0 1)") == "true"
    assert sub("$(equals a A)") == "false"


# -- if / unless -------------------------------------------------------------------------------
# launch/conditions/evaluate_condition_expression_impl.py evaluate_condition_expression: the text is
# stripped and lower-cased, then must be one of true/1/false/0 (InvalidConditionExpressionError
# otherwise); IfCondition / UnlessCondition (launch/conditions/if_condition.py, unless_condition.py).


@pytest.mark.parametrize("value, runs", [("true", True), (" TRUE ", True), ("1", True), ("False", False), ("0", False)])
def test_if_unless(tmp_path, value, runs):
    text = (
        "launch:\n- arg: {name: c, default: 'x'}\n"
        "- executable: {cmd: a, name: a, if: $(var c)}\n- executable: {cmd: b, name: b, unless: $(var c)}\n"
    )
    names = [p.name for p in plan_of(tmp_path, text, {"c": value}).processes]
    assert names == (["a"] if runs else ["b"])


@pytest.mark.parametrize("value", ["yes", "on", "", "truee"])
def test_if_refuses_what_ros2_launch_refuses(tmp_path, value):
    with pytest.raises(LaunchError, match="expected true or false"):
        plan_of(tmp_path, "launch:\n- arg: {name: c, default: x}\n- executable: {cmd: a, if: $(var c)}\n", {"c": value})


# -- arg, let, include, group --------------------------------------------------------------------
# launch/actions/declare_launch_argument.py DeclareLaunchArgument.execute: a value already in the
# context (command line or include) wins over the default.
# launch/actions/set_launch_configuration.py SetLaunchConfiguration.execute: value evaluated now.
# launch/actions/include_launch_description.py IncludeLaunchDescription.execute: the arguments are
# evaluated in the including context and set as launch configurations, not scoped (the included
# file's lets stay visible); launch/actions/group_action.py GroupAction.execute: scoped (default)
# wraps children in Push/PopLaunchConfigurations and Push/PopEnvironment.


def test_let_include_and_group_scoping(tmp_path):
    (tmp_path / "inner.launch.yaml").write_text(
        "launch:\n- arg: {name: who, default: inner}\n- let: {name: leaked, value: $(var who)-let}\n"
        "- executable: {cmd: echo $(var who), name: inner}\n"
    )
    text = (
        "launch:\n- arg: {name: who, default: outer}\n"
        "- let: {name: early, value: $(var who)}\n"
        "- group:\n    children:\n    - include: {file: $(dirname)/inner.launch.yaml, arg: [{name: who, value: g$(var who)}]}\n"
        "    - executable: {cmd: echo $(var leaked), name: in_group}\n"
        "- include: {file: $(dirname)/inner.launch.yaml}\n"
        "- executable: {cmd: echo $(var early) $(var leaked), name: after}\n"
    )
    processes = {p.name: p for p in plan_of(tmp_path, text, name="outer.launch.yaml").processes}
    inner = [p for p in plan_of(tmp_path, text, name="outer.launch.yaml").processes if p.name == "inner"]
    assert [p.arguments for p in inner] == [("gouter",), ("outer",)]  # the include arg, then 'who' as set
    assert processes["in_group"].arguments == ("gouter-let",)  # include is not scoped
    assert processes["after"].arguments == ("outer", "outer-let")  # the group was


# -- set_env -------------------------------------------------------------------------------------
# launch/actions/set_environment_variable.py SetEnvironmentVariable.execute writes
# context.environment; launch/actions/execute_local.py / descriptions/executable.py
# Executable.prepare: a process gets the context environment plus its own 'env' entries.
# Scoped groups restore it (group_action.py PushEnvironment/PopEnvironment).


def test_set_env_and_its_scope(tmp_path):
    text = (
        "launch:\n- set_env: {name: A, value: '1'}\n"
        "- group:\n    children:\n    - set_env: {name: B, value: '2'}\n    - executable: {cmd: x, name: inside}\n"
        "- executable: {cmd: x, name: outside, env: [{name: C, value: '3'}]}\n"
        "- set_env: {name: D, value: '$(env NOPE fallback)'}\n- executable: {cmd: x, name: last}\n"
    )
    processes = {p.name: p.environment for p in plan_of(tmp_path, text).processes}
    assert processes["inside"] == {"PATH": "/bin", "A": "1", "B": "2"}
    assert processes["outside"] == {"PATH": "/bin", "A": "1", "C": "3"}
    assert processes["last"] == {"PATH": "/bin", "A": "1", "D": "fallback"}


# -- node: params, param files, remaps -----------------------------------------------------------
# launch_ros/actions/node.py Node._get_node_command / Node._perform_substitutions: '--ros-args',
# '-r __node:=', '-r __ns:=', then per 'param' entry in order '--params-file <from>' or a
# generated file (_create_params_file_from_dict, keyed by the fully qualified node name when
# is_node_name_fully_specified() else '/**'), then '-r from:=to' per remap.
# launch_ros/utilities/evaluate_parameters.py + ParameterValue: text values are typed as YAML
# (int, float, bool, list) unless 'type' says otherwise.


def test_node_params_and_remaps(tmp_path):
    params = tmp_path / "p.yaml"
    params.write_text("/**:\n  ros__parameters: {k: 1}\n")
    # A list's items are typed one by one and must share a type (type_utils.perform_typed_substitution).
    text = (
        "launch:\n- arg: {name: r, default: '50'}\n"
        "- group:\n    children:\n    - push-ros-namespace: {namespace: ns1}\n"
        "    - node:\n        exec: /bin/true\n        name: n\n"
        f"        param: [{{from: {params}}}, {{name: rate, value: $(var r)}}, {{name: flag, value: 'true'}},"
        " {name: words, value: [\"$(var r)\", '7']}, {name: s, value: '7', type: str}]\n"
        "        remap: [{from: in, to: $(var r)/out}]\n"
    )
    (node,) = plan_of(tmp_path, text).processes
    assert node.parameters == (
        ParamFile(params),
        ParamDict({"rate": 50}),
        ParamDict({"flag": True}),
        ParamDict({"words": [50, 7]}),
        ParamDict({"s": "7"}),
    )
    command = node_command(node, ["/bin/true"], tmp_path / "gen")
    assert command[:6] == ["/bin/true", "--ros-args", "-r", "__node:=n", "-r", "__ns:=/ns1"]
    assert command[6:8] == ["--params-file", str(params)]
    assert command[-2:] == ["-r", "in:=50/out"]
    assert yaml.safe_load(Path(command[9]).read_text()) == {"/ns1/n": {"ros__parameters": {"rate": 50}}}


@pytest.mark.parametrize(
    "written, expected",
    [
        ("'50'", 50), ("'0.5'", 0.5), ("'1e3'", "1e3"), ("'0x10'", 16), ("'yes'", True), ("'Off'", False),
        ("'none'", "none"), ("''", ""), ("'[1, 2]'", [1, 2]), ("'a b'", "a b"), ("3", 3), ("true", True),
        ("['1', '2']", [1, 2]), ("[a, b]", ["a", "b"]),
    ],
)  # fmt: skip
def test_parameter_values_are_typed_by_yaml(tmp_path, written, expected):
    # launch/utilities/type_utils.py coerce_to_type (data_type None): '' stays '', else yaml.safe_load.
    text = f"launch:\n- node: {{exec: /bin/true, name: n, param: [{{name: p, value: {written}}}]}}\n"
    (node,) = plan_of(tmp_path, text).processes
    assert node.parameters == (ParamDict({"p": expected}),)
    assert type(node.parameters[0].values["p"]) is type(expected)


@pytest.mark.parametrize("written", ["'null'", "'{a: 1}'", "'2024-01-01'", "['1', '1.5']", "['1', a]", "'[1, a]'"])
def test_parameter_values_ros2_launch_refuses(tmp_path, written):
    # coerce_to_type: the YAML result must be a bool/int/float/str or a list of one such type
    # (is_instance_of_valid_type with can_be_str False).
    with pytest.raises(LaunchError):
        plan_of(tmp_path, f"launch:\n- node: {{exec: /bin/true, param: [{{name: p, value: {written}}}]}}\n")


# -- on_exit, sigterm_timeout, sigkill_timeout ---------------------------------------------------
# launch/actions/execute_process.py ExecuteProcess.parse: on_exit is compared, unsubstituted, with
# 'shutdown' (anything else: ValueError); sigterm_timeout / sigkill_timeout are read with
# get_attr(data_type=float) and compared '< 0.0'. launch_yaml/entity.py Entity.get_attr only checks
# types (is_instance_of with can_be_str): an int fails, a string passes the check and then fails
# the comparison (TypeError), so only a YAML float works. Without the attribute the value is the
# launch configuration of that name, default 5 (execute_local.py ExecuteLocal.__init__).


@pytest.mark.parametrize(
    "attribute, accepted",
    [
        ("on_exit: shutdown", True),
        ("on_exit: $(var how)", False),
        ("on_exit: respawn", False),
        ("sigterm_timeout: 30.0", True),
        ("sigterm_timeout: 30", False),
        ("sigterm_timeout: '30.0'", False),
        ("sigkill_timeout: -1.0", False),
    ],
)
def test_process_attributes_ros2_launch_accepts(tmp_path, attribute, accepted):
    text = f"launch:\n- arg: {{name: how, default: shutdown}}\n- executable: {{cmd: x, {attribute}}}\n"
    if accepted:
        plan_of(tmp_path, text)
    else:
        with pytest.raises(LaunchError):
            plan_of(tmp_path, text)


def test_timeouts_default_to_the_launch_configuration(tmp_path):
    text = "launch:\n- executable: {cmd: x, name: a}\n- executable: {cmd: x, name: b, sigterm_timeout: 9.5}\n"
    a, b = plan_of(tmp_path, text).processes
    assert (a.sigterm_timeout_s, a.sigkill_timeout_s, b.sigterm_timeout_s) == (5.0, 5.0, 9.5)
    a, b = plan_of(tmp_path, text, {"sigterm_timeout": "12", "sigkill_timeout": "2"}).processes
    assert (a.sigterm_timeout_s, a.sigkill_timeout_s, b.sigterm_timeout_s) == (12.0, 2.0, 9.5)


# -- the project's launch files: which node ends the run -----------------------------------------

#: Nodes whose death makes the run meaningless (``on_exit: shutdown``): the simulation, the
#: control, the run's data streams and their recording. The rest (viewer, RViz helpers, the
#: AirSim API bridge) are reported when they die and the run goes on, under both launchers.
ENDS_THE_RUN = {
    "physics", "flight_controller", "mission", "recorder", "rotor_drag", "sensors", "camera", "depth_noise", "lidar",
    "distance",
}  # fmt: skip
RUN_GOES_ON = {"web_viewer", "scene_markers", "depth_to_points", "airsim_api"}


def test_sim_launch_on_exit_per_node():
    everything = {"use_lidar": "true", "use_distance": "true", "use_rotor_drag": "true", "linear_drag": "false"}
    plan = load_launch_file(LAUNCH_DIR / "sim.launch.yaml", everything, dict(os.environ))
    shutdown = {p.name for p in plan.processes if p.shutdown_on_exit}
    assert shutdown == ENDS_THE_RUN
    assert {p.name for p in plan.processes} == ENDS_THE_RUN | RUN_GOES_ON
    timeouts = {p.name: (p.sigterm_timeout_s, p.sigkill_timeout_s) for p in plan.processes}
    # The recorder closes the bag, then writes recording.txt and trajectory.png by reading it (about
    # 7 s for 300 MB on a loaded 2-core machine): ros2 launch's 5 s would SIGTERM it mid-report.
    assert timeouts.pop("recorder") == (120.0, 5.0)
    assert set(timeouts.values()) == {(5.0, 5.0)}
