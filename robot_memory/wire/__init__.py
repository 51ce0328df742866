"""Wire: the bytes of robot_memory's messages, without rclpy.

`cdr` holds the CDR primitives (encapsulation header, alignment and padding, strings,
numbers, sequence counts); each codec module encodes one message (`execution_result`,
`key_value`, `semantic_fact` with its array), imports `cdr` and its nested types' codecs
(and a result's limits and refusals: intake/records.py), never store/ nor ROS, and
declares the fields it encodes, which test/core/test_wire_layouts.py holds to
`msg/*.msg` (`msg_files` finds and reads them).
`fast_paths` keeps what a node had to leave to rclpy instead, for its log and
/diagnostics.
"""
