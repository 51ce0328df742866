"""Who decides a memory node's lifecycle state: the verifier, or an operator.

The convention of nav2's lifecycle manager: the manager brings its nodes up at boot and
after a respawn, but a transition it did not ask for (an operator's
`ros2 lifecycle set /consolidator deactivate`, or the node withdrawing itself) is
respected. That node is held where it was left until the operator hands it back
(`manage_nodes` RESUME). Holding only ever keeps a node down; identity and store
problems are enforced elsewhere (the nodes refuse to activate) and are not undone here.

ROS-free: states are lifecycle state labels ("unconfigured", "configuring", ...).
"""

from __future__ import annotations

from robot_memory.errors import InputError

UNCONFIGURED, INACTIVE, ACTIVE, FINALIZED = "unconfigured", "inactive", "active", "finalized"
PRIMARY_STATES = frozenset({UNCONFIGURED, INACTIVE, ACTIVE, FINALIZED})

# The manager's way up from each state.
BRING_UP = {UNCONFIGURED: "configure", INACTIVE: "activate"}
# Each transition and the intermediate state a node reports while it runs.
VIA = {"configure": "configuring", "cleanup": "cleaningup", "activate": "activating",
       "deactivate": "deactivating", "shutdown": "shuttingdown"}
TRANSITION_OF = {via: transition for transition, via in VIA.items()}

# A request the node never acted on (it died, the call was lost) stops counting as ours.
EXPECTED_FOR_S = 10.0

PAUSED = "paused by manage_nodes"


class BringUpPolicy:
    """Which transition the manager asks of each node next, and which nodes are held.

    Feed it every state the manager polls (`next_transition`), every transition the
    manager requests (`requesting`) and every transition a node reports
    (`on_transition_event`, from `<node>/transition_event`).
    """

    def __init__(self, node_names: list[str]):
        self.node_names = list(node_names)
        self.holds: dict[str, str] = {}  # node -> why it is held
        self._expected: dict[str, list[tuple[str, float]]] = {n: [] for n in node_names}
        self._in_progress: dict[str, tuple[str, bool]] = {}  # node -> (via state, ours)
        self._last_polled: dict[str, str] = {}

    def next_transition(self, name: str, state: str) -> str | None:
        """The transition to ask for (configure / activate; deactivate for a paused node),
        or None. A node seen active
        that is now inactive left active without the manager: only an operator or the
        node itself does that (a respawned node starts unconfigured), so it is held even
        when its transition event has not arrived yet."""
        previous, self._last_polled[name] = self._last_polled.get(name), state
        if state != FINALIZED and self.holds.get(name, "").startswith(FINALIZED):
            # Finalized is for good and its process exits: a node seen again is a respawned
            # one, brought up like any other (the operator's shutdown ended with the process).
            del self.holds[name]
        if previous == ACTIVE and state == INACTIVE and name not in self.holds:
            self.holds[name] = f"{INACTIVE} after a deactivate the manager did not request"
        if name in self.holds:
            return "deactivate" if self.holds[name] == PAUSED and state == ACTIVE else None
        return BRING_UP.get(state)

    def requesting(self, name: str, transition: str, now: float) -> None:
        """The manager is about to ask `name` for `transition`."""
        self._expected[name].append((VIA[transition], now))

    def on_transition_event(self, name: str, start: str, goal: str, now: float) -> None:
        """A step the node reports: a transition starts (primary -> intermediate state) or
        ends (-> primary state). Only one the manager did not ask for changes a hold."""
        if name not in self._expected:
            return
        if start in PRIMARY_STATES and goal not in PRIMARY_STATES:
            self._in_progress[name] = (goal, self._take_expected(name, goal, now))
            return
        if goal not in PRIMARY_STATES:
            return
        via, ours = self._in_progress.pop(name, (goal, False))
        if ours:
            return
        if goal == ACTIVE:  # the operator brought it up: theirs to run, the manager's again
            self.holds.pop(name, None)
            return
        self.holds[name] = f"{goal} after a {TRANSITION_OF.get(via, via)} " \
                           "the manager did not request"

    def pause(self, names: list[str]) -> None:
        for name in names:
            self.holds[name] = PAUSED

    def resume(self, names: list[str]) -> None:
        for name in names:
            self.holds.pop(name, None)
            self._last_polled.pop(name, None)

    def _take_expected(self, name: str, via: str, now: float) -> bool:
        pending = [(v, at) for v, at in self._expected[name] if now - at < EXPECTED_FOR_S]
        for i, (v, _) in enumerate(pending):
            if v == via:
                del pending[i]
                self._expected[name] = pending
                return True
        self._expected[name] = pending
        return False


class SplitStack(InputError):
    """Raised when a memory node opened another store than the one the verifier checked:
    configured, it would write or serve a store the rest of the stack does not use."""


def split_stack_problem(verified_store_id: str, own_store_id: str, own_url: str) -> str:
    """Why a node must not configure on its store (empty: it may). An empty verified id
    comes from an older verifier, which did not say."""
    if not verified_store_id or verified_store_id == own_store_id:
        return ""
    return (f"database_url: this node opened {own_url} (store {own_store_id}), but "
            f"manifest_verifier verified store {verified_store_id}; the stack would be "
            "split across two stores. Give every node the same database_url (the launch "
            "argument, or one section for all nodes in the parameters file)")
