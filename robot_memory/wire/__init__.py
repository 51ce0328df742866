"""Wire: the bytes of robot_memory's messages, without rclpy.

CDR encoders and decoders for the messages on the hot paths, each held to its
`msg/*.msg` definition.
"""
