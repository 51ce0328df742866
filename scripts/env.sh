# Source me: `source scripts/env.sh` gives a shell where `robot-memory`, `import rclpy`
# and `from robot_memory.msg import ExecutionResult` work. Run `make setup` first.

_rm_root="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)"
if [ ! -f "$_rm_root/.ros_ws/install/setup.sh" ]; then
  echo "robot_memory: run 'make setup' first" >&2
  return 1 2>/dev/null || exit 1
fi
. "$_rm_root/.venv/bin/activate"
# colcon's setup.sh finds its own prefix through this variable when sourced.
COLCON_CURRENT_PREFIX="$_rm_root/.ros_ws/install"
. "$_rm_root/.ros_ws/install/setup.sh"
unset COLCON_CURRENT_PREFIX
export AMENT_PREFIX_PATH="${AMENT_PREFIX_PATH:+$AMENT_PREFIX_PATH:}$VIRTUAL_ENV"
# The source tree first: its robot_memory extends itself with the built msg/srv.
export PYTHONPATH="$_rm_root${PYTHONPATH:+:$PYTHONPATH}"
export RMW_IMPLEMENTATION=rmw_fastrtps_cpp
unset _rm_root
