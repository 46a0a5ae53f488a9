#!/usr/bin/env bash
# Scaling of `aerial_sim batch` with the worker count on a lent many-core machine without network
# (tools/batch16/prepare.sh builds what it needs): installs the carried wheels, compiles the numba kernels,
# then runs `benchmarks/batch.py` warm in one process per graph (run.warm, run.compose: the defaults) with
# each worker count, every worker flying as many runs, and prints runs/h, simulated s per wall s, CPU per
# simulated second (all in, in flight) and parallel efficiency per worker count.
#
#   bash .devcarry/batch16_run.sh OUTDIR       (device: OUTDIR=$OUT; needs wheels<pytag>.tar.xz and proj/ beside it)
#   BATCH16_WORKERS="1 2 4 8 16"   worker counts, in order
#   BATCH16_RUNS_PER_WORKER=2      runs each worker flies per worker count (one launch, then warm runs)
#   BATCH16_LIMIT_S=400            the benchmark is stopped after this (what finished is still summarised)
#   BATCH16_PROJ=DIR               the project checkout to run (default: prepare.sh's copy, proj/ beside this script)
#   BATCH16_BENCH_ARGS="--before DIR"  more arguments of benchmarks/batch.py (e.g. another checkout's copy, side by side)
#   PYTHON=python3                 interpreter (the device's has numpy, numba, scipy, matplotlib, pyyaml, ...)
#
# Sweep (benchmarks/batch.py): scene empty, mission hop_1m (10.6 s simulated), no camera: IMU, barometer,
# magnetometer, GPS, controller, mission, recording and export (plots as the checkout's run.plots default),
# as config/sweeps/smoke.yaml;
# run.retries 0 (a failure is counted, not retried), cpus 1, unpinned.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUTD=$(mkdir -p "${1:?OUTDIR}" && cd "$1" && pwd)
WORKERS=${BATCH16_WORKERS:-"1 2 4 8 16"}
PER_WORKER=${BATCH16_RUNS_PER_WORKER:-2}
LIMIT_S=${BATCH16_LIMIT_S:-400}
PROJ=${BATCH16_PROJ:-$HERE/proj}   # the project's sources (prepare.sh's copy; or a checkout: BATCH16_PROJ=$PWD)
PY=${PYTHON:-python3}
WORK=${BATCH16_WORK:-/tmp/batch16}
T0=$(date +%s)
exec > >(tee -a "$OUTD/batch16.log") 2>&1
say() { echo "[$(( $(date +%s) - T0 ))s] $*"; }

say "host: $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo), load $(cut -d' ' -f1-3 /proc/loadavg)"
df -h /dev/shm /tmp | sed 's/^/  /'
TAG=$($PY -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
say "python: $($PY -c 'import sys; print(sys.executable, sys.version.split()[0])')"
$PY - <<'EOF'
import importlib.metadata as md
found = []
for name in "numpy numba llvmlite scipy matplotlib pyyaml msgpack tqdm pillow typing-extensions psutil".split():
    try:
        found.append(f"{name} {md.version(name)}")
    except md.PackageNotFoundError:
        found.append(f"{name} MISSING")
print("  device packages:", ", ".join(found))
EOF

# 1. Wheels: unpack the xz tarball, zip each folder back into its wheel, install under one prefix.
rm -rf "$WORK"; mkdir -p "$WORK/stage" "$WORK/wheels"
$PY - "$HERE/wheels$TAG.tar.xz" "$WORK/stage" "$WORK/wheels" <<'EOF' || { echo "unpacking failed"; exit 2; }
import os, sys, tarfile, zipfile
from pathlib import Path
archive, stage, wheels = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
with tarfile.open(archive, "r:xz") as tar:
    tar.extractall(stage, filter="data")
count = 0
for folder in sorted(p for p in stage.iterdir() if p.is_dir()):
    with zipfile.ZipFile(wheels / f"{folder.name}.whl", "w", zipfile.ZIP_STORED) as whl:
        files = sorted(p for p in folder.rglob("*") if p.is_file())
        # .dist-info last, as wheel tools write it
        for path in sorted(files, key=lambda p: (".dist-info/" in p.relative_to(folder).as_posix(), str(p))):
            whl.write(path, path.relative_to(folder).as_posix())
    count += 1
print(f"  {count} wheels rebuilt")
EOF
say "installing"
$PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --disable-pip-version-check \
  --prefix "$WORK/prefix" "$WORK/wheels"/*.whl 2>&1 | grep -v "is not on PATH\|Consider adding this" || true
SITE=$(dirname "$(find "$WORK/prefix" -maxdepth 5 -type d -name rclpy -path '*-packages/rclpy' | head -1)")
[ -d "$SITE" ] || { say "rclpy not installed"; exit 2; }
LIBS="$WORK/prefix/lib"
for d in "$SITE"/ros_*.libs; do LIBS="$LIBS:$d"; done
export PYTHONPATH="$SITE:$PROJ/src"
export LD_LIBRARY_PATH="$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export AMENT_PREFIX_PATH="$WORK/prefix"
export AERIAL_SIM_SHARE="$PROJ"
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
export PYTHONUNBUFFERED=1
export _ROS_WHEELS_BOOTSTRAP_COMPLETE=1
say "installed: site $SITE ($(du -sh "$WORK/prefix" | cut -f1))"
# Bytecode, once, for the installed wheels (pip ran with --no-compile) and the project's copy (carried without
# __pycache__): where Python may not write it itself (PYTHONDONTWRITEBYTECODE=1, as in this project's sessions),
# every process of every run compiled rclpy, the message packages and aerial_sim again at each start (doc/scale.md,
# "Imports": 0.71 against 0.97 CPU s for the node container alone).
b0=$(date +%s.%N)
$PY -m compileall -q -j 0 "$SITE" "$PROJ/src" >/dev/null 2>&1 || say "  (bytecode: some files not compiled)"
say "  bytecode written in $(awk -v a="$b0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s wall"
$PY -c "
import rclpy, std_msgs.msg, sensor_msgs.msg, mcap, rosbags, fcl, trimesh, fluids, pymap3d, aerial_sim.jit
rclpy.init(); n = rclpy.create_node('batch16_check'); p = n.create_publisher(std_msgs.msg.String, 'x', 1)
print('  rclpy ok:', rclpy.get_rmw_implementation_identifier(), '; numba kernels compiled:', aerial_sim.jit.COMPILED)
n.destroy_node(); rclpy.shutdown()
" || { say "import check failed"; exit 2; }

# 2. Compile the batched physics kernels once (`aerial_sim precompile` less the camera's: no camera here).
say "precompile (batched physics only)"
p0=$(date +%s.%N)
$PY -c "from aerial_sim.cli.precompile import compile_batched_physics as c; c()" 2>&1 | tail -3
p1=$(date +%s.%N)
say "  precompile: $(awk -v a="$p0" -v b="$p1" 'BEGIN{printf "%.1f", b-a}') s wall"

# 3. The benchmark: every worker count in one invocation, one after the other (results.json after each).
say "bench batch: workers $WORKERS, $PER_WORKER runs per worker, warm, one process per graph"
# shellcheck disable=SC2086
timeout -s INT "$LIMIT_S" $PY "$PROJ/benchmarks/batch.py" --modes warm --layouts one --workers $WORKERS \
  --runs-per-worker "$PER_WORKER" --no-record --json "$OUTD/results.json" --keep "$WORK/out" ${BATCH16_BENCH_ARGS:-} 2>&1 \
  | tr '\r' '\n' \
  | grep -v "^sweep:" | tee "$OUTD/bench.out"
say "bench exit ${PIPESTATUS[0]}; load $(cut -d' ' -f1-3 /proc/loadavg)"

# 4. The table again from results.json (also when the benchmark was stopped before its own table).
$PY "$PROJ/benchmarks/batch.py" --summarise "$OUTD/results.json" | tee "$OUTD/summary.txt"

# 5. What comes back: this log, the table, and the manifests and run logs (no bags, datasets or plots).
tar -C "$WORK/out" -czf "$OUTD/batches.tar.gz" --exclude='bag' --exclude='log_bag' --exclude='dataset' --exclude='ros' \
  --exclude='*.png' --exclude='track.csv' --exclude='commanded_path.csv' . 2>/dev/null
say "done; $(du -sh "$OUTD/batches.tar.gz" | cut -f1) of results"
