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

def execution_results_reader_qos(depth: int, keep_all: bool) -> QoSProfile:
    """The logger's side of EXECUTION_RESULTS_QOS. keep_all: a full reader history holds
    the writers back (reliable flow control: a publisher that outruns the logger waits,
    and fails visibly when its own history stays full) instead of dropping the oldest
    results; Fast DDS reports neither kind of drop as message lost. keep_last: never holds
    a publisher back, but past `depth` unread results the oldest are dropped unreported."""
    return QoSProfile(depth=depth,
                      history=HistoryPolicy.KEEP_ALL if keep_all else HistoryPolicy.KEEP_LAST,
                      reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.VOLATILE)
