"""The API's backend on a real Redis with a real leader service on a thread (no Ray): reads
after writes through the agent's own replica, blocking waits on that replica, the ACL
bootstrap shared through Redis, and what a backend without fleets answers."""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Iterator
from concurrent.futures import Future

import orjson
import pytest
import redis

from actors.agent.core import FleetSpec
from actors.api.acl_redis import RedisAclStore
from actors.api.core import ApiError
from actors.api.core.event_topics import EventFilter, parse_topics
from actors.api.service import ApiService
from actors.leader.service import LeaderService
from actors.leader.snapshots import SnapshotPolicy
from actors.streams.names import StreamNames
from contracts import Job, Resources, Task, TaskGroup
from contracts.acl import hash_secret
from contracts.messages import LeaderRequest, LeaderResponse, RequestKind
from contracts.state_log import LogEntry, decode_entry
from tests.cycles import in_a_cycle

NAMES = StreamNames("api")


@pytest.fixture
def leader(client: redis.Redis) -> Iterator[LeaderService]:
    service = LeaderService(client, NAMES)
    service.start()
    stop = threading.Event()
    thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
    thread.start()
    yield service
    stop.set()
    thread.join(timeout=30)


@pytest.fixture
def api(client: redis.Redis, leader: LeaderService) -> Iterator[ApiService]:
    service = ApiService(client, NAMES, leader.submit).start()
    yield service
    service.stop()
    assert service._thread is not None and not service._thread.is_alive()


def job(job_id: str) -> Job:
    task = Task(name="t", driver="mock", resources=Resources(cpu=100, memory_mb=64))
    return Job(id=job_id, name=job_id, task_groups=(TaskGroup("g", 1, tasks=(task,)),))


def test_every_write_is_readable_from_the_replica_as_soon_as_it_returns(
    client: redis.Redis, leader: LeaderService
) -> None:
    sent: list[LeaderRequest] = []

    def send(request: LeaderRequest) -> LeaderResponse:
        sent.append(request)
        return leader.submit(request)

    def slow_decode(raw: bytes) -> LogEntry:
        time.sleep(0.05)  # a replica that lags behind the leader: the race made wide
        return decode_entry(raw)

    api = ApiService(client, NAMES, send)
    api.replica.decode = slow_decode
    api.start()
    try:
        for i in range(5):
            response = api.write(LeaderRequest(RequestKind.REGISTER_JOB, job=job(f"job-{i}")))
            # Not eventually: a read waits until the replica (its own tail thread) holds it.
            state = api.snapshot()
            assert state.latest_index() >= response.index > 0
            assert state.job("default", f"job-{i}") is not None
        kept = api.write(LeaderRequest(RequestKind.STOP_JOB, request_id="mine", job_id="job-0"))
        assert kept.ok
    finally:
        api.stop()
    # Every write goes out with an id, so that the leader applies a re-sent one once.
    ids = [r.request_id for r in sent]
    assert all(ids) and len(set(ids)) == len(ids) and ids[-1] == "mine"


def test_a_write_is_answered_without_waiting_for_the_replica_and_reads_wait_for_it(
    client: redis.Redis, leader: LeaderService
) -> None:
    """The read barrier: a write returns once the leader committed it; the replica catches
    up behind, and a read through this API waits until it holds every answered write."""
    gate = threading.Event()

    def gated_decode(raw: bytes) -> LogEntry:
        gate.wait(30)  # the replica cannot apply anything until the gate opens
        return decode_entry(raw)

    api = ApiService(client, NAMES, leader.submit)
    api.replica.decode = gated_decode
    api.start()
    try:
        response = api.write(LeaderRequest(RequestKind.REGISTER_JOB, job=job("web")))
        assert response.ok and api.replica.index < response.index  # answered all the same
        assert api.read_barrier == response.index
        seen: list[int] = []
        reader = threading.Thread(target=lambda: seen.append(api.snapshot().latest_index()))
        reader.start()
        reader.join(timeout=0.3)
        assert reader.is_alive() and not seen  # the read waits for the replica...
        gate.set()
        reader.join(timeout=30)
        assert seen and seen[0] >= response.index  # ...and then holds the write
        assert api.snapshot().job("default", "web") is not None
    finally:
        gate.set()
        api.stop()


def test_a_blocking_wait_returns_once_the_replica_passes_the_index(
    api: ApiService, leader: LeaderService
) -> None:
    index = api.snapshot().latest_index()
    seen: list[int] = []
    returned = threading.Event()

    def blocking_read() -> None:
        api.wait_after(index, timeout_s=60)
        seen.append(api.snapshot().latest_index())
        returned.set()

    threading.Thread(target=blocking_read, daemon=True).start()
    # Nothing was written: the wait must still be waiting (a probe, not a synchronisation).
    assert not returned.wait(0.3)
    response = leader.submit(
        LeaderRequest(RequestKind.REGISTER_JOB, request_id="r1", job=job("web"))
    )
    assert returned.wait(60)
    assert seen == [response.index] and seen[0] > index

    # With nothing new, a wait ends at its timeout and the replica has not moved.
    api.wait_after(response.index, timeout_s=0.1)
    assert api.snapshot().latest_index() == response.index


def test_the_acl_bootstrap_happens_once_across_agents_and_its_token_resolves_everywhere(
    client: redis.Redis, leader: LeaderService
) -> None:
    first = ApiService(client, NAMES, leader.submit, acl_enabled=True)
    other = ApiService(client, NAMES, leader.submit, acl_enabled=True)  # another agent
    issued = first.bootstrap_acl()
    assert issued.token.type == "management" and len(issued.secret_id) == 36
    with pytest.raises(ApiError) as refused:
        other.bootstrap_acl("chosen-secret")
    assert (refused.value.status, refused.value.message) == (400, "ACL bootstrap already done")

    resolved = other.acl.resolve(issued.secret_id)  # read from Redis, then cached
    assert resolved is not None and resolved[0] == issued.token and resolved[1].management
    assert other.acl.resolve("chosen-secret") is None
    assert other.acl.resolve("") is None
    # Only the secret's hash is kept, anywhere in Redis.
    stored = b"".join(
        k + v
        for key in (NAMES.acl_tokens, NAMES.acl_secrets)
        for k, v in client.hgetall(key).items()
    )
    assert (
        issued.secret_id.encode() not in stored and hash_secret(issued.secret_id).encode() in stored
    )


def test_tokens_and_policies_made_on_one_agent_hold_on_another(
    client: redis.Redis, leader: LeaderService
) -> None:
    first = ApiService(client, NAMES, leader.submit, acl_enabled=True)
    other = ApiService(client, NAMES, leader.submit, acl_enabled=True)
    first.acl.put_policy("readonly", "", 'namespace "default" { policy = "read" }')
    issued = first.acl.create_token("ci", "client", ["readonly"])
    found = other.acl.resolve(issued.secret_id)
    assert found is not None and found[0].policies == ("readonly",)
    assert found[1].allows("default", "read-job") and not found[1].allows("default", "submit-job")
    first.acl.delete_token(issued.token.accessor_id)
    assert first.acl.resolve(issued.secret_id) is None  # its own change: at once
    assert RedisAclStore(client, NAMES).token_by_hash(hash_secret(issued.secret_id)) is None


def test_without_a_fleet_manager_a_fleet_is_refused_with_the_reason(
    client: redis.Redis, leader: LeaderService
) -> None:
    api = ApiService(client, NAMES, leader.submit)
    with pytest.raises(ApiError) as refused:
        api.apply_fleet(FleetSpec(name="sim", count=2, cpu_mhz=4000, memory_mb=4096))
    assert refused.value.status == 400 and "no simulated fleets" in refused.value.message
    assert list(api.fleets()) == []


def test_a_submitted_write_resolves_once_the_replica_reads_it_and_can_be_given_up(
    client: redis.Redis, leader: LeaderService
) -> None:
    """The HTTP server's path: the write is sent, the answer comes later on the link's
    thread; whoever waits on the future then reads its own write, as after `write`."""
    from actors.streams.leader_link import LeaderLink

    def slow_decode(raw: bytes) -> LogEntry:
        time.sleep(0.05)  # a replica that lags behind the leader
        return decode_entry(raw)

    link = LeaderLink(client, NAMES, "api", timeout_s=10).start()
    api = ApiService(client, NAMES, link.send, submit=link.submit, write_timeout_s=10)
    api.replica.decode = slow_decode
    api.start()
    try:
        futures = [
            api.submit(LeaderRequest(RequestKind.REGISTER_JOB, job=job(f"sub-{i}")))
            for i in range(5)
        ]
        for i, future in enumerate(futures):
            response = future.result(timeout=10)
            assert response.ok and api.read_barrier >= response.index > 0
            assert api.snapshot().job("default", f"sub-{i}") is not None
        given_up = api.submit(LeaderRequest(RequestKind.REGISTER_JOB, job=job("given-up")))
        given_up.cancel()
        assert not link._waiting  # the link forgets it too
    finally:
        api.stop()
        link.stop()


def test_without_a_submit_of_its_own_a_submitted_write_is_answered_before_it_returns(
    client: redis.Redis, leader: LeaderService
) -> None:
    api = ApiService(client, NAMES, leader.submit).start()
    try:
        future = api.submit(LeaderRequest(RequestKind.REGISTER_JOB, job=job("in-place")))
        assert future.done() and future.result().ok
        assert api.snapshot().job("default", "in-place") is not None
    finally:
        api.stop()


def test_a_write_while_redis_is_unreachable_is_a_503_and_reads_go_on(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    from actors.streams import connect
    from actors.streams.leader_link import LeaderLink
    from launch.redis_server import EmbeddedRedis

    names = StreamNames("down")
    with EmbeddedRedis(tmp_path_factory.mktemp("redis-down"), appendonly=False) as server:
        leader = LeaderService(connect(server.url), names)
        leader.start()
        stop = threading.Event()
        thread = threading.Thread(target=leader.run, args=(stop,), daemon=True)
        thread.start()
        link = LeaderLink(connect(server.url), names, "api", timeout_s=5.0).start()
        api = ApiService(connect(server.url), names, link.send, submit=link.submit).start()
        try:
            assert api.write(LeaderRequest(RequestKind.REGISTER_JOB, job=job("before"))).ok
            server.stop()
            # Waited for, or sent from the HTTP server (its future fails: the link's outbox
            # writes it on its own thread).
            ways = (api.write, lambda request: api.submit(request).result(timeout=10))
            for way in ways:
                with pytest.raises(ApiError) as info:
                    way(LeaderRequest(RequestKind.REGISTER_JOB, job=job("during")))
                assert info.value.status == 503
                assert "Redis is unreachable" in info.value.message
            # the replica still answers what it had
            assert api.snapshot().job("default", "before") is not None
        finally:
            stop.set()
            api.stop()
            link.stop()
            thread.join(timeout=10)


def test_a_write_submitted_after_its_link_stopped_is_a_503_that_says_so(
    client: redis.Redis, leader: LeaderService
) -> None:
    from actors.streams.leader_link import LeaderLink

    link = LeaderLink(client, NAMES, "api-stopped", timeout_s=5.0).start()
    api = ApiService(client, NAMES, link.send, submit=link.submit).start()
    try:
        link.stop()
        with pytest.raises(ApiError) as info:
            api.submit(LeaderRequest(RequestKind.REGISTER_JOB, job=job("late"))).result(timeout=10)
        assert info.value.status == 503
        assert info.value.message == "this API is stopping: the request did not reach the leader"
        assert api.snapshot().job("default", "late") is None
    finally:
        api.stop()


def test_tokens_an_earlier_drover_kept_in_plain_are_moved_to_their_hash(
    client: redis.Redis, leader: LeaderService
) -> None:
    old = {"accessor_id": "acc-1", "secret_id": "plain-secret", "name": "Bootstrap Token"}
    client.hset(NAMES.acl_legacy_tokens, "plain-secret", orjson.dumps(old | {"type": "management"}))
    api = ApiService(client, NAMES, leader.submit, acl_enabled=True).start()
    try:
        found = api.acl.resolve("plain-secret")
        assert found is not None and found[0].accessor_id == "acc-1" and found[1].management
        assert not client.exists(NAMES.acl_legacy_tokens)
    finally:
        api.stop()


def test_the_replica_feeds_the_event_stream_and_a_snapshot_reload_ends_its_subscribers(
    client: redis.Redis,
) -> None:
    names = StreamNames("api-events")
    leader = LeaderService(client, names, snapshot_policy=SnapshotPolicy(keep_tail=0))
    leader.start()
    stop = threading.Event()
    thread = threading.Thread(target=leader.run, args=(stop,), daemon=True)
    thread.start()
    jobs_only = EventFilter(parse_topics(["Job"]))
    try:
        leader.submit(LeaderRequest(RequestKind.REGISTER_JOB, request_id="r0", job=job("old")))
        api = ApiService(client, names, leader.submit).start()
        stream = api.events.subscribe(jobs_only)
        reply = api.write(LeaderRequest(RequestKind.REGISTER_JOB, job=job("web")))
        api.snapshot()  # a read waits for the replica to apply the write (and publish it)
        [line] = [orjson.loads(c) for c in stream.read() or []]  # "old" came before the start
        assert line["Index"] == reply.index
        assert [(e["Type"], e["Key"]) for e in line["Events"]] == [("JobRegistered", "web")]
        api.stop()  # the replica stops following; the leader snapshots and trims meanwhile
        leader.submit(LeaderRequest(RequestKind.REGISTER_JOB, request_id="r1", job=job("gone")))
        leader.write_snapshot()
        later = leader.submit(
            LeaderRequest(RequestKind.REGISTER_JOB, request_id="r2", job=job("later"))
        )
        api.replica.catch_up()  # the entries it missed are gone: it reloads the snapshot
        assert api.replica.snapshot_loads == 1 and api.replica.index == later.index
        [error] = [orjson.loads(c) for c in stream.read() or []]
        assert "reloaded a snapshot" in error["Error"] and stream.read() is None
        fresh = [orjson.loads(c) for c in api.events.subscribe(jobs_only).read() or []]
        assert [(x["Index"], x["Events"][0]["Key"]) for x in fresh] == [(later.index, "later")]
    finally:
        stop.set()
        thread.join(timeout=30)


def test_a_submitted_write_relays_its_answer_and_cancel_without_a_reference_cycle(
    client: redis.Redis,
) -> None:
    sent: list[Future[LeaderResponse]] = [Future(), Future()]
    # Weakly, as the leader link forgets a future once answered: a strong list here would
    # make the cycle the test looks for (the service -> this function -> the futures).
    to_hand_out = iter([weakref.ref(future) for future in sent])

    def submit(request: LeaderRequest) -> Future[LeaderResponse]:
        future = next(to_hand_out)()
        assert future is not None
        return future

    def unused_send(request: LeaderRequest) -> LeaderResponse:
        raise AssertionError("writes go through submit")

    api = ApiService(client, NAMES, unused_send, submit=submit)
    answered = api.submit(LeaderRequest(RequestKind.REGISTER_JOB, job=job("web")))
    sent[0].set_result(LeaderResponse("r", True, index=7))
    assert answered.result(timeout=5).index == 7 and api.read_barrier == 7
    # The two futures refer to each other through their callbacks; never both ways strongly.
    assert not in_a_cycle(answered) and not in_a_cycle(sent[0])
    given_up = api.submit(LeaderRequest(RequestKind.REGISTER_JOB, job=job("api")))
    assert given_up.cancel()
    assert sent[1].cancelled()  # the caller gave up: so is the write it waited for
