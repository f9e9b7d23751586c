"""Snapshots and the bounded log on a real Redis: the leader writes a snapshot and trims the
log before it; a restarted leader and every kind of follower start from the snapshot plus
the tail; a follower that lagged past the trim point reloads the snapshot; requests applied
before the snapshot are answered, never applied twice; a deposed leader's snapshot is refused.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from actors.broker.service import BrokerService
from actors.leader.service import LeaderService
from actors.leader.snapshots import SnapshotPolicy, SnapshotStats, SnapshotWriter
from actors.runtime.replica import LogReplica
from actors.runtime.snapshots import SnapshotStore
from actors.state.job_scoped import JobScopedStore
from actors.streams.names import StreamNames
from contracts import EvalStatus, Job, Node, NodeResources, Resources, Task, TaskGroup
from contracts.messages import LeaderRequest, RequestKind
from contracts.state_log import decode_entry

NAMES = StreamNames("snap")


def job(job_id: str, count: int = 1) -> Job:
    task = Task(name="t", driver="mock", resources=Resources(cpu=10, memory_mb=10))
    return Job(id=job_id, name=job_id, task_groups=(TaskGroup("g", count, tasks=(task,)),))


def register(leader: LeaderService, job_id: str, request_id: str = "") -> int:
    request = LeaderRequest(
        RequestKind.REGISTER_JOB, request_id=request_id or f"reg-{job_id}", job=job(job_id)
    )
    response = leader.submit(request)
    assert response.ok, response.error
    return response.index


def add_nodes(leader: LeaderService, count: int) -> None:
    nodes = tuple(
        Node(f"n{i}", f"n{i}", node_resources=NodeResources(cpu=4000, memory_mb=4096, disk_mb=1))
        for i in range(count)
    )
    request = LeaderRequest(RequestKind.UPSERT_NODES, request_id="nodes", nodes=nodes)
    assert leader.submit(request).ok


def first_log_index(client: redis.Redis) -> int:
    rows = client.xrange(NAMES.log, count=1)
    return int(rows[0][0].split(b"-")[0]) if rows else 0


def written(leader: LeaderService, at_least: int = 1, timeout_s: float = 30.0) -> SnapshotStats:
    """The leader's snapshot stats once `at_least` were written. A snapshot falls due with a
    commit but starts after that commit's answers went out, so a caller that has its answer
    may find no write started yet: it waits for the count, not for the writer."""
    writer = leader.snapshot_writer
    deadline = time.monotonic() + timeout_s
    while writer.stats.written < at_least and time.monotonic() < deadline:
        writer.wait(timeout_s)
        time.sleep(0.01)
    return writer.stats


def started(
    client: redis.Redis, run_in_thread: Callable[[Any], Callable[[], None]], **kw: Any
) -> tuple[LeaderService, Callable[[], None]]:
    leader = LeaderService(client, NAMES, **kw)
    leader.start()
    return leader, run_in_thread(leader)


def test_a_restarted_leader_starts_from_the_snapshot_and_the_tail(
    client: redis.Redis, run_in_thread: Callable[[Any], Callable[[], None]]
) -> None:
    policy = SnapshotPolicy(every_entries=10**9, keep_tail=2)
    leader, halt = started(client, run_in_thread, snapshot_policy=policy)
    add_nodes(leader, 3)
    for i in range(6):
        register(leader, f"j{i}")
    at = leader.write_snapshot()
    assert at == leader.store.latest_index()
    # The log keeps only the tail before the snapshot's index (and anything after it).
    assert first_log_index(client) == at - 1
    for i in range(6, 8):
        register(leader, f"j{i}")
    want = leader.store.snapshot()
    halt()

    again, halt = started(client, run_in_thread, snapshot_policy=policy)
    got = again.store
    assert got.latest_index() == want.latest_index()
    assert sorted(j.id for j in got.jobs()) == [f"j{i}" for i in range(8)]
    for j in want.jobs():
        assert got.job(j.namespace, j.id) == j
    assert sorted(e.id for e in got.evals()) == sorted(e.id for e in want.evals())
    assert got.table_indexes() == want.table_indexes()
    # A request applied before the snapshot is answered with its index, not applied again.
    before = got.latest_index()
    repeat = LeaderRequest(RequestKind.REGISTER_JOB, request_id="reg-j1", job=job("j1", 5))
    response = again.submit(repeat)
    assert response.ok and got.latest_index() == before
    assert got.job("default", "j1") == want.job("default", "j1")
    halt()


def test_snapshots_are_written_as_the_log_grows_and_the_log_stays_bounded(
    client: redis.Redis, run_in_thread: Callable[[Any], Callable[[], None]]
) -> None:
    policy = SnapshotPolicy(every_entries=8, keep_tail=4)
    leader, halt = started(client, run_in_thread, snapshot_policy=policy)
    for i in range(60):
        register(leader, f"j{i}")
    # A snapshot that fell due while the previous was being written starts with the next
    # commit after it: one more, once the writer is free.
    assert leader.snapshot_writer.wait(30)
    register(leader, "last")
    # Everything before the latest snapshot's tail is gone: at most an interval, the tail
    # and what the last batch added are left.
    bound = policy.every_entries + policy.keep_tail + 2
    deadline = time.monotonic() + 30
    while client.xlen(NAMES.log) > bound and time.monotonic() < deadline:
        leader.snapshot_writer.wait(30)
        time.sleep(0.01)
    assert client.xlen(NAMES.log) <= bound
    halt()  # no commit, so no snapshot, starts after this
    assert leader.snapshot_writer.wait(30)
    stats = leader.snapshot_writer.stats
    assert stats.written >= 2 and stats.failed == 0
    assert SnapshotStore(client, NAMES).latest_index() == stats.index
    # Only the latest snapshot's list is kept.
    assert len(list(client.scan_iter(NAMES.snapshot_data("*")))) == 1


@pytest.mark.parametrize("fork", [True, False])
def test_a_background_snapshot_is_written_by_a_forked_child_or_a_thread(
    client: redis.Redis, run_in_thread: Callable[[Any], Callable[[], None]], fork: bool
) -> None:
    policy = SnapshotPolicy(every_entries=4, keep_tail=0, fork=fork)
    leader, halt = started(client, run_in_thread, snapshot_policy=policy)
    for i in range(6):
        register(leader, f"j{i}")
    stats = written(leader)
    assert leader.snapshot_writer.wait(30)  # a later one, if it started, is done too
    assert stats.written >= 1 and stats.failed == 0
    assert (stats.fork_ms > 0) is fork
    assert stats.index == SnapshotStore(client, NAMES).latest_index() > 0
    assert stats.chunks > 0 and stats.bytes > 0
    want = sorted(j.id for j in leader.store.jobs())
    halt()
    again, halt = started(client, run_in_thread, snapshot_policy=policy)
    assert sorted(j.id for j in again.store.jobs()) == want == [f"j{i}" for i in range(6)]
    halt()


def test_a_forked_writer_that_fails_is_counted_and_the_next_interval_tries_again(
    client: redis.Redis, run_in_thread: Callable[[Any], Callable[[], None]], tmp_path: Any
) -> None:
    leader, halt = started(client, run_in_thread)
    register(leader, "a")
    writer = SnapshotWriter(
        SnapshotStore(redis.Redis(unix_socket_path=str(tmp_path / "gone.sock")), NAMES),
        SnapshotPolicy(every_entries=1),
    )
    writer.start(leader.store.snapshot(), {}, leader.stats.term, 0)
    assert writer.wait(30)
    assert writer.stats.written == 0 and writer.stats.failed == 1
    assert writer.stats.last_error.startswith("ConnectionError")
    assert writer.due(leader.store.latest_index() + 1, 0)
    halt()


def test_a_writer_that_cannot_fork_counts_a_failure_and_the_loop_goes_on(
    client: redis.Redis,
    run_in_thread: Callable[[Any], Callable[[], None]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    leader, halt = started(client, run_in_thread, snapshot_policy=SnapshotPolicy(every_entries=2))

    def no_fork() -> int:
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr(os, "fork", no_fork)
    for i in range(4):
        register(leader, f"j{i}")  # each turn with a snapshot due tries to fork
    stats = leader.snapshot_writer.stats
    assert stats.failed >= 1 and stats.written == 0
    assert stats.last_error == "forking the writer: [Errno 12] Cannot allocate memory"
    assert leader.stats.loop_errors == 0
    monkeypatch.undo()
    register(leader, "after-1")  # due again an interval after the failed one
    register(leader, "after-2")
    assert written(leader).written >= 1
    halt()


def test_followers_start_from_the_snapshot_and_reload_it_when_they_lag_past_the_trim(
    client: redis.Redis, run_in_thread: Callable[[Any], Callable[[], None]]
) -> None:
    leader, halt = started(client, run_in_thread, snapshot_policy=SnapshotPolicy(keep_tail=1))
    add_nodes(leader, 2)
    register(leader, "early")
    lagging = LogReplica(client, NAMES, store=JobScopedStore())
    resets: list[int] = []
    lagging.on_reset = lambda: resets.append(lagging.store.latest_index())
    lagging.load()
    lagged_at = lagging.store.latest_index()
    for i in range(5):
        register(leader, f"j{i}")
    at = leader.write_snapshot()
    register(leader, "late")
    # A new follower: the snapshot, then the tail.
    fresh = LogReplica(client, NAMES, decode=lambda raw: decode_entry(raw, compact=True))
    fresh.load()
    assert fresh.snapshot_loads == 1
    assert fresh.store.latest_index() == leader.store.latest_index()
    # The lagging one finds the entries after its index trimmed: it reloads the snapshot.
    assert lagging.catch_up_to(leader.store.latest_index(), 10)
    assert resets == [lagged_at] and lagging.snapshot_loads == 1
    for replica in (fresh, lagging):
        state = replica.store.snapshot()
        assert sorted(j.id for j in state.jobs()) == sorted(j.id for j in leader.store.jobs())
        assert sorted(e.id for e in state.evals()) == sorted(e.id for e in leader.store.evals())
    assert at < leader.store.latest_index()
    halt()


def test_a_deposed_leaders_snapshot_is_refused(
    client: redis.Redis, run_in_thread: Callable[[Any], Callable[[], None]]
) -> None:
    old, halt_old = started(client, run_in_thread)
    register(old, "a")
    state = old.store.snapshot()
    _new, halt_new = started(client, run_in_thread)  # takes a newer term
    outcome = old.snapshot_writer.write(state, {}, old.stats.term)
    assert not outcome.ok and outcome.reason == "term"
    assert SnapshotStore(client, NAMES).latest_index() == 0
    assert len(list(client.scan_iter(NAMES.snapshot_data("*")))) == 0
    halt_new()
    halt_old()


def test_a_leader_started_after_the_trim_hands_its_broker_the_pending_evaluations(
    client: redis.Redis, run_in_thread: Callable[[Any], Callable[[], None]]
) -> None:
    leader, halt = started(client, run_in_thread, snapshot_policy=SnapshotPolicy(keep_tail=0))
    add_nodes(leader, 2)
    for i in range(3):
        register(leader, f"j{i}")
    leader.write_snapshot()
    assert first_log_index(client) == 0  # nothing of the log is left
    pending = {e.id for e in leader.store.evals() if e.status is EvalStatus.PENDING}
    assert len(pending) == 3
    halt()
    broker = BrokerService(client, NAMES, capacity=8)
    successor = LeaderService(client, NAMES, broker=broker)
    successor.start()  # from the snapshot alone: its records feed the broker
    with broker.lock:
        delivered = {d.eval.id for d in broker._dequeue_ready()}
    assert delivered == pending


@pytest.mark.parametrize("bad", [b"", b"{}", b'{"Index": -1, "Term": 1, "Chunks": 0}'])
def test_a_bad_header_is_an_error_naming_the_field(client: redis.Redis, bad: bytes) -> None:
    from contracts.codec import CodecError
    from contracts.snapshot import decode_header

    with pytest.raises(CodecError):
        decode_header(bad)
