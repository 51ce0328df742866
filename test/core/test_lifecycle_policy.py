"""BringUpPolicy: the manager brings nodes up, an operator's transition is respected."""

from robot_memory.operation.lifecycle_policy import PAUSED, BringUpPolicy

NODES = ["episodic_logger", "consolidator"]


def events(policy, name, *steps, now=0.0):
    for start, goal in steps:
        policy.on_transition_event(name, start, goal, now)


def bring_up(policy, name, now=0.0):
    """What the manager does for a fresh node: configure, then activate, both its own."""
    assert policy.next_transition(name, "unconfigured") == "configure"
    policy.requesting(name, "configure", now)
    events(policy, name, ("unconfigured", "configuring"), ("configuring", "inactive"), now=now)
    assert policy.next_transition(name, "inactive") == "activate"
    policy.requesting(name, "activate", now)
    events(policy, name, ("inactive", "activating"), ("activating", "active"), now=now)
    assert policy.next_transition(name, "active") is None
    assert policy.holds == {}


def test_the_managers_own_transitions_hold_nothing():
    policy = BringUpPolicy(NODES)
    for name in NODES:
        bring_up(policy, name)


def test_an_operators_deactivate_is_held_until_resume():
    policy = BringUpPolicy(NODES)
    bring_up(policy, "consolidator")
    events(policy, "consolidator", ("active", "deactivating"), ("deactivating", "inactive"))
    assert policy.holds == {
        "consolidator": "inactive after a deactivate the manager did not request"}
    for _ in range(3):
        assert policy.next_transition("consolidator", "inactive") is None
    policy.resume(["consolidator"])
    assert policy.next_transition("consolidator", "inactive") == "activate"


def test_a_deactivation_seen_before_its_event_is_held_too():
    """The poll may answer before the node's transition event arrives."""
    policy = BringUpPolicy(NODES)
    bring_up(policy, "consolidator")
    assert policy.next_transition("consolidator", "inactive") is None
    assert "consolidator" in policy.holds


def test_a_respawned_node_is_brought_up_again():
    """A new process starts unconfigured and reports no transition of its own."""
    policy = BringUpPolicy(NODES)
    bring_up(policy, "episodic_logger")
    bring_up(policy, "episodic_logger", now=30.0)


def test_an_operators_cleanup_and_shutdown_are_held_where_they_left_the_node():
    policy = BringUpPolicy(NODES)
    bring_up(policy, "consolidator")
    events(policy, "consolidator", ("active", "deactivating"), ("deactivating", "inactive"),
           ("inactive", "cleaningup"), ("cleaningup", "unconfigured"))
    assert policy.holds["consolidator"] == \
        "unconfigured after a cleanup the manager did not request"
    assert policy.next_transition("consolidator", "unconfigured") is None
    events(policy, "consolidator", ("unconfigured", "shuttingdown"),
           ("shuttingdown", "finalized"))
    assert policy.next_transition("consolidator", "finalized") is None


def test_an_operators_activate_hands_the_node_back():
    policy = BringUpPolicy(NODES)
    bring_up(policy, "consolidator")
    policy.pause(["consolidator"])
    events(policy, "consolidator", ("active", "deactivating"), ("deactivating", "inactive"))
    events(policy, "consolidator", ("inactive", "activating"), ("activating", "active"))
    assert policy.holds == {}


def test_pause_deactivates_and_holds_then_resume_brings_up():
    policy = BringUpPolicy(NODES)
    bring_up(policy, "episodic_logger")
    policy.pause(["episodic_logger"])
    assert policy.next_transition("episodic_logger", "active") == "deactivate"
    policy.requesting("episodic_logger", "deactivate", 0.0)
    events(policy, "episodic_logger", ("active", "deactivating"), ("deactivating", "inactive"))
    assert policy.holds == {"episodic_logger": PAUSED}
    assert policy.next_transition("episodic_logger", "inactive") is None
    policy.resume(["episodic_logger"])
    assert policy.next_transition("episodic_logger", "inactive") == "activate"


def test_a_request_the_node_never_acted_on_stops_counting_as_the_managers():
    policy = BringUpPolicy(NODES)
    policy.requesting("consolidator", "configure", 0.0)  # the node died before answering
    events(policy, "consolidator", ("unconfigured", "configuring"),
           ("configuring", "inactive"), now=60.0)
    assert "consolidator" in policy.holds


def test_events_of_unmanaged_nodes_are_ignored():
    policy = BringUpPolicy(NODES)
    events(policy, "planner", ("active", "deactivating"), ("deactivating", "inactive"))
    assert policy.holds == {}


def test_a_shutdown_holds_the_node_until_a_respawned_one_appears():
    """Finalized is for good (its process exits): the node that answers next is a new one."""
    policy = BringUpPolicy(NODES)
    bring_up(policy, "consolidator")
    events(policy, "consolidator", ("active", "shuttingdown"), ("shuttingdown", "finalized"))
    assert policy.holds["consolidator"].startswith("finalized after a shutdown")
    assert policy.next_transition("consolidator", "finalized") is None
    bring_up(policy, "consolidator")  # respawned: unconfigured, brought up, nothing held
