"""The log replica's tail on a real Redis: it applies what the leader commits while it runs,
with a linger entries committed during the pause after a read come in one read, and it
knows how far behind the leader it reads."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import redis

from actors.leader.service import LeaderService
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
    """The entries each read of the log applied (reads that applied nothing are left out)."""
    reads: list[int] = []
    real = replica.catch_up

    def counted(block_ms: int | None = None, batch: int = 1000) -> int:
        applied = real(block_ms, batch)
        if applied:
            reads.append(applied)
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
