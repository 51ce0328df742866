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

# Execution results: reliable, transient-local, KEEP_LAST BURST_DEPTH. The depth is what
# a burst needs: a sample that the transport drops on the way (Fast DDS's shared-memory
# port and segment hold a few hundred results; a burst outruns them whenever the reader's
# receive thread is not scheduled for a moment) is sent again only while the publisher
# still holds it, so a publisher must hold every result of a burst until the logger's
# reader has acknowledged it: at depth 1,000, results were lost both in a burst sent at
# once while the logger's writer was stalled and in bench.hostile_input's burst; at
# BURST_DEPTH, none. Each held result costs the publisher some memory (docs/operations.md
# and docs/performance.md, "Why the code is shaped this way": how much). Transient-local:
# a logger that restarts (after kill -9, say) still gets the last BURST_DEPTH results
# each publisher sent, those published while it was down among them (it stores each once:
# ros/redelivery.py). Publishers should use this profile: it matches the logger's reader
# whichever durability that has. docs/operations.md: what a burst of N results needs.
BURST_DEPTH = 15_000
EXECUTION_RESULTS_QOS = QoSProfile(depth=BURST_DEPTH, history=HistoryPolicy.KEEP_LAST,
                                   reliability=ReliabilityPolicy.RELIABLE,
                                   durability=DurabilityPolicy.TRANSIENT_LOCAL)

# /diagnostics: the ROS convention (reliable, volatile, depth 10).
DIAGNOSTICS_QOS = QoSProfile(depth=10, history=HistoryPolicy.KEEP_LAST,
                             reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.VOLATILE)

# Signed checkpoints: latched, so a fleet or base-station witness that starts late still
# gets the newest one.
CHECKPOINT_QOS = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST,
                            reliability=ReliabilityPolicy.RELIABLE,
                            durability=DurabilityPolicy.TRANSIENT_LOCAL)

def execution_results_reader_qos(depth: int, keep_all: bool,
                                 durable: bool = True) -> QoSProfile:
    """The logger's side of EXECUTION_RESULTS_QOS. keep_all: a full reader history holds
    the writers back (reliable flow control: a publisher that outruns the logger waits,
    and fails visibly when its own history stays full) instead of dropping the oldest
    results; Fast DDS reports neither kind of drop as message lost. keep_last: never holds
    a publisher back, but past `depth` unread results the oldest are dropped unreported.
    durable (transient-local): a reader that joins late, a restarted logger, gets what
    the publishers still hold; DDS then matches transient-local publishers only (a
    volatile one offers less than the reader asks for). Not durable (volatile): every
    reliable publisher matches, and what is published while no logger runs is lost."""
    return QoSProfile(depth=depth,
                      history=HistoryPolicy.KEEP_ALL if keep_all else HistoryPolicy.KEEP_LAST,
                      reliability=ReliabilityPolicy.RELIABLE,
                      durability=(DurabilityPolicy.TRANSIENT_LOCAL if durable
                                  else DurabilityPolicy.VOLATILE))
