"""Operation: how the stack is configured, started and kept in shape.

The parameter table (parameters.py, parameters.yaml), what the launch file passes each
node (launch_parameters.py), bring-up without `ros2 launch`, who decides a node's
lifecycle state, operator credentials, the Fast DDS profile, heap trimming and log
throttling. ROS-free.
"""
