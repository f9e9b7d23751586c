"""WakeableReads: a blocking read on its own connection, cut short from another thread with
CLIENT UNBLOCK. Blocks are a minute long here: a read that was not woken fails the test's
deadline instead of returning by its own timeout."""

from __future__ import annotations

import threading
from collections.abc import Callable

import redis

from actors.streams.wake import WakeableReads

MINUTE_MS = 60_000


def blocking_read(reads: WakeableReads, stream: str) -> tuple[threading.Thread, list[object]]:
    """XREAD on `stream` for a minute, armed, on a thread; returns the thread and its result."""
    result: list[object] = []

    def read() -> None:
        reads.arm()
        try:
            result.append(reads.client.xread({stream: "$"}, block=MINUTE_MS))
        finally:
            reads.disarm()

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread, result


def test_a_wake_ends_a_blocked_read_at_once(
    client: redis.Redis, blocked_in: Callable[[str], int]
) -> None:
    reads = WakeableReads(client)
    thread, result = blocking_read(reads, "s")
    assert blocked_in("xread") == reads.connection_id
    reads.wake()
    thread.join(timeout=30)
    assert not thread.is_alive(), "the read was not woken"
    assert result == [[]]  # as if its block had timed out
    assert reads.wakes == 1
    reads.wake()  # disarmed: nothing is sent
    assert reads.wakes == 1
    reads.close()


def test_a_loop_that_is_not_armed_is_never_sent_a_wake(client: redis.Redis) -> None:
    reads = WakeableReads(client)
    reads.wake()
    assert reads.wakes == 0
    reads.arm()
    reads.wake()  # nothing blocked yet: it stays armed for the next
    reads.disarm()  # the loop went on without blocking
    reads.wake()
    assert reads.wakes == 1
    reads.close()


def test_after_a_reconnect_the_new_connection_is_the_one_woken(
    client: redis.Redis, blocked_in: Callable[[str], int]
) -> None:
    reads = WakeableReads(client)
    reads.arm()
    first = reads.client.client_id()
    reads.disarm()
    client.client_kill_filter(_id=first)  # as when Redis restarts: the connection is gone
    try:
        reads.client.ping()
    except redis.ConnectionError:
        reads.client.ping()  # no built-in retry: the second command reconnects
    thread, _ = blocking_read(reads, "s")
    blocked = blocked_in("xread")
    assert blocked != first and blocked == reads.connection_id
    reads.wake()
    thread.join(timeout=30)
    assert not thread.is_alive(), "the reconnected read was not woken"
    reads.close()


def test_a_read_that_reconnects_as_it_blocks_is_woken_too(
    client: redis.Redis, blocked_in: Callable[[str], int]
) -> None:
    """A loop's next read after Redis came back reconnects as it is sent, after arm() (the
    id it knew is the gone connection's): the new id is read as the connection is made, so
    that this read can be woken too, not only the ones after it."""
    reads = WakeableReads(client)
    reads.arm()
    first = reads.client.client_id()
    reads.disarm()
    client.client_kill_filter(_id=first)  # as when Redis restarts: the connection is gone
    reads.arm()
    try:
        reads.client.xread({"s": "$"}, block=MINUTE_MS)
    except redis.ConnectionError:
        pass  # no built-in retry: the loop reads again, which reconnects
    finally:
        reads.disarm()
    thread, result = blocking_read(reads, "s")
    blocked = blocked_in("xread")
    assert blocked != first and blocked == reads.connection_id
    reads.wake()
    thread.join(timeout=30)
    assert not thread.is_alive(), "the read that reconnected was not woken"
    assert result == [[]]
    reads.close()


def test_work_published_meanwhile_is_still_read(client: redis.Redis) -> None:
    """A wake never loses an entry: one added before the read blocks is returned by it."""
    reads = WakeableReads(client)
    client.xadd("s", {"k": "v"})
    reads.arm()
    rows = reads.client.xread({"s": "0"}, block=MINUTE_MS)
    reads.disarm()
    assert rows and len(rows[0][1]) == 1
    reads.close()


def test_a_wake_that_finds_nothing_blocked_leaves_the_loop_armed_for_the_next(
    client: redis.Redis, blocked_in: Callable[[str], int]
) -> None:
    """The lost wake of wake.py: armed, but the read not blocking yet. The unblock finds
    nothing to end, so the next wake is still sent and ends the block."""
    reads = WakeableReads(client)
    reads.arm()  # the loop checked for work; its read has not started
    reads.wake()
    assert reads.armed and reads.wakes == 1
    result: list[object] = []

    def read() -> None:
        try:
            result.append(reads.client.xread({"s": "$"}, block=MINUTE_MS))
        finally:
            reads.disarm()

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    assert blocked_in("xread") == reads.connection_id
    reads.wake()
    thread.join(timeout=30)
    assert not thread.is_alive() and result == [[]] and reads.wakes == 2
    assert not reads.armed  # disarmed by the loop: later wakes send nothing
    reads.wake()
    assert reads.wakes == 2


def test_a_busy_armed_loop_is_sent_at_most_two_wakes_per_cycle(client: redis.Redis) -> None:
    """Armed while it handles what it read (nothing blocked): many wakes, two UNBLOCKs."""
    reads = WakeableReads(client)
    reads.arm()
    for _ in range(100):
        reads.wake()
    assert reads.wakes == 2 and not reads.armed
    reads.disarm()
    reads.arm()  # a new cycle: woken again
    reads.wake()
    assert reads.wakes == 3
    reads.close()
