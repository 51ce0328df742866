# Source me: `source scripts/env.sh` gives a shell where `robot-memory`, `import rclpy`
# and `from robot_memory.msg import ExecutionResult` work. Run `make setup` first.
# For Jazzy: `DISTRO=jazzy source scripts/env.sh` after `make setup DISTRO=jazzy`.

_rm_root="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)"
case "${DISTRO:-kilted}" in
  kilted) _rm_suffix="" _rm_setup="make setup" ;;
  jazzy) _rm_suffix="-jazzy" _rm_setup="make setup DISTRO=jazzy" ;;
  *) echo "robot_memory: DISTRO must be kilted or jazzy, not '$DISTRO'" >&2
     unset _rm_root
     return 1 2>/dev/null || exit 1 ;;
esac
if [ ! -f "$_rm_root/.ros_ws$_rm_suffix/install/setup.sh" ]; then
  echo "robot_memory: run '$_rm_setup' first" >&2
  unset _rm_root _rm_suffix _rm_setup
  return 1 2>/dev/null || exit 1
fi
. "$_rm_root/.venv$_rm_suffix/bin/activate"
# colcon's setup.sh finds its own prefix through this variable when sourced.
COLCON_CURRENT_PREFIX="$_rm_root/.ros_ws$_rm_suffix/install"
. "$_rm_root/.ros_ws$_rm_suffix/install/setup.sh"
unset COLCON_CURRENT_PREFIX
export AMENT_PREFIX_PATH="${AMENT_PREFIX_PATH:+$AMENT_PREFIX_PATH:}$VIRTUAL_ENV"
# The source tree first: its robot_memory extends itself with the built msg/srv.
export PYTHONPATH="$_rm_root${PYTHONPATH:+:$PYTHONPATH}"
export RMW_IMPLEMENTATION=rmw_fastrtps_cpp
unset _rm_root _rm_suffix _rm_setup
