"""pip install of the ROS-free core and the `robot-memory` command (metadata in setup.cfg).

The rclpy nodes and the msg/srv interfaces need a ROS 2 install: build the package
with colcon (CMakeLists.txt) for those.
"""

from setuptools import setup

setup()
