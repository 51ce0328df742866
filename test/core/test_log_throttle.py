"""LogThrottle: the first line of each kind at once, then at most one per period, each
saying how many of its kind were held back."""

from robot_memory.operation.log_throttle import LogThrottle, held_back


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_one_line_per_kind_and_period_with_the_count_held_back():
    clock = Clock()
    throttle = LogThrottle(1.0, clock)
    assert throttle.admit("nan") == 0  # the first is said at once
    assert throttle.admit("empty") == 0  # ... of every kind
    assert [throttle.admit("nan") for _ in range(5)] == [None] * 5
    clock.now += 0.5
    assert throttle.admit("nan") is None
    clock.now += 0.5
    assert throttle.admit("nan") == 6  # a period later: said, with the 6 held back
    assert throttle.admit("nan") is None
    clock.now += 10.0
    assert throttle.admit("nan") == 1
    assert throttle.admit("empty") == 0


def test_the_suffix_says_how_many_were_held_back():
    assert held_back(0) == ""
    assert held_back(6) == " (6 more like it since the last such line)"
