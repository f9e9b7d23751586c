"""The leader link against a real leader service on a real Redis: concurrent callers each get
their own answer, a request sent while no leader runs is answered once one does (it waits on
the stream, not in a connection), a leader that never answers gives `LeaderUnanswered`, and
stopping the link deletes its response stream."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import redis

from actors.leader.service import LeaderService
from actors.streams.leader_link import LeaderLink, LeaderUnanswered
from actors.streams.names import StreamNames
from contracts import Job, Resources, Task, TaskGroup
from contracts.messages import LeaderRequest, LeaderResponse, RequestKind
from tests.cycles import in_a_cycle

NAMES = StreamNames("link")


@pytest.fixture
def link(client: redis.Redis) -> Iterator[LeaderLink]:
    made = LeaderLink(client, NAMES, "test", timeout_s=20).start()
    yield made
    made.stop()


def register(job_id: str) -> LeaderRequest:
    task = Task(name="t", driver="mock", resources=Resources(cpu=10, memory_mb=10))
    job = Job(id=job_id, name=job_id, task_groups=(TaskGroup("g", 1, tasks=(task,)),))
    return LeaderRequest(RequestKind.REGISTER_JOB, request_id=f"reg-{job_id}", job=job)


def test_concurrent_callers_each_get_their_own_answer(
    run_in_thread: Any, client: redis.Redis, link: LeaderLink
) -> None:
    leader = LeaderService(client, NAMES)
    leader.start()
    halt = run_in_thread(leader)
    try:
        with ThreadPoolExecutor(16) as pool:
            responses = list(pool.map(lambda i: link.send(register(f"job-{i}")), range(200)))
    finally:
        halt()
    assert all(r.ok for r in responses)
    assert [r.request_id for r in responses] == [f"reg-job-{i}" for i in range(200)]
    assert len({r.index for r in responses}) == 200  # each its own commit
    snapshot = leader.store.snapshot()
    for response in responses:
        job = snapshot.job("default", response.request_id.removeprefix("reg-"))
        assert job is not None and job.job_modify_index == response.job_modify_index


def test_a_request_waits_on_the_stream_for_a_leader_to_come(
    run_in_thread: Any, client: redis.Redis, link: LeaderLink
) -> None:
    answered: list[LeaderResponse] = []
    sender = threading.Thread(target=lambda: answered.append(link.send(register("late"))))
    sender.start()
    # The request is on the stream before any leader reads it.
    while not client.exists(NAMES.requests):
        threading.Event().wait(0.01)
    leader = LeaderService(client, NAMES)
    leader.start()
    halt = run_in_thread(leader)
    try:
        sender.join(timeout=20)
    finally:
        halt()
    assert not sender.is_alive()
    (response,) = answered
    assert response.ok and leader.store.job("default", "late") is not None


def test_no_answer_in_time_is_an_error_naming_the_request(
    client: redis.Redis, link: LeaderLink
) -> None:
    with pytest.raises(LeaderUnanswered, match="reg-nobody"):
        link.send(register("nobody"), timeout_s=0.3)
    # The caller gave up; nothing waits for that id any more.
    assert not link._waiting


def test_a_submitted_request_returns_at_once_and_its_future_gets_the_answer(
    run_in_thread: Any, client: redis.Redis, link: LeaderLink
) -> None:
    futures = [link.submit(register(f"sub-{i}")) for i in range(50)]
    assert not any(f.done() for f in futures)  # no leader yet: sent, not answered
    leader = LeaderService(client, NAMES)
    leader.start()
    halt = run_in_thread(leader)
    try:
        responses = [f.result(timeout=20) for f in futures]
    finally:
        halt()
    assert [r.request_id for r in responses] == [f"reg-sub-{i}" for i in range(50)]
    assert all(r.ok for r in responses) and not link._waiting


def test_a_cancelled_submission_is_forgotten_and_its_late_answer_dropped(
    run_in_thread: Any, client: redis.Redis, link: LeaderLink
) -> None:
    given_up = link.submit(register("given-up"))
    assert given_up.cancel()
    assert not link._waiting  # the caller gave up: nothing waits for that id any more
    leader = LeaderService(client, NAMES)
    leader.start()
    halt = run_in_thread(leader)
    try:
        # Its answer arrives after the cancel and is dropped; the next one is delivered.
        assert link.send(register("after")).ok
    finally:
        halt()
    assert given_up.cancelled() and leader.store.job("default", "given-up") is not None


def test_a_request_needs_an_id(link: LeaderLink) -> None:
    with pytest.raises(ValueError, match="request id"):
        link.send(LeaderRequest(RequestKind.REGISTER_JOB))
    with pytest.raises(ValueError, match="request id"):
        link.submit(LeaderRequest(RequestKind.REGISTER_JOB))


def test_stop_deletes_the_response_stream(run_in_thread: Any, client: redis.Redis) -> None:
    link = LeaderLink(client, NAMES, "gone", timeout_s=5).start()
    leader = LeaderService(client, NAMES)
    leader.start()
    halt = run_in_thread(leader)
    try:
        assert link.send(register("one")).ok
    finally:
        halt()
    assert client.exists(link.stream)
    link.stop()
    assert not client.exists(link.stream)


def test_a_send_right_after_start_is_answered(client: redis.Redis, run_in_thread: Any) -> None:
    """The reader reads its stream from the start: an answer written before its first read
    (the leader is quick, the reader thread not yet scheduled) is not skipped."""
    leader = LeaderService(client, NAMES)
    leader.start()
    run_in_thread(leader)
    for i in range(20):
        fresh = LeaderLink(client, NAMES, "fresh", timeout_s=10).start()
        try:
            assert fresh.send(register(f"fresh-{i}")).ok
        finally:
            fresh.stop()


def test_the_reader_outlives_a_failed_read(client: redis.Redis, run_in_thread: Any) -> None:
    link = LeaderLink(client, NAMES, "flaky", timeout_s=10)
    real = link._reads.client.client_id
    failures: list[int] = []

    def failing_once() -> Any:
        if not failures:
            failures.append(1)
            raise redis.ConnectionError("Redis restarting")
        return real()

    link._reads.client.client_id = failing_once  # type: ignore[method-assign]
    link.start()
    leader = LeaderService(client, NAMES)
    leader.start()
    run_in_thread(leader)
    try:
        assert link.send(register("after-failure")).ok
    finally:
        link.stop()
    assert failures == [1]


def test_an_answered_submission_is_in_no_reference_cycle(
    run_in_thread: Any, client: redis.Redis, link: LeaderLink
) -> None:
    future = link.submit(register("freed"))
    leader = LeaderService(client, NAMES)
    leader.start()
    halt = run_in_thread(leader)
    try:
        assert future.result(timeout=20).ok
    finally:
        halt()
    # Its callbacks do not refer back to it: refcounting frees it, not the cyclic collector.
    assert not in_a_cycle(future)
