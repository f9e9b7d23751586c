"""Poison evaluations on a real Redis, with a real leader, broker and two scheduler workers:
an evaluation whose scheduling crashes, or hangs past the broker's nack timeout, is
delivered up to the delivery limit and then marked failed with why its last delivery
failed; the workers live on and schedule every other job meanwhile."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

import actors.worker.service as worker_service
from actors.broker.service import BrokerService
from actors.leader.service import LeaderService
from actors.streams.names import StreamNames
from actors.worker.service import WorkerService
from contracts import (
    DriverInfo,
    EvalStatus,
    Job,
    Node,
    NodeResources,
    Resources,
    Task,
    TaskGroup,
)
from contracts.messages import LeaderRequest, RequestKind

NAMES = StreamNames("poison")


def job(job_id: str) -> Job:
    task = Task(name="t", driver="mock", resources=Resources(cpu=100, memory_mb=64))
    return Job(id=job_id, name=job_id, task_groups=(TaskGroup("g", 1, tasks=(task,)),))


@pytest.fixture
def cluster(
    client: redis.Redis,
    run_in_thread: Callable[[Any], Callable[[], None]],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[LeaderService, list[WorkerService], threading.Event]]:
    """Scheduling job "crash" raises; job "hang" sleeps until `release` (at most 20 s)."""
    release = threading.Event()
    real = worker_service.new_scheduler

    def poisoned(kind: str, state: Any, planner: Any) -> Any:
        scheduler = real(kind, state, planner)
        process = scheduler.process

        def process_or_poison(evaluation: Any) -> None:
            if evaluation.job_id == "crash":
                raise RuntimeError("poisoned evaluation")
            if evaluation.job_id == "hang":
                release.wait(20)
            process(evaluation)

        scheduler.process = process_or_poison
        return scheduler

    monkeypatch.setattr(worker_service, "new_scheduler", poisoned)
    broker = BrokerService(client, NAMES, capacity=2, nack_timeout_s=1.0, delivery_limit=2)
    leader = LeaderService(client, NAMES, broker=broker)
    workers = [WorkerService(f"w{i}", client, NAMES) for i in range(2)]
    services: list[Any] = [leader, broker, *workers]
    for service in services:
        service.start()
    halts = [run_in_thread(s) for s in reversed(services)]
    nodes = tuple(
        Node(
            f"n{i}",
            f"n{i}",
            drivers={"mock": DriverInfo()},
            node_resources=NodeResources(cpu=4000, memory_mb=4096, disk_mb=10_000),
        ).with_computed_class()
        for i in range(2)
    )
    assert leader.submit(LeaderRequest(RequestKind.UPSERT_NODES, request_id="n", nodes=nodes)).ok
    yield leader, workers, release
    release.set()
    for halt in halts:
        halt()


def register(leader: LeaderService, job_id: str) -> str:
    request = LeaderRequest(RequestKind.REGISTER_JOB, request_id=f"reg-{job_id}", job=job(job_id))
    assert leader.submit(request).ok
    (evaluation,) = leader.store.snapshot().evals_by_job("default", job_id)
    return evaluation.id


def wait_for(check: Callable[[], Any], timeout_s: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (value := check()):
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)
    return value


def status(leader: LeaderService, eval_id: str) -> Any:
    found = leader.store.snapshot().eval(eval_id)
    return found.status if found is not None else None


def placed(leader: LeaderService, job_id: str) -> bool:
    return bool(leader.store.snapshot().allocs_by_job("default", job_id))


def test_a_crashing_evaluation_is_failed_with_its_reason_and_the_rest_are_scheduled(
    cluster: tuple[LeaderService, list[WorkerService], threading.Event],
) -> None:
    leader, workers, _release = cluster
    poison = register(leader, "crash")
    fine = register(leader, "fine")
    wait_for(lambda: status(leader, poison) is EvalStatus.FAILED)
    failed = leader.store.snapshot().eval(poison)
    assert failed is not None
    assert "delivery limit (2)" in failed.status_description
    assert "RuntimeError: poisoned evaluation" in failed.status_description
    wait_for(lambda: placed(leader, "fine") and status(leader, fine) is EvalStatus.COMPLETE)
    # The workers live on: a later job is scheduled too.
    register(leader, "after")
    wait_for(lambda: placed(leader, "after"))
    assert sum(w.stats["nacks"] for w in workers) >= 2


def test_an_evaluation_that_hangs_past_the_nack_timeout_is_failed_with_the_reason(
    cluster: tuple[LeaderService, list[WorkerService], threading.Event],
) -> None:
    leader, _workers, release = cluster
    hung = register(leader, "hang")
    # Both workers take it in turn and hang; its deliveries time out and it is failed.
    wait_for(lambda: status(leader, hung) is EvalStatus.FAILED)
    failed = leader.store.snapshot().eval(hung)
    assert failed is not None and "no ack within 1s" in failed.status_description
    release.set()  # the hung workers come back and go on scheduling
    register(leader, "after-hang")
    wait_for(lambda: placed(leader, "after-hang"))
    # What the hung workers then tried to commit for it was fenced off: it stays failed.
    assert status(leader, hung) is EvalStatus.FAILED
