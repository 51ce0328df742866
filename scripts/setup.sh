#!/usr/bin/env bash
# Set up everything robot_memory needs, idempotently: a virtual environment with ROS 2
# Kilted from PyPI wheels, this package's msg/srv built with colcon, and the
# `robot-memory` command. A second run skips what is already done.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
WS="$ROOT/.ros_ws"
cd "$ROOT"

step() { printf 'setup: %-34s %s\n' "$1" "$2"; }
digest() { cat "$@" | sha256sum | cut -d' ' -f1; }

# 1. Python 3.11: the ROS 2 wheels are built for CPython 3.11 only.
PYTHON="${PYTHON:-}"
if [ -z "$PYTHON" ]; then
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null &&
       "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
      PYTHON="$(command -v "$candidate")"; break
    fi
  done
fi
if [ -z "$PYTHON" ]; then
  echo "setup: need Python 3.11 (the ROS 2 Kilted wheels on PyPI are cp311); set PYTHON=" >&2
  exit 1
fi
if [ -x "$VENV/bin/python" ]; then
  step "virtual environment" "skipped (exists)"
else
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  step "virtual environment" "created with $PYTHON"
fi

# 2. Python packages, reinstalled only when the pinned lists change.
REQS=(requirements/ros.txt requirements/python.txt)
want="$(digest "${REQS[@]}")"
if [ "$(cat "$VENV/.requirements.sha256" 2>/dev/null)" = "$want" ]; then
  step "ROS 2 wheels and Python packages" "skipped (up to date)"
else
  "$VENV/bin/python" -m pip install --quiet $(printf -- '-r %s ' "${REQS[@]}")
  echo "$want" > "$VENV/.requirements.sha256"
  step "ROS 2 wheels and Python packages" "installed"
fi

# 3. The wheels' CMake exports name the include paths of the machine that built them;
#    point them at this interpreter's headers and numpy's.
py_include="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
np_include="$("$VENV/bin/python" -c 'import numpy; print(numpy.get_include())')"
stale="$(grep -rlF '/opt/python/cp311-cp311' "$VENV/share" --include='*.cmake' || true)"
if [ -z "$stale" ]; then
  step "wheel CMake paths" "skipped (already local)"
else
  echo "$stale" | xargs sed -i \
    -e "s#/opt/python/cp311-cp311/lib/python3.11/site-packages/numpy/_core/include#$np_include#g" \
    -e "s#/opt/python/cp311-cp311/include/python3.11#$py_include#g"
  step "wheel CMake paths" "rewritten in $(echo "$stale" | wc -l) files"
fi

# 4. Build the interfaces (and install the package) with colcon when its inputs change.
#    Python modules are imported from the source tree (scripts/env.sh), so editing them
#    needs no rebuild.
BUILD_INPUTS=(CMakeLists.txt package.xml $(find msg srv nodes launch resource -type f | sort))
want="$(digest "${BUILD_INPUTS[@]}")"
if [ -f "$WS/install/setup.sh" ] && [ "$(cat "$WS/.build.sha256" 2>/dev/null)" = "$want" ]; then
  step "colcon build of msg/srv" "skipped (up to date)"
else
  # CMake refuses include paths inside the source tree, and .venv is inside it: build
  # from a copy of the package's files instead. Copies, not links: CMake installs a link
  # as a link, and ros2 tools walk share/ with os.walk, which does not follow them. Only
  # the Python sources stay a link (CMakeLists.txt installs their real path).
  SRC="$WS/src/robot_memory"
  rm -rf "$WS/src" && mkdir -p "$SRC"
  cp -R CMakeLists.txt package.xml msg srv nodes launch resource "$SRC/"
  ln -s "$ROOT/robot_memory" "$SRC/robot_memory"
  # A tree built from links holds links into the source tree; installing over them would
  # write through them.
  [ -d "$WS/install" ] && find "$WS/install" -type l -delete
  (
    source "$VENV/bin/activate"
    export AMENT_PREFIX_PATH="$VENV" CMAKE_PREFIX_PATH="$VENV"
    colcon --log-base "$WS/log" build --paths "$SRC" \
      --build-base "$WS/build" --install-base "$WS/install" \
      --event-handlers console_cohesion- summary+ \
      --cmake-args -DPython3_EXECUTABLE="$VENV/bin/python" -DBUILD_TESTING=OFF
  ) > "$ROOT/.ros_ws.build.log" 2>&1 || {
    tail -40 "$ROOT/.ros_ws.build.log" >&2
    echo "setup: colcon build failed; full log in .ros_ws.build.log" >&2
    exit 1
  }
  echo "$want" > "$WS/.build.sha256"
  step "colcon build of msg/srv" "built"
fi

# 5. The robot-memory command (editable: it runs the source tree).
want="$(digest setup.py setup.cfg)"
if [ "$(cat "$VENV/.editable.sha256" 2>/dev/null)" = "$want" ] && [ -x "$VENV/bin/robot-memory" ]; then
  step "robot-memory command" "skipped (installed)"
else
  "$VENV/bin/python" -m pip install --quiet --no-deps --no-build-isolation -e "$ROOT"
  echo "$want" > "$VENV/.editable.sha256"
  step "robot-memory command" "installed"
fi

# 6. PostgreSQL server binaries for the fleet-store tests (each test run starts its own
#    server on loopback and removes it).
bash "$ROOT/scripts/ensure_postgres.sh"

# 7. Headless Chromium for the report's browser test.
bash "$ROOT/scripts/ensure_chromium.sh"
