"""Sweep files: a base run plus axes to vary, expanded into a list of runs.

A sweep (``config/sweeps/<name>.yaml``)::

    name: wind_and_seeds           # optional (default: the file's stem)
    launch: sim.launch.yaml        # optional launch file
    base:                          # every run: launch arguments and node parameters
      scene: empty
      mission: square_5m
      use_camera: false
      physics.wind_enu_m_s: [0.0, 0.0, 0.0]
    grid:                          # every combination, in file order
      vehicle: [quad_x, hexa_x]
      seed: [0, 1]
    random:                        # N samples drawn from a seeded generator, crossed with the grid
      samples: 4
      seed: 7
      axes:
        physics.wind_enu_m_s: {uniform: [[-3, -3, 0], [3, 3, 0]]}
        imu.preset: {choice: [mpu6000, bmi088]}
        seed: {integers: [0, 1000]}
    repeat: 1                      # each run this many times (same parameters, own run id)
    run:                           # how every run is executed
      timeout_s: 600               # wall-clock limit of one attempt
      retries: 2                   # attempts after a crash or timeout
      export: true                 # export the bag to PNG/NPY/CSV (aerial_sim export)
      plots: false                 # draw trajectory.png, xy_over_time.png, top_view.png per run (or later: --draw-plots)
      cpus: 1                      # CPUs a run declares (a Ray task's num_cpus)
      pin_cpus: false              # local backend: each run on `cpus` cores of its own
      warm: true                   # fly runs in a graph already running (false: launch each)
      compose: true                # the graph's nodes in one process (aerial_sim launch --compose; false: one each)

A key without a dot is an argument of the launch file (``scene``, ``vehicle``,
``mission``, ``seed``, ``use_rotor_drag`` ...); ``node.parameter`` is a ROS
parameter of one node of the graph (``physics.wind_enu_m_s``,
``camera.width``, ``camera.rate_hz``, ``depth_noise.stereo_geometry``,
``gps.preset`` ...). Every key and value is checked when the file is loaded,
before anything starts; a bad one is a :class:`SweepError` naming the file and
the key, e.g. ``wind.yaml: grid.physics.wind: unknown parameter of node 'physics'``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import yaml

from aerial_sim.config import ParamsError, params_from_mapping, require, require_positive
from aerial_sim.paths import package_share, resolve_config

#: Launch arguments the batch sets itself for every run.
RESERVED_ARGUMENTS = {
    "lockstep": "every batch run is in lockstep",
    "viewer": "batch runs are headless",
    "run_dir": "each run gets its own folder under --out",
    "clock_speed": "lockstep runs as fast as the machine allows",
}
#: Launch arguments that name a config file, and where it lives.
CONFIG_ARGUMENTS = {"scene": "scenes", "vehicle": "vehicles", "mission": "missions"}
TOP_LEVEL_KEYS = ("name", "launch", "base", "grid", "random", "repeat", "run")
DISTRIBUTIONS = ("uniform", "integers", "choice")


class SweepError(ValueError):
    """A sweep file is malformed; the message names the file and the key."""


@dataclass(frozen=True)
class RunOptions:
    """How each run of a sweep is executed (the ``run:`` section; defaults here only)."""

    #: Wall-clock limit of one attempt, s; a run still going then is killed and retried.
    timeout_s: float = 900.0
    #: Further attempts after a crash or a timeout.
    retries: int = 2
    #: Export each bag to a dataset folder (PNG/NPY/CSV) after the run.
    export: bool = True
    #: Draw each run's three PNG plots (trajectory, xy over time, top view) in its post-processing. Off by
    #: default: a farm's runs are read as data, and the plots were a sixth of a warm smoke batch's CPU (0.3 CPU s a
    #: run, matplotlib's import once per post-processing process); ``aerial_sim batch SWEEP --draw-plots [RUN_ID ...]``
    #: draws them for the runs one looks at (doc/batch.md).
    plots: bool = False
    #: CPUs one run declares (the Ray task's ``num_cpus``).
    cpus: float = 1.0
    #: Local backend: run each launch on ``cpus`` cores of its own (Linux affinity), disjoint from
    #: the other runs' while there are enough; a run beyond that shares the cores left. Runs' timing
    #: then does not depend on their neighbours, and throughput per core can be measured.
    pin_cpus: bool = False
    #: Fly runs in a graph that is already running where they can (:mod:`aerial_sim.batch.warm`):
    #: each worker keeps its launch for the next run whose parameters do not change the graph's shape.
    #: False launches every run afresh (a *cold* run).
    warm: bool = True
    #: Run the graph's physics, sensors, controller, mission, recorder (and rotor drag) nodes in one process
    #: with one executor (``aerial_sim launch --compose``, :mod:`aerial_sim.nodes.container`): same nodes,
    #: topics, parameters and bags, less CPU per simulated second, more runs per hour where the cores are busy
    #: (doc/scale.md). False: one process per node, as ``tools/dev.sh sim`` runs them: a single run on idle
    #: cores finishes sooner.
    compose: bool = True
    #: After asking a run to stop, wait this long before killing what is left, s.
    stop_grace_s: float = 20.0
    #: A run whose folder (bag, logs, outputs) has not changed for this long is hung: its
    #: processes' stacks go to its log, it is stopped and retried (:mod:`aerial_sim.batch.hangs`), s.
    stall_timeout_s: float = 120.0
    #: A run still going this long after its mission wrote metrics.json (landed) is hung too, s.
    stop_timeout_s: float = 60.0

    def __post_init__(self):
        require_positive(self, "timeout_s", "cpus", "stop_grace_s", "stall_timeout_s", "stop_timeout_s")
        require(self.retries >= 0, f"retries must be >= 0, got {self.retries}")

    @property
    def max_attempts(self) -> int:
        return self.retries + 1


@dataclass(frozen=True)
class RunSpec:
    """One run of a sweep: its launch arguments and node parameters."""

    index: int
    #: Every swept or fixed key of this run (``scene``, ``physics.wind_enu_m_s`` ...) -> value.
    parameters: dict[str, Any]
    repeat: int = 0

    @property
    def run_id(self) -> str:
        """``0003-1a2b3c4d``: the index (readable order) and a digest of the parameters (stable)."""
        return f"{self.index:04d}-{parameters_digest(self.parameters, self.repeat)[:8]}"

    @property
    def launch_arguments(self) -> dict[str, str]:
        """The launch arguments as ``aerial_sim launch`` takes them (booleans as true/false)."""
        return {k: launch_text(v) for k, v in self.parameters.items() if "." not in k}

    @property
    def node_parameters(self) -> dict[str, dict[str, Any]]:
        """``{node: {parameter: value}}`` from the ``node.parameter`` keys."""
        nodes: dict[str, dict[str, Any]] = {}
        for key, value in self.parameters.items():
            if "." in key:
                node, name = key.split(".", 1)
                nodes.setdefault(node, {})[name] = value
        return nodes


@dataclass(frozen=True)
class Sweep:
    name: str
    launch_file: Path
    runs: tuple[RunSpec, ...]
    #: The keys that vary across runs, in file order (the summary plot's axes).
    axes: tuple[str, ...]
    #: Every key the runs set, in file order (the manifest's parameter columns).
    keys: tuple[str, ...]
    options: RunOptions = field(default_factory=RunOptions)
    source: Path | None = None


def parameters_digest(parameters: Mapping[str, Any], repeat: int = 0) -> str:
    """SHA-256 of the parameters in canonical JSON: the identity of a run across re-runs."""
    canonical = json.dumps({"parameters": parameters, "repeat": repeat}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def launch_text(value: Any) -> str:
    """A value as a launch argument: ``True`` -> ``true``, ``2.0`` -> ``2.0``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def load_sweep(path: str | Path, validate_node_parameter: Callable | None = None) -> Sweep:
    """Read, check and expand the sweep file at ``path`` (a path, or a name under ``config/sweeps/``).

    ``validate_node_parameter(node, values) -> values`` checks one node's
    parameters of one run and returns them converted for a params file; the
    default is :func:`aerial_sim.batch.nodeparams.validate_node_parameters`.
    """
    path = resolve_config(str(path), "sweeps")
    where = Path(path).name
    try:
        document = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError as error:
        available = sorted(p.stem for p in Path(path).parent.glob("*.yaml"))
        raise SweepError(f"sweep '{path}': file not found (available: {', '.join(available) or 'none'})") from error
    except yaml.YAMLError as error:
        raise SweepError(f"{where}: not valid YAML: {error}") from error
    return expand_sweep(document, where=where, default_name=Path(path).stem, source=Path(path),
                        validate_node_parameter=validate_node_parameter)


def expand_sweep(
    document: Any,
    where: str = "sweep",
    default_name: str = "sweep",
    source: Path | None = None,
    validate_node_parameter: Callable | None = None,
) -> Sweep:
    """Check a parsed sweep document and expand it into runs (see the module docstring)."""
    if not isinstance(document, Mapping):
        raise SweepError(f"{where}: expected a mapping with keys {', '.join(TOP_LEVEL_KEYS)}")
    for key in document:
        if key not in TOP_LEVEL_KEYS:
            raise SweepError(f"{where}: {key}: unknown key (known: {', '.join(TOP_LEVEL_KEYS)})")
    name = str(document.get("name") or default_name)
    launch_file = _launch_file(document.get("launch", "sim.launch.yaml"), where)
    arguments = _declared_arguments(launch_file)
    checker = _KeyChecker(where, launch_file.name, arguments)
    base = _mapping(document.get("base"), f"{where}: base")
    grid = _mapping(document.get("grid"), f"{where}: grid")
    random_section = _mapping(document.get("random"), f"{where}: random")
    for key, value in base.items():
        checker.check(f"base.{key}", key, value)
    for key, values in grid.items():
        checker.check_key(f"grid.{key}", key)
        if not isinstance(values, list) or not values:
            raise SweepError(f"{where}: grid.{key}: expected a non-empty list of values")
        for i, value in enumerate(values):
            checker.check(f"grid.{key}[{i}]", key, value)
    samples = _random_samples(random_section, checker, where)
    sampled_keys = list(samples[0]) if samples else []
    for key in [*grid, *sampled_keys]:
        if key in base:
            raise SweepError(f"{where}: {key}: set in base and varied as an axis (keep one)")
    duplicate = set(grid) & set(sampled_keys)
    if duplicate:
        raise SweepError(f"{where}: {sorted(duplicate)[0]}: in both grid and random.axes (keep one)")
    repeat = document.get("repeat", 1)
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise SweepError(f"{where}: repeat: expected an integer >= 1, got {repeat!r}")
    try:
        options = params_from_mapping(RunOptions, document.get("run"), where="run")
    except ParamsError as error:
        raise SweepError(f"{where}: {error}") from error

    validate = validate_node_parameter or _default_node_validator()
    runs = []
    grid_points = [dict(zip(grid, combination)) for combination in itertools.product(*grid.values())]
    for point in grid_points:
        for sample in samples or [{}]:
            parameters = {**base, **point, **sample}
            parameters = _checked_node_parameters(parameters, validate, where, len(runs))
            for r in range(repeat):
                runs.append(RunSpec(index=len(runs), parameters=parameters, repeat=r))
    keys = tuple(dict.fromkeys([*base, *grid, *sampled_keys]))
    axes = tuple(k for k in dict.fromkeys([*grid, *sampled_keys]) if len({_hashable(r.parameters[k]) for r in runs}) > 1)
    return Sweep(name, launch_file, tuple(runs), axes, keys, options, source)


class _KeyChecker:
    """Checks one key (launch argument or ``node.parameter``) and its value, naming where it came from."""

    def __init__(self, where: str, launch_name: str, arguments: dict[str, Any]):
        self.where = where
        self.launch_name = launch_name
        self.arguments = arguments

    def check(self, label: str, key: str, value: Any) -> None:
        self.check_key(label.split("[")[0].split(" (")[0], key)
        self.check_value(label, key, value)

    def check_key(self, label: str, key: str) -> None:
        if not isinstance(key, str) or not key:
            raise SweepError(f"{self.where}: {label}: keys must be non-empty strings")
        if "." in key:
            node, _, parameter = key.partition(".")
            if not node or not parameter:
                raise SweepError(f"{self.where}: {label}: expected node.parameter")
            return
        if key in RESERVED_ARGUMENTS:
            raise SweepError(f"{self.where}: {label}: set by aerial_sim batch ({RESERVED_ARGUMENTS[key]})")
        if key not in self.arguments:
            known = ", ".join(sorted(a for a in self.arguments if a not in RESERVED_ARGUMENTS))
            raise SweepError(f"{self.where}: {label}: not an argument of {self.launch_name} (known: {known}; "
                             "node parameters are written node.parameter)")

    def check_value(self, label: str, key: str, value: Any) -> None:
        if "." in key:
            if not _is_plain_value(value):
                raise SweepError(f"{self.where}: {label}: expected a number, string, boolean or list of them")
            return
        if isinstance(value, (list, dict)) or value is None:
            raise SweepError(f"{self.where}: {label}: a launch argument takes one value, got {value!r}")
        self._check_argument_value(label, key, value)

    def _check_argument_value(self, label: str, key: str, value: Any) -> None:
        default = self.arguments[key]
        if default in ("true", "false") and not (isinstance(value, bool) or str(value).lower() in ("true", "false")):
            raise SweepError(f"{self.where}: {label}: expected true or false, got {value!r}")
        if key == "seed" and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise SweepError(f"{self.where}: {label}: expected an integer >= 0, got {value!r}")
        if key == "mission" and str(value).strip().lower() in ("", "none"):
            raise SweepError(f"{self.where}: {label}: a batch run needs a mission that lands (the run ends with it)")
        if key in CONFIG_ARGUMENTS:
            try:
                _load_config(key, str(value))
            except (ParamsError, OSError, ValueError) as error:
                raise SweepError(f"{self.where}: {label}: {error}") from error


def _load_config(kind: str, value: str) -> None:
    """Load a scene, vehicle or mission file the way its node will (errors name the field)."""
    if kind == "mission":
        from aerial_sim.control.mission import load_mission

        load_mission(value)
    elif kind == "vehicle":
        from aerial_sim.vehicles.multirotor import load_vehicle

        load_vehicle(value)
    else:
        path = resolve_config(value, CONFIG_ARGUMENTS[kind])
        if not Path(path).is_file():
            available = sorted(p.stem for p in Path(path).parent.glob("*.yaml"))
            raise ParamsError(f"{kind} '{value}': {path} not found (available: {', '.join(available)})")


def _random_samples(section: Mapping[str, Any], checker: _KeyChecker, where: str) -> list[dict[str, Any]]:
    """Draw ``random.samples`` points from ``random.axes`` with ``random.seed`` (numpy's PCG64)."""
    if not section:
        return []
    for key in section:
        if key not in ("samples", "seed", "axes"):
            raise SweepError(f"{where}: random.{key}: unknown key (known: samples, seed, axes)")
    samples, seed = section.get("samples"), section.get("seed", 0)
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise SweepError(f"{where}: random.samples: expected an integer >= 1, got {samples!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise SweepError(f"{where}: random.seed: expected an integer >= 0, got {seed!r}")
    axes = _mapping(section.get("axes"), f"{where}: random.axes")
    if not axes:
        raise SweepError(f"{where}: random.axes: name at least one axis to sample")
    import numpy as np

    rng = np.random.default_rng(seed)
    for key in axes:
        checker.check_key(f"random.axes.{key}", key)
    draws = {key: _draw_axis(rng, spec, samples, f"{where}: random.axes.{key}") for key, spec in axes.items()}
    points = [{key: values[i] for key, values in draws.items()} for i in range(samples)]
    for i, point in enumerate(points):
        for key, value in point.items():
            checker.check(f"random.axes.{key} (sample {i})", key, value)
    return points


def _draw_axis(rng, spec: Any, count: int, label: str) -> list[Any]:
    if not isinstance(spec, Mapping) or len(spec) != 1 or next(iter(spec)) not in DISTRIBUTIONS:
        raise SweepError(f"{label}: expected one of {{uniform: [low, high]}}, {{integers: [low, high]}}, {{choice: [...]}}")
    (kind, arguments), = spec.items()
    if kind == "choice":
        if not isinstance(arguments, list) or not arguments:
            raise SweepError(f"{label}.choice: expected a non-empty list")
        return [arguments[int(i)] for i in rng.integers(0, len(arguments), size=count)]
    if not isinstance(arguments, list) or len(arguments) != 2:
        raise SweepError(f"{label}.{kind}: expected [low, high]")
    low, high = arguments
    if kind == "integers":
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (low, high)) or high < low:
            raise SweepError(f"{label}.integers: expected integers low <= high, got {arguments!r}")
        return [int(v) for v in rng.integers(low, high + 1, size=count)]
    vector = isinstance(low, list)
    lows, highs = (low, high) if vector else ([low], [high])
    if (not isinstance(highs, list) or len(lows) != len(highs) or not lows
            or not all(_is_number(v) for v in [*lows, *highs]) or any(h < l for l, h in zip(lows, highs))):
        raise SweepError(f"{label}.uniform: expected numbers (or equal-length lists) low <= high, got {arguments!r}")
    draws = rng.uniform(lows, highs, size=(count, len(lows)))
    return [[float(v) for v in row] if vector else float(row[0]) for row in draws]


def _checked_node_parameters(parameters: dict[str, Any], validate: Callable, where: str, index: int) -> dict[str, Any]:
    """Validate each node's parameters of one run; values come back converted (floats stay floats)."""
    by_node: dict[str, dict[str, Any]] = {}
    for key, value in parameters.items():
        if "." in key:
            node, name = key.split(".", 1)
            by_node.setdefault(node, {})[name] = value
    checked = dict(parameters)
    for node, values in by_node.items():
        try:
            converted = validate(node, values)
        except ParamsError as error:
            raise SweepError(f"{where}: run {index}: {error}") from error
        for name, value in converted.items():
            checked[f"{node}.{name}"] = value
    return checked


def _default_node_validator() -> Callable:
    from aerial_sim.batch.nodeparams import validate_node_parameters

    return validate_node_parameters


def _launch_file(value: Any, where: str) -> Path:
    if not isinstance(value, str) or not value:
        raise SweepError(f"{where}: launch: expected a launch file name or path")
    path = Path(value).expanduser()
    if not path.is_file():
        path = package_share() / "launch" / value
    if not path.is_file():
        raise SweepError(f"{where}: launch: launch file not found: {value}")
    return path


def _declared_arguments(launch_file: Path) -> dict[str, str | None]:
    from aerial_sim.launcher.description import declared_arguments
    from aerial_sim.launcher.errors import LaunchError

    try:
        return {a.name: a.default for a in declared_arguments(launch_file)}
    except LaunchError as error:
        raise SweepError(f"launch: {error}") from error


def _mapping(value: Any, label: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SweepError(f"{label}: expected a mapping, got {type(value).__name__}")
    return dict(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_plain_value(value: Any) -> bool:
    if isinstance(value, list):
        return all(_is_plain_value(v) and not isinstance(v, list) for v in value)
    return isinstance(value, (str, bool, int)) or (isinstance(value, float) and math.isfinite(value))


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value
