"""The leader service on a real Redis: fenced commits, rebuild after restart, requests
applied exactly once even when they are delivered again or re-read by a new leader, and the
plan hold that tests use to force concurrent plans. (Token and index fencing:
test_fencing.py.)"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from actors.leader.durable_log import DurableLog, NotLeaderError
from actors.leader.service import LeaderService
from actors.streams import StreamBus
from actors.streams.envelope import decode_message, registry_of
from actors.streams.names import LEADER_GROUP, StreamNames
from contracts import Evaluation, Job, Resources, Task, TaskGroup
from contracts.messages import LeaderRequest, LeaderResponse, PlanResponse, RequestKind
from contracts.state_log import LogEntry, UpsertEvals

NAMES = StreamNames("svc")


def job() -> Job:
    task = Task(name="t", driver="mock", resources=Resources(cpu=100, memory_mb=64))
    return Job(id="web", name="web", task_groups=(TaskGroup("g", 1, tasks=(task,)),))


def leader(client: redis.Redis) -> LeaderService:
    service = LeaderService(client, NAMES)
    service.start()
    return service


def send(client: redis.Redis, request: LeaderRequest) -> None:
    StreamBus(client).publish(NAMES.requests, [("LeaderRequest", request)])


def test_a_request_delivered_twice_commits_once(client: redis.Redis) -> None:
    first = leader(client)
    first.handle(LeaderRequest(RequestKind.REGISTER_JOB, request_id="reg", job=job()))
    stop = LeaderRequest(RequestKind.STOP_JOB, request_id="stop-1", job_id="web")
    send(client, stop)
    first.poll_once()
    index = first.store.latest_index()
    send(client, stop)  # at-least-once delivery: the same request again
    first.poll_once()
    assert first.store.latest_index() == index
    assert [v.version for v in first.store.job_versions("default", "web")] == [1, 0]


def test_a_new_leader_does_not_reapply_what_the_old_one_committed(client: redis.Redis) -> None:
    first = leader(client)
    first.handle(LeaderRequest(RequestKind.REGISTER_JOB, request_id="reg", job=job()))
    send(client, LeaderRequest(RequestKind.STOP_JOB, request_id="stop-1", job_id="web"))
    rows = client.xreadgroup(LEADER_GROUP, "leader", {NAMES.requests: ">"}, count=10)
    # The old leader commits the stop and dies before acking it: simulate by deciding it
    # directly while the entry stays in the group's pending list.
    first.handle(LeaderRequest(RequestKind.STOP_JOB, request_id="stop-1", job_id="web"))
    assert rows and client.xpending(NAMES.requests, LEADER_GROUP)["pending"] == 1

    second = leader(client)  # new term; rebuilt from the log; re-reads its pending entry
    assert second.stats.term == first.stats.term + 1
    index = second.store.latest_index()
    second.poll_once()
    assert second.store.latest_index() == index  # answered, not applied again
    assert [v.version for v in second.store.job_versions("default", "web")] == [1, 0]
    assert client.xpending(NAMES.requests, LEADER_GROUP)["pending"] == 0


def test_an_old_leader_can_no_longer_commit(client: redis.Redis) -> None:
    old = leader(client)
    leader(client)  # takes a newer term
    durable = DurableLog(client, NAMES)
    durable.term = old.stats.term
    with pytest.raises(NotLeaderError):
        durable.commit(
            old.store.latest_index(),
            [LogEntry(old.store.latest_index() + 1, old.stats.term, UpsertEvals(()))],
            [None],
        )


def test_an_answer_goes_out_once_durable_and_the_store_follows_even_if_it_fails(
    client: redis.Redis,
) -> None:
    service = leader(client)
    durable = DurableLog(client, NAMES)
    seen: list[tuple[int, int, int]] = []

    def answer(index: int) -> None:
        seen.append((index, durable.last_index(), service.store.latest_index()))

    index = service._commit([UpsertEvals(())], on_durable=answer)
    assert index is not None
    # Durable in Redis, not yet applied locally, when the answer is sent.
    assert seen == [(index, index, index - 1)]
    assert service.store.latest_index() == index

    def broken(index: int) -> None:
        raise redis.ConnectionError("reply stream unreachable")

    with pytest.raises(redis.ConnectionError):
        service._commit([UpsertEvals(())], request_id="r-2", on_durable=broken)
    # The commit is durable, so the store applied it and the request is remembered.
    assert service.store.latest_index() == durable.last_index() == index + 1
    assert service.applied["r-2"] == index + 1


def test_requests_someone_waits_on_go_before_fire_and_forget_ones(client: redis.Redis) -> None:
    service = leader(client)
    report = LeaderRequest(
        RequestKind.UPDATE_EVALS, request_id="report", evals=(Evaluation(id="e1", job_id="a"),)
    )
    waited = LeaderRequest(
        RequestKind.UPDATE_EVALS,
        request_id="waited",
        reply_to="svc:reply",
        evals=(Evaluation(id="e2", job_id="b"),),
    )
    send(client, report)
    send(client, waited)
    service.poll_once()  # one batch: both requests
    assert service.applied["waited"] < service.applied["report"]
    ((_, fields),) = client.xrange("svc:reply")
    _type, response, _trace = decode_message(fields, registry_of(LeaderResponse))
    assert isinstance(response, LeaderResponse)
    assert (response.request_id, response.ok) == ("waited", True)


# -- the plan hold ----------------------------------------------------------------------------


def poll_until(service: LeaderService, done: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "timed out polling the leader"
        service.poll_once()


def test_held_plans_are_applied_together_in_plan_queue_order_so_they_collide(
    harness: Any,
) -> None:
    """Two plans computed on the same empty node, each fitting alone: held, neither sees the
    other's commit, and the second one applied is partially rejected, on every run."""
    service = harness.leader()
    (node,) = harness.nodes(service, 1, cpu=1000)
    service.hold_plans(2, timeout_s=60)
    low = harness.plan("low", {node: 6}, cpu=100, priority=50)
    high = harness.plan("high", {node: 6}, cpu=100, priority=70, job_id="api")
    harness.send(low)
    service.poll_once()
    length = harness.log_length()
    assert service.held_plans() == [low] and harness.answers() == []
    # Requests keep flowing while plans are held.
    waited = LeaderRequest(
        RequestKind.UPDATE_EVALS,
        request_id="meanwhile",
        reply_to=harness.replies,
        evals=(Evaluation(id="e9", job_id="other"),),
    )
    harness.send(waited)
    service.poll_once()
    (answer,) = harness.answers()
    assert isinstance(answer, LeaderResponse) and answer.ok and answer.index == length + 1

    harness.send(high)  # the second one: the hold is full, both are applied
    service.poll_once()
    assert service.held_plans() == [] and service.stats.held_plans == 2
    plans = {a.eval_id: a for a in harness.answers() if isinstance(a, PlanResponse)}
    assert not plans["high"].result.rejected_nodes  # higher priority: applied first
    assert plans["high"].result.alloc_index == length + 2
    assert [r.node_id for r in plans["low"].result.rejected_nodes] == [node]
    assert service.stats.partial_plans == 1 and service.stats.placed == 6


def test_plans_after_the_hold_and_of_other_jobs_flow_on(harness: Any) -> None:
    service = harness.leader()
    nodes = harness.nodes(service, 2)
    service.hold_plans(1, timeout_s=60, job_ids=["web"])
    other = harness.plan("other", {nodes[0]: 1}, job_id="other")
    held = harness.plan("held", {nodes[1]: 1})
    harness.send(other, held, harness.plan("after", {nodes[1]: 1}, attempt=2))
    service.poll_once()  # one batch: the hold takes one plan of web, no more
    assert service.stats.held_plans == 1
    answered = [a.eval_id for a in harness.answers() if isinstance(a, PlanResponse)]
    assert sorted(answered) == ["after", "held", "other"]
    assert answered[0] == "held"  # it came before the batch's other plans


def test_a_hold_ends_on_release_or_on_its_deadline(harness: Any) -> None:
    service = harness.leader()
    (node,) = harness.nodes(service, 1)
    service.hold_plans(5, timeout_s=60)
    with pytest.raises(RuntimeError, match="already held"):
        service.hold_plans(1, timeout_s=60)
    harness.send(harness.plan("released", {node: 1}))
    poll_until(service, lambda: len(service.held_plans()) == 1)
    assert service.release_plans() == 1
    poll_until(service, lambda: len(harness.answers()) == 1)

    service.hold_plans(5, timeout_s=0.2)  # never full: the deadline lets it go
    harness.send(harness.plan("timed-out", {node: 1}))
    poll_until(service, lambda: len(harness.answers()) == 2)
    assert [a.eval_id for a in harness.answers()] == ["released", "timed-out"]
    assert service.stats.held_plans == 2 and service.release_plans() == 0


def test_a_request_submitted_while_the_loop_blocks_is_answered_at_once(
    client: redis.Redis, run_in_thread: Any
) -> None:
    """Requests submitted in process (the CLI's Ray calls) reach the loop through its inbox,
    not its stream: they cut its blocking read short. The block is a minute long here, so a
    request that waited it out would miss the 30 s deadline of `submit`."""
    service = LeaderService(client, NAMES, block_ms=60_000)
    service.start()
    halt = run_in_thread(service)
    try:
        deadline = time.monotonic() + 30
        while not any(
            int(c["id"]) == service.reads.connection_id and "b" in c["flags"]
            for c in client.client_list()
        ):
            assert time.monotonic() < deadline, "the loop never blocked on its stream"
            time.sleep(0.01)
        request = LeaderRequest(RequestKind.REGISTER_JOB, request_id="woken", job=job())
        response = service.submit(request, timeout_s=30)
        assert response.ok and service.store.snapshot().job("default", "web") is not None
        assert service.reads.wakes == 1
    finally:
        halt()


def test_a_turn_of_heartbeats_alone_leaves_the_heap_idle(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a turn that committed something counts as busy for the heap pacer: agents beat
    every few seconds, and each beat would otherwise keep the idle sweep off for good."""
    from actors.leader import service as module

    busy: list[int] = []
    idle: list[int] = []
    monkeypatch.setattr(module, "after_state_applied", lambda: busy.append(1))
    monkeypatch.setattr(module, "when_idle", lambda: idle.append(1) or False)
    service = leader(client)
    service.handle(LeaderRequest(RequestKind.REGISTER_JOB, request_id="reg", job=job()))
    send(client, LeaderRequest(RequestKind.NODE_HEARTBEAT, node_ids=("n1",)))
    assert service.poll_once() == 1
    assert (busy, idle) == ([], [1])
    send(client, LeaderRequest(RequestKind.STOP_JOB, request_id="stop", job_id="web"))
    assert service.poll_once() == 1
    assert (busy, idle) == ([1], [1])


def test_a_repeated_registration_is_answered_as_the_first_time(client: redis.Redis) -> None:
    """A registration re-read after a restart (or delivered twice) gets the eval it created
    and its job modify index again, not a bare index: `job run` prints and follows that eval."""
    first = leader(client)
    request = LeaderRequest(
        RequestKind.REGISTER_JOB, request_id="reg", reply_to="svc:reply", job=job()
    )
    original = first.handle(request)
    assert original.ok and original.eval_id and original.job_modify_index
    second = leader(client)  # a new term, rebuilt from the log
    repeated = second.handle(request)
    assert second.store.latest_index() == first.store.latest_index()  # not applied again
    assert (repeated.index, repeated.eval_id, repeated.job_modify_index) == (
        original.index,
        original.eval_id,
        original.job_modify_index,
    )


def test_nodes_whose_down_marking_failed_to_commit_are_marked_down_next_turn(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis went away as the leader committed missed heartbeats: the nodes are not
    forgotten (they beat no more, so nothing else would ever mark them down)."""
    from contracts import DriverInfo, Node, NodeResources, NodeStatus

    service = LeaderService(client, NAMES, heartbeat_ttl_s=0.05)
    service.start()
    node = Node(
        id="n1",
        name="n1",
        status=NodeStatus.READY,
        drivers={"mock": DriverInfo()},
        node_resources=NodeResources(cpu=1000, memory_mb=1024, disk_mb=1000),
    ).with_computed_class()
    assert service.handle(LeaderRequest(RequestKind.UPSERT_NODES, request_id="n", nodes=(node,))).ok
    time.sleep(0.1)
    commit = service.durable.commit

    def away(*args: Any, **kwargs: Any) -> Any:
        raise redis.ConnectionError("Redis went away")

    monkeypatch.setattr(service.durable, "commit", away)
    with pytest.raises(redis.ConnectionError):
        service.poll_once()
    monkeypatch.setattr(service.durable, "commit", commit)
    service.poll_once()  # rebuilds the store, then marks the node down
    stored = service.store.node("n1")
    assert stored is not None and stored.status is NodeStatus.DOWN


def test_an_unexpected_error_in_a_turn_rebuilds_the_store_and_the_loop_goes_on(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug must not leave an actor that looks alive with no leader loop behind it."""
    import threading

    service = leader(client)
    real = service._drain_inbox
    failures = [RuntimeError("a bug")]

    def drain_once_badly() -> int:
        if failures:
            raise failures.pop()
        return real()

    monkeypatch.setattr(service, "_drain_inbox", drain_once_badly)
    store_before = service.store
    stop = threading.Event()
    thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
    thread.start()
    try:
        response = service.submit(
            LeaderRequest(RequestKind.REGISTER_JOB, request_id="after", job=job()), timeout_s=30
        )
        assert response.ok and thread.is_alive()
        assert service.stats.loop_errors == 1 and service.store is not store_before
    finally:
        stop.set()
        thread.join(timeout=10)
