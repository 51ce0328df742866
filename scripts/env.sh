# Source me: `source scripts/env.sh` gives a shell where `robot-memory`, `import rclpy`
# and `from robot_memory.msg import ExecutionResult` work. Run `make setup` first.
# bash and zsh find the repository from this file's path, from any directory; a plain
# POSIX sh cannot, so there run it from the repository root or set ROBOT_MEMORY_ROOT.

if [ -n "${BASH_VERSION:-}" ]; then
  eval '_rm_self="${BASH_SOURCE[0]}"'  # eval: keeps the bash-only syntax from sh
elif [ -n "${ZSH_VERSION:-}" ]; then
  eval '_rm_self="${(%):-%x}"'
else
  _rm_self="${ROBOT_MEMORY_ROOT:-.}/scripts/env.sh"
fi
_rm_root="$(cd "$(dirname "$_rm_self")/.." && pwd)"
unset _rm_self
if [ ! -f "$_rm_root/.ros_ws/install/setup.sh" ] || [ ! -f "$_rm_root/.venv/bin/activate" ]; then
  echo "robot_memory: no build in '$_rm_root'; run 'make setup' there first" >&2
  unset _rm_root
  return 1 2>/dev/null || exit 1
fi
# colcon's setup.sh reads unset variables: relax `set -u` while sourcing, if it is on.
case $- in *u*) _rm_nounset=1; set +u ;; *) _rm_nounset= ;; esac
. "$_rm_root/.venv/bin/activate"
# colcon's setup.sh cannot find its own directory when sourced from sh; it reads it
# from this variable.
COLCON_CURRENT_PREFIX="$_rm_root/.ros_ws/install"
. "$_rm_root/.ros_ws/install/setup.sh"
unset COLCON_CURRENT_PREFIX
[ -n "$_rm_nounset" ] && set -u
unset _rm_nounset
# colcon leaves a trailing ':' when the variable was empty: an empty entry means the
# current directory to the dynamic loader.
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH%:}"
# The wheels are an underlay without colcon's local_setup files: add them by hand.
case ":${AMENT_PREFIX_PATH:-}:" in *":$VIRTUAL_ENV:"*) ;; *)
  export AMENT_PREFIX_PATH="${AMENT_PREFIX_PATH:+$AMENT_PREFIX_PATH:}$VIRTUAL_ENV" ;; esac
# The source tree first: its robot_memory extends itself (pkgutil.extend_path) with the
# built msg/srv, so Python edits need no rebuild.
# It must stay first even when this file is sourced again (colcon re-prepends its own).
PYTHONPATH="$(printf '%s' "${PYTHONPATH:-}" | tr ':' '\n' | { grep -vxF "$_rm_root" || true; } | paste -sd: -)"
export PYTHONPATH="$_rm_root${PYTHONPATH:+:$PYTHONPATH}"
export RMW_IMPLEMENTATION=rmw_fastrtps_cpp
unset _rm_root
