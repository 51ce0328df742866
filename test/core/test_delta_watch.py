"""A lost facts delta is told from one in flight (the grounding server's catch-up)."""

from robot_memory.grounding.delta_watch import LostDeltaWatch


def test_a_run_reflected_by_the_next_check_is_not_lost_though_a_newer_one_is_in_flight():
    watch = LostDeltaWatch()
    # A pass a second, checked every second: each check finds the newest run in flight.
    reflected = 10
    for newest in range(11, 30):
        assert watch.check(newest, reflected) == 0
        reflected = newest  # its delta arrived before the next check


def test_a_run_still_missing_at_the_next_check_is_lost_once():
    watch = LostDeltaWatch()
    assert watch.check(11, 10) == 0  # in flight, maybe
    assert watch.check(12, 10) == 11  # run 11 never arrived: reload
    assert watch.check(12, 12) == 0  # the reload reflects everything
    assert watch.check(12, 12) == 0


def test_caught_up_forgets_what_was_missing():
    watch = LostDeltaWatch()
    assert watch.check(11, 10) == 0
    assert watch.check(11, 11) == 0
    assert watch.check(12, 11) == 0  # a new run in flight: not lost yet
    assert watch.check(13, 11) == 12
