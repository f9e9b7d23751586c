"""How every actor's loop rides out a Redis that went away: retry with backoff (tenacity).

A loop turn that fails because Redis is unreachable (killed and restarting, a network cut,
the server still LOADING its AOF: redis-py raises ConnectionError or TimeoutError for all of
these) is run again after a wait that grows exponentially with random jitter, from 50 ms up
to `max_wait_s`, so that a cluster of actors does not hammer a restarting server in step or
spin while it is gone; the first success resets the wait. The wait is cut short when the
loop is asked to stop, and an outage is logged when it starts and every tenth attempt.
Commands are not retried one by one: a turn is (reads are repeated from the consumer
group's pending list, writes are idempotent by request id or fenced by the log's index).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

import redis
import tenacity

log = logging.getLogger(__name__)

T = TypeVar("T")

UNREACHABLE = (redis.ConnectionError, redis.TimeoutError)


class Reconnecting:
    """Runs loop turns, retrying those that find Redis unreachable until `stop` is set."""

    def __init__(
        self,
        stop: threading.Event,
        what: str,
        *,
        first_wait_s: float = 0.05,
        max_wait_s: float = 5.0,
    ) -> None:
        self.stop = stop
        self.what = what
        self.outages = 0  # turns that needed a retry
        self.retries = 0  # attempts that failed, in all
        self._retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(UNREACHABLE),
            wait=tenacity.wait_random_exponential(multiplier=first_wait_s, max=max_wait_s),
            stop=self._stopped,
            sleep=self._sleep,
            before_sleep=self._note,
            reraise=True,
        )

    def __call__(self, turn: Callable[[], T]) -> T:
        """Run one turn; raises the last error only once `stop` is set. A turn that
        succeeds costs a plain call: tenacity (some microseconds a call) takes over only
        from its first failure, which it counts as its own first attempt."""
        try:
            return turn()
        except UNREACHABLE as exc:
            failed: BaseException | None = exc

        def again() -> T:
            nonlocal failed
            if failed is not None:
                error, failed = failed, None
                raise error
            return turn()

        return self._retrying(again)

    def _stopped(self, state: tenacity.RetryCallState) -> bool:
        return self.stop.is_set()

    def _sleep(self, seconds: float) -> None:
        self.stop.wait(seconds)

    def _note(self, state: tenacity.RetryCallState) -> None:
        self.retries += 1
        attempt = state.attempt_number
        if attempt == 1:
            self.outages += 1
        if attempt == 1 or attempt % 10 == 0:
            error = state.outcome.exception() if state.outcome is not None else None
            log.warning(
                "%s: Redis unreachable (%s); retrying, attempt %d", self.what, error, attempt
            )
