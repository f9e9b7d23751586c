"""Reconnecting: loop turns that find Redis unreachable are retried with growing, jittered
waits until one succeeds; the wait resets after a success, stops cut it short, and any
other error is the loop's own."""

from __future__ import annotations

import threading

import pytest
import redis

from actors.runtime.reconnect import Reconnecting


class RecordingStop(threading.Event):
    """A stop event whose waits are recorded instead of slept."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout or 0.0)
        return self.is_set()


def failing(times: int, error: Exception) -> tuple[list[int], object]:
    calls: list[int] = []

    def turn() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise error
        return "done"

    return calls, turn


def test_a_turn_is_retried_with_growing_capped_waits_until_redis_answers() -> None:
    stop = RecordingStop()
    reconnecting = Reconnecting(stop, "test", first_wait_s=0.05, max_wait_s=1.0)
    calls, turn = failing(12, redis.ConnectionError("refused"))
    assert reconnecting(turn) == "done"  # type: ignore[arg-type]
    assert len(calls) == 13 and len(stop.waits) == 12
    assert all(0 <= w <= 1.0 for w in stop.waits)
    # Random exponential: the later waits reach far past the first one's bound, to the cap.
    assert max(stop.waits[8:]) > 0.1
    assert reconnecting.outages == 1 and reconnecting.retries == 12
    # After a success the next outage starts again from the shortest waits.
    stop.waits.clear()
    _, turn = failing(1, redis.TimeoutError("slow"))
    assert reconnecting(turn) == "done"  # type: ignore[arg-type]
    assert stop.waits[0] <= 0.1 and reconnecting.outages == 2


def test_a_stop_ends_the_retries_with_the_last_error() -> None:
    stop = RecordingStop()
    stop.set()
    _, turn = failing(1, redis.ConnectionError("gone"))
    with pytest.raises(redis.ConnectionError, match="gone"):
        Reconnecting(stop, "test")(turn)  # type: ignore[arg-type]


def test_other_errors_are_not_retried() -> None:
    stop = RecordingStop()
    calls, turn = failing(1, ValueError("a bug"))
    with pytest.raises(ValueError, match="a bug"):
        Reconnecting(stop, "test")(turn)  # type: ignore[arg-type]
    assert len(calls) == 1 and stop.waits == []
