"""The log replica's tail on a real Redis: it applies what the leader commits while it runs,
with a linger entries committed during the pause after a read come in one read, it knows
how far behind the leader it reads, and it dozes and wakes (rebuilt from scratch)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
import redis

from actors.leader.service import LeaderService
from actors.leader.snapshots import SnapshotPolicy
from actors.runtime.replica import LogReplica
from actors.streams.names import StreamNames
from contracts import Job, Resources, Task, TaskGroup
from contracts.messages import LeaderRequest, RequestKind
from contracts.state_log import LogEntry, UpsertEvals, encode_entry

NAMES = StreamNames("replica")


def register(leader: LeaderService, job_id: str) -> int:
    task = Task(name="t", driver="mock", resources=Resources(cpu=10, memory_mb=10))
    job = Job(id=job_id, name=job_id, task_groups=(TaskGroup("g", 1, tasks=(task,)),))
    response = leader.handle(LeaderRequest(RequestKind.REGISTER_JOB, request_id=job_id, job=job))
    assert response.ok
    return response.index


def wait_for(done: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.005)


def counting_reads(replica: LogReplica) -> list[int]:
    """The entries each read of the log brought: applied, or passed over while dozing
    (reads that brought nothing are left out)."""
    reads: list[int] = []
    real = replica.catch_up

    def counted(block_ms: int | None = None, batch: int = 1000) -> int:
        before = replica.index
        applied = real(block_ms, batch)
        if replica.index != before:
            reads.append(replica.index - before)
        return applied

    replica.catch_up = counted  # type: ignore[method-assign]
    return reads


def tail(replica: LogReplica, linger_s: float) -> tuple[threading.Event, threading.Thread]:
    stop = threading.Event()
    thread = threading.Thread(target=replica.run, args=(stop, 50, linger_s), daemon=True)
    thread.start()
    return stop, thread


def test_the_tail_applies_what_is_committed_while_it_runs(client: redis.Redis) -> None:
    leader = LeaderService(client, NAMES)
    leader.start()
    replica = LogReplica(client, NAMES)
    stop, thread = tail(replica, 0.0)
    try:
        last = max(register(leader, f"job-{i}") for i in range(20))
        wait_for(lambda: replica.index == last)
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()
    assert sorted(j.id for j in replica.store.jobs()) == sorted(f"job-{i}" for i in range(20))


def test_with_a_linger_entries_committed_during_the_pause_come_in_one_read(
    client: redis.Redis,
) -> None:
    leader = LeaderService(client, NAMES)
    leader.start()
    replica = LogReplica(client, NAMES)
    reads = counting_reads(replica)
    stop, thread = tail(replica, 2.0)  # far longer than nine commits take
    try:
        first = register(leader, "first")
        wait_for(lambda: replica.index == first)  # read 1; the tail now lingers
        last = max(register(leader, f"job-{i}") for i in range(9))
        wait_for(lambda: replica.index == last)
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()  # a linger ends with stop
    assert reads == [1, 9]


def test_the_lag_is_how_late_the_newest_entry_was_applied(client: redis.Redis) -> None:
    """An entry the leader committed five seconds before this replica applies it: the
    replica reads five seconds behind."""
    stale = LogEntry(1, 1, UpsertEvals(()), committed_ns=time.time_ns() - 5_000_000_000)
    unstamped = LogEntry(2, 1, UpsertEvals(()))
    replica = LogReplica(client, NAMES)
    assert replica.lag_ns == 0
    replica.apply_rows([("1-0", {b"e": encode_entry(stale)})])
    assert 5_000_000_000 <= replica.lag_ns < 35_000_000_000
    replica.apply_rows([("2-0", {b"e": encode_entry(unstamped)})])  # no commit time: kept
    assert replica.lag_ns >= 5_000_000_000
    leader = LeaderService(client, NAMES)
    leader.start()
    index = register(leader, "fresh")
    follower = LogReplica(client, NAMES)
    assert follower.catch_up_to(index, timeout_s=10)
    assert 0 < follower.lag_ns < 5_000_000_000  # applied just after its commit


def woken_by(marker: bytes) -> Callable[[bytes], bool]:
    return lambda raw: marker in raw


def test_a_dozing_replica_passes_entries_over_until_one_wakes_it_then_rebuilds(
    client: redis.Redis,
) -> None:
    leader = LeaderService(client, NAMES)
    leader.start()
    resets: list[int] = []  # the store's index when the owner was told to forget
    replica = LogReplica(
        client, NAMES, on_reset=lambda: resets.append(replica.store.latest_index())
    )
    first = register(leader, "before")
    replica.load()
    replica.doze(woken_by(b'"wake-me"'))
    last = max(register(leader, f"job-{i}") for i in range(5))
    assert replica.catch_up_to(last, timeout_s=10)
    # Read up to the last entry, none of them applied.
    assert replica.index == last and replica.store.latest_index() == first
    assert replica.dozing() and [j.id for j in replica.store.jobs()] == ["before"]
    woke = register(leader, "wake-me")
    assert replica.catch_up_to(woke, timeout_s=10)
    assert not replica.dozing() and replica.rewinds == 1 and resets == [first]
    assert replica.store.latest_index() == woke == leader.store.latest_index()
    fresh = LogReplica(client, NAMES)
    fresh.load()
    assert sorted(j.id for j in replica.store.jobs()) == sorted(j.id for j in fresh.store.jobs())
    assert len(list(replica.store.jobs())) == 7
    # Awake, it applies as it did before dozing.
    after = register(leader, "after")
    assert replica.catch_up_to(after, timeout_s=10) and replica.store.job("default", "after")


def test_a_wake_from_another_thread_rebuilds_from_the_snapshot_of_a_trimmed_log(
    client: redis.Redis,
) -> None:
    """The log may be trimmed while a replica dozes: it wakes from the latest snapshot."""
    leader = LeaderService(client, NAMES, snapshot_policy=SnapshotPolicy(keep_tail=0))
    leader.start()
    replica = LogReplica(client, NAMES)
    replica.load()
    replica.doze(woken_by(b"never there"))
    stop, thread = tail(replica, 0.0)
    try:
        for i in range(6):
            register(leader, f"job-{i}")
        writer = leader.snapshot_writer
        written = writer.write(leader.store.snapshot(), leader.applied, leader.stats.term)
        assert written.ok and written.trimmed > 0
        last = register(leader, "last")
        wait_for(lambda: replica.index == last)
        assert replica.dozing() and list(replica.store.jobs()) == []
        replica.doze(woken_by(b"ignored"))  # dozing already: nothing changes
        replica.wake()
        wait_for(lambda: not replica.dozing())
    finally:
        stop.set()
        thread.join(timeout=10)
    assert replica.rewinds == 1 and replica.snapshot_loads == 1
    assert replica.store.latest_index() == last
    assert sorted(j.id for j in replica.store.jobs()) == sorted(
        [f"job-{i}" for i in range(6)] + ["last"]
    )


def test_a_rebuild_cut_short_starts_over_on_the_next_read(client: redis.Redis) -> None:
    leader = LeaderService(client, NAMES)
    leader.start()
    replica = LogReplica(client, NAMES)
    replica.load()
    replica.doze(woken_by(b"never there"))
    last = max(register(leader, f"job-{i}") for i in range(3))
    assert replica.catch_up_to(last, timeout_s=10)
    replica.wake()
    real_load = replica.load

    def redis_away() -> int:
        raise redis.ConnectionError("Redis away")

    replica.load = redis_away  # type: ignore[method-assign]
    with pytest.raises(redis.ConnectionError):
        replica.catch_up()
    assert replica.dozing() and replica.waking()  # nothing read from the half-built store
    replica.load = real_load  # type: ignore[method-assign]
    replica.catch_up()
    assert not replica.dozing() and replica.rewinds == 2
    assert sorted(j.id for j in replica.store.jobs()) == ["job-0", "job-1", "job-2"]


def test_a_dozing_tail_lingers_as_an_applying_one_does(client: redis.Redis) -> None:
    """Entries passed over count as read: after a read that brought some, the tail waits
    its linger, so that a stream of small jobs costs a dozing follower a read per batch."""
    leader = LeaderService(client, NAMES)
    leader.start()
    replica = LogReplica(client, NAMES)
    replica.load()
    replica.doze(woken_by(b"never there"))
    advanced = counting_reads(replica)
    stop, thread = tail(replica, 2.0)
    try:
        first = register(leader, "first")
        wait_for(lambda: replica.index == first)
        last = max(register(leader, f"job-{i}") for i in range(9))
        wait_for(lambda: replica.index == last)
    finally:
        stop.set()
        thread.join(timeout=10)
    assert replica.dozing() and len(advanced) == 2 and sum(advanced) == last - first + 1
