#!/usr/bin/env bash
# Set up everything robot_memory needs, idempotently: a virtual environment with ROS 2
# from PyPI wheels, this package's msg/srv built with colcon, and the `robot-memory`
# command. A second run skips what is already done.
#
# DISTRO picks the ROS 2 distribution, each in its own environment:
#   kilted (default)  Python 3.11, requirements/ros.txt        -> .venv/, .ros_ws/
#   jazzy             Python 3.12, requirements/ros-jazzy.txt  -> .venv-jazzy/, .ros_ws-jazzy/
# PYTHON= names the interpreter that creates the environment (otherwise found on PATH or
# under pyenv).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DISTRO="${DISTRO:-kilted}"
case "$DISTRO" in
  kilted) PY_VERSION=3.11 SUFFIX="" ROS_REQS=requirements/ros.txt ;;
  jazzy)  PY_VERSION=3.12 SUFFIX="-jazzy" ROS_REQS=requirements/ros-jazzy.txt ;;
  *) echo "setup: DISTRO must be kilted or jazzy, not '$DISTRO'" >&2; exit 2 ;;
esac
VENV="$ROOT/.venv$SUFFIX"
WS="$ROOT/.ros_ws$SUFFIX"
BUILD_LOG=".ros_ws$SUFFIX.build.log"
cd "$ROOT"

step() { printf 'setup: %-34s %s\n' "$1" "$2"; }
digest() { cat "$@" | sha256sum | cut -d' ' -f1; }

# 1. The Python the distribution's wheels are built for (Kilted: cp311; Jazzy: cp311 and
#    cp312, and 3.12 is Ubuntu 24.04's). pyenv keeps every version it installed under
#    `pyenv root`, though its shims offer only the selected ones: look there too.
is_wanted() {
  "$1" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$PY_VERSION'.split('.'))))" \
    >/dev/null 2>&1
}
find_python() {
  local candidate root
  for candidate in "python$PY_VERSION" python3; do
    if command -v "$candidate" >/dev/null && is_wanted "$candidate"; then
      command -v "$candidate"; return 0
    fi
  done
  for root in "$(pyenv root 2>/dev/null || true)" "${PYENV_ROOT:-$HOME/.pyenv}"; do
    [ -n "$root" ] || continue
    for candidate in $(ls -d "$root/versions/$PY_VERSION".*/bin/"python$PY_VERSION" 2>/dev/null |
                       sort -rV); do
      if is_wanted "$candidate"; then echo "$candidate"; return 0; fi
    done
  done
  return 1
}
if [ -x "$VENV/bin/python" ]; then
  step "virtual environment ($DISTRO)" "skipped (exists)"
else
  PYTHON="${PYTHON:-$(find_python || true)}"
  if [ -z "$PYTHON" ]; then
    echo "setup: need Python $PY_VERSION for ROS 2 $DISTRO (not on PATH nor under pyenv);" \
         "set PYTHON=/path/to/python$PY_VERSION" >&2
    exit 1
  fi
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  step "virtual environment ($DISTRO)" "created with $PYTHON"
fi

# 2. Python packages, reinstalled only when the pinned lists change.
REQS=("$ROS_REQS" requirements/python.txt)
want="$(digest "${REQS[@]}")"
if [ "$(cat "$VENV/.requirements.sha256" 2>/dev/null)" = "$want" ]; then
  step "ROS 2 wheels and Python packages" "skipped (up to date)"
else
  "$VENV/bin/python" -m pip install --quiet $(printf -- '-r %s ' "${REQS[@]}")
  echo "$want" > "$VENV/.requirements.sha256"
  step "ROS 2 wheels and Python packages" "installed"
fi

# 3. The wheels' CMake exports name the include paths of the machine that built them
#    (/opt/python/cp311-cp311/include/python3.11, or cp312 and python3.12 for Jazzy's
#    cp312 wheels); point them at this interpreter's headers and numpy's.
py_include="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
np_include="$("$VENV/bin/python" -c 'import numpy; print(numpy.get_include())')"
built_py='/opt/python/cp3[0-9]+-cp3[0-9]+/include/python3\.[0-9]+'
built_np='/opt/python/cp3[0-9]+-cp3[0-9]+/lib/python3\.[0-9]+/site-packages/numpy/_?core/include'
stale="$(grep -rlE "$built_np|$built_py" "$VENV/share" --include='*.cmake' || true)"
if [ -z "$stale" ]; then
  step "wheel CMake paths" "skipped (already local)"
else
  echo "$stale" | xargs sed -i -E -e "s#$built_np#$np_include#g" -e "s#$built_py#$py_include#g"
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
  # CMake refuses include paths inside the source tree, and the venv is inside it: build
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
  ) > "$ROOT/$BUILD_LOG" 2>&1 || {
    tail -40 "$ROOT/$BUILD_LOG" >&2
    echo "setup: colcon build failed; full log in $BUILD_LOG" >&2
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
