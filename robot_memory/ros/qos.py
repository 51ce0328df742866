"""Named QoS profiles, one per kind of data robot_memory carries."""

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

# Identity status: latched, so a memory node or tool that starts late still learns it.
IDENTITY_STATUS_QOS = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST,
                                 reliability=ReliabilityPolicy.RELIABLE,
                                 durability=DurabilityPolicy.TRANSIENT_LOCAL)

# Facts snapshot: latched, so a planner that starts late still gets the current facts.
FACTS_QOS = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST,
                       reliability=ReliabilityPolicy.RELIABLE,
                       durability=DurabilityPolicy.TRANSIENT_LOCAL)

# Per-pass deltas: reliable but not latched (a late joiner wants the snapshot instead).
FACTS_DELTA_QOS = QoSProfile(depth=10, history=HistoryPolicy.KEEP_LAST,
                             reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.VOLATILE)

# Execution results: reliable with a deep queue so a burst from a skill is not lost
# while the logger is flushing to disk. Publishers should use the same profile.
EXECUTION_RESULTS_QOS = QoSProfile(depth=1000, history=HistoryPolicy.KEEP_LAST,
                                   reliability=ReliabilityPolicy.RELIABLE,
                                   durability=DurabilityPolicy.VOLATILE)

# /diagnostics: the ROS convention (reliable, volatile, depth 10).
DIAGNOSTICS_QOS = QoSProfile(depth=10, history=HistoryPolicy.KEEP_LAST,
                             reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.VOLATILE)

# Signed checkpoints: latched, so a fleet or base-station witness that starts late still
# gets the newest one.
CHECKPOINT_QOS = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST,
                            reliability=ReliabilityPolicy.RELIABLE,
                            durability=DurabilityPolicy.TRANSIENT_LOCAL)
