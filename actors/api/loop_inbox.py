"""Results of other threads' work, handed to an asyncio loop a batch at a time.

`asyncio.wrap_future` (and `run_in_executor`, built on it) wakes the loop once per finished
future: one write to its self-pipe and one pass of the loop each. The HTTP server awaits two
futures per write (the handler's first half on a pool thread, then the leader's answer, set
on the leader link's reader thread, which reads answers in batches), so under load the loop
woke twice per request. An inbox queues every finished future and wakes the loop only when
no wake-up is already on its way: the answers of one read of the link arrive in one pass.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import threading
from typing import Any, TypeVar

T = TypeVar("T")


class LoopInbox:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._arrived: collections.deque[
            tuple[concurrent.futures.Future[Any], asyncio.Future[Any]]
        ] = collections.deque()
        self._wake_pending = False
        # Each source's waiter until it is done. Not in a closure the source keeps: the
        # waiter resolves with the source, and the two would make a reference cycle.
        self._waiters: dict[concurrent.futures.Future[Any], list[asyncio.Future[Any]]] = {}
        self._waiters_lock = threading.Lock()  # `_arrive` runs on the source's thread

    def settled(
        self, source: concurrent.futures.Future[T]
    ) -> asyncio.Future[concurrent.futures.Future[T]]:
        """An asyncio future (of the loop's; call this on the loop) that resolves with
        `source` itself once it is done, whatever its outcome (a result, an error, a cancel):
        the awaiter reads it, and nothing `source` raises escapes the await. Cancelling the
        asyncio future does not cancel `source`: its owner does that."""
        waiter: asyncio.Future[concurrent.futures.Future[T]] = self._loop.create_future()
        with self._waiters_lock:
            waiters = self._waiters.get(source)
            if waiters is not None:  # awaited twice, and not done yet
                waiters.append(waiter)
                return waiter
            self._waiters[source] = [waiter]
        source.add_done_callback(self._arrive)  # runs at once if `source` is done
        return waiter

    def _arrive(self, done: concurrent.futures.Future[Any]) -> None:
        # Any thread. The flag is read after the append: a drain that cleared it before the
        # append still finds the entry, since it clears the flag before it empties the queue.
        with self._waiters_lock:
            waiters = self._waiters.pop(done)
        for waiter in waiters:
            self._arrived.append((done, waiter))
        if not self._wake_pending:
            self._wake_pending = True
            try:
                self._loop.call_soon_threadsafe(self._drain)
            except RuntimeError:  # the loop is closed: nobody waits any more
                self._wake_pending = False

    def _drain(self) -> None:
        self._wake_pending = False
        arrived = self._arrived
        while arrived:
            done, waiter = arrived.popleft()
            if not waiter.done():  # else its awaiter gave up (a timeout, the server stopping)
                waiter.set_result(done)
