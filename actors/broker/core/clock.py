"""The injected clock: every timer in the broker core reads time through it.

The core never sleeps or starts threads. The actor shell passes `time.time` and calls
`EvalBroker.tick()` periodically; tests pass a `ManualClock` and advance it.
The clock must be wall-clock unix seconds, because `Evaluation.wait_until` is unix ns.
"""

from __future__ import annotations

from collections.abc import Callable

Clock = Callable[[], float]
"""Returns the current unix time in seconds (`time.time` in production)."""


class ManualClock:
    """A clock that only moves when told to: for tests and simulations."""

    __slots__ = ("now",)

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock does not go backwards")
        self.now += seconds

    def now_ns(self) -> int:
        """The current time in unix nanoseconds, the unit of `Evaluation.wait_until`."""
        return int(self.now * 1e9)
