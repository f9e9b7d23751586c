"""The worker service against a real leader service, both on a real Redis in threads (no
Ray): a delivery planned, committed, its final status written fenced by the token and acked;
a superseded token refused at the plan and at the status write (nack); no leader answer (nack
with the reason, nothing lost)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from actors.leader.service import LEADER_MESSAGES, STALE_TOKEN, LeaderService
from actors.streams import StreamBus
from actors.streams.envelope import decode_message, registry_of
from actors.streams.names import StreamNames
from actors.worker.service import WorkerService
from contracts import (
    DriverInfo,
    EvalStatus,
    Evaluation,
    Job,
    Node,
    NodeResources,
    Resources,
    Task,
    TaskGroup,
)
from contracts.messages import AckOutcome, EvalAck, EvalDelivery, LeaderRequest, RequestKind

NAMES = StreamNames("wrk")


@pytest.fixture
def leader(run_in_thread: Any, client: redis.Redis) -> Iterator[LeaderService]:
    """A leader serving its streams on a thread (the test talks to it through `submit`)."""
    service = LeaderService(client, NAMES)
    service.start()
    halt = run_in_thread(service)
    yield service
    halt()


def node(node_id: str) -> Node:
    return Node(
        id=node_id,
        name=node_id,
        drivers={"mock": DriverInfo()},
        node_resources=NodeResources(cpu=4000, memory_mb=4096, disk_mb=10_000),
    ).with_computed_class()


def job(job_id: str, count: int = 2) -> Job:
    task = Task(name="t", driver="mock", resources=Resources(cpu=100, memory_mb=64))
    return Job(id=job_id, name=job_id, task_groups=(TaskGroup("g", count, tasks=(task,)),))


def write(leader: LeaderService, request: LeaderRequest, on_loop: bool = True) -> int:
    response = leader.submit(request) if on_loop else leader.handle(request)
    assert response.ok, response.error
    return response.index


def register(leader: LeaderService, job_id: str, on_loop: bool = True) -> tuple[Evaluation, int]:
    """The pending eval a job registration created, and the index it committed at."""
    request = LeaderRequest(RequestKind.REGISTER_JOB, request_id=f"reg-{job_id}", job=job(job_id))
    index = write(leader, request, on_loop)
    (evaluation,) = leader.store.snapshot().evals_by_job("default", job_id)
    return evaluation, index


def add_nodes(leader: LeaderService, *node_ids: str, on_loop: bool = True) -> None:
    nodes = tuple(node(n) for n in node_ids)
    write(leader, LeaderRequest(RequestKind.UPSERT_NODES, request_id="nodes", nodes=nodes), on_loop)


def deliver(client: redis.Redis, delivery: EvalDelivery, outstanding: str | None = None) -> None:
    """What the broker does: the outstanding token into the fencing hash, then the delivery."""
    client.hset(NAMES.tokens_key, delivery.eval.id, outstanding or delivery.token)
    StreamBus(client).publish(NAMES.deliveries, [("EvalDelivery", delivery)])


def acks(client: redis.Redis) -> list[EvalAck]:
    out = []
    for _id, fields in client.xrange(NAMES.acks):
        _type, ack, _trace = decode_message(fields, registry_of(EvalAck))
        assert isinstance(ack, EvalAck)
        out.append(ack)
    return out


def wait_for(done: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def test_deliveries_are_planned_committed_and_acked_once_their_status_is_written(
    run_in_thread: Any, client: redis.Redis, leader: LeaderService
) -> None:
    add_nodes(leader, "n1", "n2")
    first, _ = register(leader, "a")
    second, index = register(leader, "b")
    worker = WorkerService("w1", client, NAMES)
    worker.start()
    # Two at once: the second is scheduled while the first's ack waits for its answer.
    deliver(client, EvalDelivery(first, "token-a", index))
    deliver(client, EvalDelivery(second, "token-b", index))
    halt = run_in_thread(worker)
    try:
        wait_for(lambda: len(acks(client)) == 2)
    finally:
        halt()

    assert [(a.eval_id, a.token, a.outcome, a.worker) for a in acks(client)] == [
        (first.id, "token-a", AckOutcome.ACK, "w1"),
        (second.id, "token-b", AckOutcome.ACK, "w1"),
    ]
    state = leader.store.snapshot()
    for evaluation in (first, second):
        placed = state.allocs_by_job("default", evaluation.job_id)
        assert len(placed) == 2 and {a.eval_id for a in placed} == {evaluation.id}
        done = state.eval(evaluation.id)
        assert done is not None and done.status is EvalStatus.COMPLETE  # the fenced write
    assert worker.stats["evals"] == 2 and worker.stats["plans"] == 2
    assert worker.stats["nacks"] == 0


def requests_logged(client: redis.Redis) -> list[str]:
    """The kinds of the requests on the leader's stream, in order."""
    kinds = []
    for _id, fields in client.xrange(NAMES.requests):
        _type, message, _trace = decode_message(fields, LEADER_MESSAGES)
        kinds.append(str(message.kind) if isinstance(message, LeaderRequest) else _type)
    return kinds


def schedule_one(run_in_thread: Any, client: redis.Redis, delivery: EvalDelivery) -> None:
    """A fresh worker takes `delivery`; returns once it acked (or nacked) it."""
    worker = WorkerService("w1", client, NAMES)
    worker.start()
    deliver(client, delivery)
    halt = run_in_thread(worker)
    try:
        wait_for(lambda: len(acks(client)) == 1)
    finally:
        halt()


def test_a_plan_committed_in_full_carries_the_final_status(
    run_in_thread: Any, client: redis.Redis, leader: LeaderService
) -> None:
    """The usual eval sends one message to the leader, its plan: the final status rides in
    the plan's entry, so no status request follows and the ack goes at once."""
    add_nodes(leader, "n1", "n2")
    evaluation, index = register(leader, "a")
    schedule_one(run_in_thread, client, EvalDelivery(evaluation, "token-a", index))

    assert acks(client)[0].outcome is AckOutcome.ACK
    assert requests_logged(client) == ["PlanSubmission"]
    state = leader.store.snapshot()
    done = state.eval(evaluation.id)
    assert done is not None and done.status is EvalStatus.COMPLETE
    assert done.queued_allocations == {"g": 0}
    (placed, *_) = state.allocs_by_job("default", "a")
    assert done.modify_index == placed.create_index  # one entry: plan and status


def test_failed_placements_end_in_the_plan_s_entry_with_their_blocked_eval(
    run_in_thread: Any, client: redis.Redis, leader: LeaderService
) -> None:
    """A group that only partly fits: the plan commits what fits (in full, from the
    leader's view), and the status with its failures and blocked eval rides along."""
    add_nodes(leader, "n1")  # 4000 MHz: 40 of the 50 fit
    request = LeaderRequest(RequestKind.REGISTER_JOB, request_id="reg-big", job=job("big", 50))
    index = write(leader, request)
    (evaluation,) = leader.store.snapshot().evals_by_job("default", "big")
    schedule_one(run_in_thread, client, EvalDelivery(evaluation, "t", index))

    assert requests_logged(client) == ["PlanSubmission"]
    state = leader.store.snapshot()
    done = state.eval(evaluation.id)
    assert done is not None and done.status is EvalStatus.COMPLETE
    assert done.queued_allocations == {"g": 10} and done.failed_tg_allocs
    blocked = state.eval(done.blocked_eval)
    assert blocked is not None and blocked.status is EvalStatus.BLOCKED
    assert len(state.allocs_by_job("default", "big")) == 40


def test_a_restarted_worker_s_status_writes_are_applied_not_taken_for_repeats(
    run_in_thread: Any, client: redis.Redis, leader: LeaderService
) -> None:
    """Ray restarts a dead worker under the same id: the new incarnation's requests must not
    reuse the old one's ids, or the leader answers them as already applied and the evals
    they finish stay pending for good."""
    add_nodes(leader, "n1", "n2")
    first, index = register(leader, "a")
    second, index = register(leader, "b")
    for settled, (evaluation, token) in enumerate(((first, "token-a"), (second, "token-b"))):
        worker = WorkerService("w1", client, NAMES)  # a new incarnation each time
        worker.start()
        deliver(client, EvalDelivery(evaluation, token, index))
        halt = run_in_thread(worker)
        try:
            wait_for(lambda n=settled: len(acks(client)) == n + 1)
        finally:
            halt()
    state = leader.store.snapshot()
    for evaluation in (first, second):
        done = state.eval(evaluation.id)
        assert done is not None and done.status is EvalStatus.COMPLETE, evaluation.job_id


def test_a_plan_under_a_superseded_token_is_refused_and_the_delivery_nacked(
    run_in_thread: Any, client: redis.Redis, leader: LeaderService
) -> None:
    add_nodes(leader, "n1")
    evaluation, index = register(leader, "a")
    worker = WorkerService("w1", client, NAMES)
    worker.start()
    # The broker redelivered the eval meanwhile: its outstanding token is another one.
    deliver(client, EvalDelivery(evaluation, "old", index), outstanding="new")
    halt = run_in_thread(worker)
    try:
        wait_for(lambda: len(acks(client)) == 1)
    finally:
        halt()

    (ack,) = acks(client)
    assert (ack.outcome, ack.token, ack.reason) == (AckOutcome.NACK, "old", STALE_TOKEN)
    assert leader.stats.stale_plans == 1
    assert worker.stats["nacks"] == 1
    state = leader.store.snapshot()
    assert state.allocs_by_job("default", "a") == []
    pending = state.eval(evaluation.id)
    assert pending is not None and pending.status is EvalStatus.PENDING


def test_the_final_status_is_fenced_too_and_the_redelivery_writes_it(
    run_in_thread: Any, client: redis.Redis, leader: LeaderService
) -> None:
    # No nodes: nothing to plan, so the only write is the eval's status and its blocked eval.
    evaluation, index = register(leader, "a")
    worker = WorkerService("w1", client, NAMES)
    worker.start()
    halt = run_in_thread(worker)
    try:
        deliver(client, EvalDelivery(evaluation, "old", index), outstanding="new")
        wait_for(lambda: len(acks(client)) == 1)
        assert acks(client)[0].outcome is AckOutcome.NACK
        assert acks(client)[0].reason == STALE_TOKEN
        state = leader.store.snapshot()
        assert [e.status for e in state.evals_by_job("default", "a")] == [EvalStatus.PENDING]

        deliver(client, EvalDelivery(evaluation, "new", index))
        wait_for(lambda: len(acks(client)) == 2)
    finally:
        halt()
    assert acks(client)[1].outcome is AckOutcome.ACK
    state = leader.store.snapshot()
    done = state.eval(evaluation.id)
    assert done is not None and done.status is EvalStatus.COMPLETE and done.failed_tg_allocs
    blocked = state.eval(done.blocked_eval)
    assert blocked is not None and blocked.status is EvalStatus.BLOCKED
    assert worker.stats["nacks"] == 1  # the refused status write


def test_without_a_leader_answer_the_eval_is_nacked_with_the_reason(client: redis.Redis) -> None:
    leader = LeaderService(client, NAMES)  # started, but its loop never runs: no answers
    leader.start()
    add_nodes(leader, "n1", on_loop=False)
    evaluation, index = register(leader, "a", on_loop=False)
    worker = WorkerService("w1", client, NAMES, wait_timeout_s=0.2, reply_timeout_s=0.5)
    worker.start()

    outcome, reason, request_id, _ = worker.process(EvalDelivery(evaluation, "t1", index))
    assert (outcome, request_id) == (AckOutcome.NACK, "")
    assert reason.startswith("LeaderUnavailable: no PlanResponse")

    # A replica that cannot reach the delivery's wait index is no ground to schedule on.
    outcome, reason, *_ = worker.process(EvalDelivery(evaluation, "t2", index + 5))
    assert outcome is AckOutcome.NACK and f"did not reach {index + 5}" in reason
    assert worker.stats["nacks"] == 2 and worker.stats["plans"] == 0
    assert leader.store.snapshot().allocs_by_job("default", "a") == []


def test_an_unanswered_status_write_is_nacked_not_acked(
    run_in_thread: Any, client: redis.Redis
) -> None:
    leader = LeaderService(client, NAMES)  # no loop: the status write is never answered
    leader.start()
    evaluation, index = register(leader, "a", on_loop=False)  # no nodes: no plan either
    worker = WorkerService("w1", client, NAMES, reply_timeout_s=0.5)
    worker.start()
    deliver(client, EvalDelivery(evaluation, "t1", index))
    halt = run_in_thread(worker)
    try:
        wait_for(lambda: len(acks(client)) == 1)
    finally:
        halt()
    (ack,) = acks(client)
    assert ack.outcome is AckOutcome.NACK and "no LeaderResponse" in ack.reason
