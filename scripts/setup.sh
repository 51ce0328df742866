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
# Hash of names and contents, so a renamed msg/srv counts as a change too.
digest() { for f in "$@"; do printf '%s\n' "$f"; cat "$f"; done | sha256sum | cut -d' ' -f1; }

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
  if ! "$VENV/bin/python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
    echo "setup: .venv is not Python 3.11 (the ROS 2 wheels are cp311); run 'make clean'" >&2
    exit 1
  fi
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

# 3. The wheels' CMake exports name the include paths of the machine that built them
#    (configure fails: 'Imported target "service_msgs::..." includes non-existent path');
#    point them at this interpreter's headers and numpy's. Only CMake files: the
#    ament index files under share/ament_index also name /opt/python but are harmless.
py_include="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
np_include="$("$VENV/bin/python" -c 'import numpy; print(numpy.get_include())')"
stale="$(grep -rlF '/opt/python/cp311-cp311' "$VENV" \
  --include='*.cmake' --include='*.cmake.in' --include='CMakeLists.txt' || true)"
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
#    needs no rebuild. A change of the pinned ROS wheels rebuilds (the generated code
#    links against them).
BUILD_INPUTS=(CMakeLists.txt package.xml requirements/ros.txt
              $(find msg srv nodes launch resource -type f | LC_ALL=C sort))
want="$(digest "${BUILD_INPUTS[@]}")"
if [ -f "$WS/install/setup.sh" ] && [ "$(cat "$WS/.build.sha256" 2>/dev/null)" = "$want" ]; then
  step "colcon build of msg/srv" "skipped (up to date)"
else
  # Not `--paths .`: rosidl exports the wheels' include dirs (numpy's, inside .venv) and
  # CMake refuses an exported include path inside the source tree ("... which is
  # prefixed in the source directory"). Build from a directory of links instead.
  SRC="$WS/src/robot_memory"
  rm -rf "$WS/src" && mkdir -p "$SRC"
  # rosidl does not drop what a removed msg/srv generated (msg/__init__.py keeps
  # importing it), so a changed set of interface files gets a clean build.
  interfaces="$(ls msg/*.msg srv/*.srv 2>/dev/null | LC_ALL=C sort)"
  if [ "$interfaces" != "$(cat "$WS/.interfaces" 2>/dev/null)" ]; then
    rm -rf "$WS/build" "$WS/install"
  fi
  for item in CMakeLists.txt package.xml msg srv nodes launch resource robot_memory; do
    ln -s "$ROOT/$item" "$SRC/$item"
  done
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
  echo "$interfaces" > "$WS/.interfaces"
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
