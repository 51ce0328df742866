"""robot_memory: episodic-to-semantic memory for ROS 2 robots, without identity drift.

The core (manifest, store, consolidation, grounding, CLI, everything but the packages
below) imports no rclpy. rclpy is used only in ``robot_memory.ros`` (the nodes and the
planner-side ``robot_memory.ros.client``) and in the two adapter packages
``robot_memory.demo`` (the make-run scenario) and ``robot_memory.sim`` (MuJoCo).
"""

import pkgutil

# The generated interfaces (robot_memory.msg, robot_memory.srv) are installed by colcon
# into another robot_memory/ directory on sys.path; extending __path__ lets a source
# checkout and that install serve one package.
__path__ = pkgutil.extend_path(__path__, __name__)

__version__ = "0.1.0"
