"""Blocking reads that another thread can cut short.

A service loop blocks in Redis (`XREADGROUP ... BLOCK`) waiting for stream messages, but some
of its work arrives another way: the leader's in-process inbox (the API's requests), the
evals the broker's log-tail thread enqueues. Without a wake that work waits the block out (up
to 50 ms at the leader, on every API request of an idle cluster). `WakeableReads` gives the
loop a connection of its own, so that its Redis client id is known, and `wake()` sends
`CLIENT UNBLOCK` for it: Redis ends the blocked read at once, as if its timeout had passed (no
error, nothing lost or delivered twice).

The protocol that keeps a wake from being missed:

    loop thread:   reads.arm(); read(block=not work_waiting()); reads.disarm()
    other thread:  put the work; reads.wake()

Either the loop sees the work before it blocks, or `wake()` sees it armed. A wake that reaches
Redis in the microseconds between the loop's check and its read starting to block finds
nothing blocked: that read then waits its block out (the old latency, rarely) unless another
wake comes, since the first such wake of a cycle leaves the loop armed for one more. Waking an
idle loop costs nothing (no command is sent unless it is armed); an armed one is sent at most
two UNBLOCKs per cycle, and a block is woken at most once.
"""

from __future__ import annotations

import contextlib
import threading

import redis


class WakeableReads:
    """One thread's blocking reads, on a dedicated connection that `wake` can unblock."""

    def __init__(self, client: redis.Redis) -> None:
        self._waker = client  # wakes go over the shared pool, never the blocked connection
        self.client = redis.Redis(
            connection_pool=client.connection_pool, single_connection_client=True
        )
        connection = self.client.connection
        assert connection is not None
        # A reconnect (Redis restarted) gives the connection a new id: read it as the
        # connection is made, before the command that reconnected it is sent. That command
        # is often the loop's blocking read itself, which a wake could not end otherwise.
        connection.register_connect_callback(self._on_connect)  # type: ignore[no-untyped-call]
        self._id: int | None = None
        self._lock = threading.Lock()
        self._armed = False
        self._cycle = 0  # counts arm() and disarm() calls: a wake knows whose block it hit
        self._rearmed = -1  # the cycle in which a missed wake re-armed the loop
        self.wakes = 0  # CLIENT UNBLOCKs sent

    def arm(self) -> None:
        """The loop is about to check for work and block (on the loop's thread)."""
        if self._id is None:
            self._id = int(self.client.client_id())
        with self._lock:
            self._armed = True
            self._cycle += 1

    def disarm(self) -> None:
        with self._lock:
            self._armed = False
            self._cycle += 1

    @property
    def armed(self) -> bool:
        """The loop is blocked (or about to block): a wake would be sent. Lets a caller skip
        working out whether to wake at all."""
        return self._armed

    def wake(self) -> None:
        """Cut the loop's current (or imminent) block short; any thread."""
        with self._lock:
            if not self._armed or self._id is None:
                return
            self._armed = False  # one unblock per block
            client_id, cycle = self._id, self._cycle
        self.wakes += 1
        unblocked = False
        # On failure the loop waits its block out: late, never wrong.
        with contextlib.suppress(redis.RedisError):
            unblocked = bool(self._waker.client_unblock(client_id))
        if not unblocked:
            with self._lock:
                # Armed, but its read had not begun to block (or the loop is still handling
                # what it read): one more wake may be sent in this cycle, not one per call,
                # so a loop busy between arm() and its read costs at most two UNBLOCKs.
                if self._cycle == cycle and self._rearmed != cycle:
                    self._rearmed = cycle
                    self._armed = True

    @property
    def connection_id(self) -> int | None:
        """The Redis client id the next wake unblocks (known once armed)."""
        return self._id

    def close(self) -> None:
        self.client.close()

    def _on_connect(self, connection: redis.connection.AbstractConnection) -> None:
        try:
            connection.send_command("CLIENT", "ID")  # type: ignore[no-untyped-call]
            self._id = int(connection.read_response())
        except (redis.RedisError, OSError, TypeError, ValueError):
            self._id = None  # the next arm() asks again
