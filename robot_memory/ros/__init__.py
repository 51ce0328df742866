"""Thin rclpy adapters: each node wires ROS (parameters, QoS, topics, services, timers)
to the ROS-free core. Importing this package needs rclpy and the built interfaces."""
