"""The leader service on a real Redis: fenced commits, rebuild after restart, and requests
applied exactly once even when they are delivered again or re-read by a new leader."""

from __future__ import annotations

import pytest
import redis

from actors.leader.durable_log import DurableLog, NotLeaderError
from actors.leader.service import LeaderService
from actors.streams import StreamBus, connect
from actors.streams.envelope import decode_message, registry_of
from actors.streams.names import LEADER_GROUP, StreamNames
from contracts import Evaluation, Job, Resources, Task, TaskGroup
from contracts.messages import LeaderRequest, LeaderResponse, RequestKind
from contracts.state_log import LogEntry, UpsertEvals
from launch.redis_server import EmbeddedRedis

NAMES = StreamNames("svc")


@pytest.fixture
def client(redis_server: EmbeddedRedis) -> redis.Redis:
    r = connect(redis_server.url)
    r.flushall()
    return r


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
