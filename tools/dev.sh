#!/usr/bin/env bash
# aerial_sim developer entry point for a machine with no system ROS 2 install.
#
#   tools/dev.sh sim  [launch args...]   set up .venv if needed, then run the full simulation
#   tools/dev.sh test [pytest args...]   set up .venv if needed, then run the whole test suite
#   tools/dev.sh bench NAME              set up .venv if needed, then run benchmarks/NAME.py
#   tools/dev.sh docs [sphinx args...]   set up .venv if needed, then build doc/ into doc/_build/html
#   tools/dev.sh run CMD...              run any command inside the project environment
#
# The set-up is idempotent: the virtual environment is rebuilt only when
# tools/requirements.txt changes, so the second run starts in about a second.
# test, bench and run also install the optional tools/requirements-ray.txt (the Ray backend of
# `aerial_sim batch`), and test, docs and run tools/requirements-docs.txt (Sphinx + MyST), again
# only when that file changes.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo/.venv"
requirements="$repo/tools/requirements.txt"
stamp="$venv/.requirements.sha256"
python_bin="${PYTHON:-python3}"

ensure_venv() {
  local wanted
  wanted="$(sha256sum "$requirements" | cut -d' ' -f1)"
  if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$wanted" ]]; then
    return
  fi
  echo "[aerial_sim] setting up $venv (first run, or tools/requirements.txt changed)..." >&2
  "$python_bin" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip >&2 || true
  "$venv/bin/python" -m pip install --quiet -r "$requirements" >&2
  # Make the package importable from the source tree (no build step): a .pth file
  # plus an `aerial_sim` command, so edits take effect immediately.
  local site
  site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$repo/src" > "$site/aerial_sim_src.pth"
  printf '#!/usr/bin/env bash\nexec "%s/bin/python" -m aerial_sim "$@"\n' "$venv" > "$venv/bin/aerial_sim"
  chmod +x "$venv/bin/aerial_sim"
  echo "$wanted" > "$stamp"
  echo "[aerial_sim] environment ready." >&2
}

# numba kernels (every module with an @njit) compiled once per change of their sources (size and mtime,
# which numba's own cache index checks too), so a fresh clone's first launch does not spend its first 20-80 s compiling.
ensure_compiled() {
  local compiled_stamp="$venv/.kernels.stamp" wanted
  wanted="$(cd "$repo" && { grep -rl --include='*.py' '@njit' src/aerial_sim; echo src/aerial_sim/cli/precompile.py; } \
    | xargs stat -c '%n %s %Y' | sort | sha256sum | cut -d' ' -f1)"
  [[ -f "$compiled_stamp" && "$(cat "$compiled_stamp")" == "$wanted" ]] && return
  echo "[aerial_sim] compiling the numba kernels (once per change of their sources, about 40 s on 2 cores)..." >&2
  "$venv/bin/python" -m aerial_sim precompile >&2 && echo "$wanted" > "$compiled_stamp"
}

# The package's bytecode, written for every changed source: where Python does not write it itself
# (PYTHONDONTWRITEBYTECODE=1, as in this project's CI sessions, or a read-only checkout) every process would
# compile each aerial_sim module it imports again: 0.2 CPU s more for the batch's node container, 0.3 for a
# camera (tools/dev.sh bench imports). Python still checks each file's size and mtime, so an edited module is
# never run from stale bytecode. Checking an unchanged tree costs about 0.1 CPU s.
ensure_bytecode() {
  "$venv/bin/python" -m compileall -q "$repo/src/aerial_sim" >/dev/null 2>&1 || true
}

# Optional extras (Ray for `aerial_sim batch --backend ray`): installed into the same venv, once per
# change of tools/requirements-ray.txt.
ensure_optional() {
  local optional="$repo/tools/requirements-ray.txt" optional_stamp="$venv/.requirements-ray.sha256" wanted
  wanted="$(sha256sum "$optional" | cut -d' ' -f1)"
  if [[ -f "$optional_stamp" && "$(cat "$optional_stamp")" == "$wanted" ]]; then
    return
  fi
  echo "[aerial_sim] installing optional packages (tools/requirements-ray.txt)..." >&2
  if "$venv/bin/python" -m pip install --quiet -r "$optional" >&2; then
    echo "$wanted" > "$optional_stamp"
  else
    echo "[aerial_sim] optional packages could not be installed: the Ray backend and its test are unavailable." >&2
  fi
}

# Documentation tools (Sphinx + MyST): installed into the same venv, once per change of
# tools/requirements-docs.txt. Required: the suite builds the docs (test/test_docs.py).
ensure_docs() {
  local docs="$repo/tools/requirements-docs.txt" docs_stamp="$venv/.requirements-docs.sha256" wanted
  wanted="$(sha256sum "$docs" | cut -d' ' -f1)"
  if [[ -f "$docs_stamp" && "$(cat "$docs_stamp")" == "$wanted" ]]; then
    return
  fi
  echo "[aerial_sim] installing the documentation tools (tools/requirements-docs.txt)..." >&2
  "$venv/bin/python" -m pip install --quiet -r "$docs" >&2
  echo "$wanted" > "$docs_stamp"
}

# The web viewer's browser test needs Chromium (Debian's package; a browser download
# of its own is not possible here). Installed once when we may; otherwise that test skips.
ensure_browser() {
  if command -v chromium >/dev/null 2>&1 || [[ "${AERIAL_SIM_NO_BROWSER:-}" == 1 ]]; then
    return
  fi
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "[aerial_sim] installing Chromium for the web-viewer browser test (once)..." >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >&2 \
      || echo "[aerial_sim] Chromium could not be installed; the browser test will skip." >&2
  else
    echo "[aerial_sim] no Chromium (install Debian's 'chromium' package): the browser test will skip." >&2
  fi
}

# Keep DDS discovery on this machine: no multicast leaves the loopback interface.
export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"
export AERIAL_SIM_SHARE="${AERIAL_SIM_SHARE:-$repo}"
export PYTHONUNBUFFERED=1

command="${1:-}"
shift || true
case "$command" in
  sim)
    ensure_venv
    ensure_compiled
    ensure_bytecode
    # One folder per run for the bag, the mission's track and plots, and the summary.
    export AERIAL_SIM_RUN_DIR="${AERIAL_SIM_RUN_DIR:-$repo/runs/$(date +%Y%m%d-%H%M%S)}"
    echo "[aerial_sim] run folder: $AERIAL_SIM_RUN_DIR" >&2
    exec "$venv/bin/aerial_sim" launch sim.launch.yaml "$@"
    ;;
  test)
    ensure_venv
    ensure_compiled
    ensure_bytecode
    ensure_optional
    ensure_docs
    ensure_browser
    cd "$repo"
    # Run test/ unless the arguments name test files or directories themselves. The whole suite runs in
    # three pytest-xdist workers where the machine has 2 cores or more (each its own ROS_DOMAIN_ID and
    # ports, test/conftest.py): its graphs fly in real time and wait on I/O and timers, so two workers kept
    # 2 cores only about 70 % busy (~900 CPU s in 10-11 min); a third fills the gaps
    # (doc/install.md). AERIAL_SIM_TEST_WORKERS sets how many (1: one process).
    targets=(test)
    workers=()
    default_workers=1
    (( $(nproc 2>/dev/null || echo 1) >= 2 )) && default_workers=3
    # loadfile: a file's tests (and its module fixtures) stay on one worker; the longest files go first (test/scheduling.py).
    [[ "${AERIAL_SIM_TEST_WORKERS:-$default_workers}" != 1 ]] \
      && workers=(-n "${AERIAL_SIM_TEST_WORKERS:-$default_workers}" --dist loadfile --no-loadscope-reorder)
    for arg in "$@"; do [[ "$arg" != -* && -e "${arg%%::*}" ]] && targets=() && workers=(); done
    # A whole-suite run leaves its JUnit report in test-report.xml (git-ignored): every test's seconds, from
    # which `.venv/bin/python test/scheduling.py test-report.xml` refreshes test/durations.json.
    report=()
    [[ ${#targets[@]} -gt 0 ]] && report=(--junitxml="$repo/test-report.xml")
    exec "$venv/bin/python" -m pytest "${workers[@]}" "${report[@]}" "${targets[@]}" "$@"
    ;;
  bench)
    ensure_venv
    ensure_compiled
    ensure_bytecode
    ensure_optional
    name="${1:?usage: tools/dev.sh bench NAME [args...]}"
    shift
    exec "$venv/bin/python" "$repo/benchmarks/$name.py" "$@"
    ;;
  docs)
    ensure_venv
    ensure_docs
    cd "$repo"
    # -W --keep-going: every warning is an error, all of them listed (test/test_docs.py runs the same).
    exec "$venv/bin/python" -m sphinx -b html -j auto -W --keep-going doc doc/_build/html "$@"
    ;;
  run)
    ensure_venv
    ensure_bytecode
    ensure_optional
    ensure_docs
    PATH="$venv/bin:$PATH" exec "$@"
    ;;
  *)
    sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
