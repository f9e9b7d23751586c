"""Small evals scheduled by the leader itself (actors/leader/local_scheduling.py), on a real
Redis with the broker it hosts and no worker: what it places, when it leaves evals to the
workers (a larger job, a spent budget, the plan-hold failpoint), that a registration sent
over the stream is answered with its allocation committed, that an eval that failed here
goes to a worker next, and that a redelivered eval taken here fences out its old holder."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import redis

import actors.leader.local_scheduling as local_scheduling
from actors.broker.service import BrokerService
from actors.leader.durable_log import DurableLog, NotLeaderError
from actors.leader.local_scheduling import LOCAL_MAX_ALLOCS
from actors.leader.service import LeaderService
from actors.streams import StreamBus
from actors.streams.envelope import decode_message, registry_of
from actors.streams.names import StreamNames
from contracts import (
    DriverInfo,
    EvalStatus,
    Job,
    Node,
    NodeResources,
    NodeStatus,
    Resources,
    Task,
    TaskGroup,
)
from contracts.messages import EvalDelivery, LeaderRequest, LeaderResponse, RequestKind

NAMES = StreamNames("loc")


def job(job_id: str, count: int = 1) -> Job:
    task = Task(name="t", driver="mock", resources=Resources(cpu=10, memory_mb=16))
    return Job(id=job_id, name=job_id, task_groups=(TaskGroup("g", count, tasks=(task,)),))


def start(client: redis.Redis, **options: Any) -> tuple[LeaderService, BrokerService]:
    broker = BrokerService(client, NAMES, capacity=2)
    broker.start()
    options.setdefault("local_scheduling", True)
    leader = LeaderService(client, NAMES, broker=broker, **options)
    leader.start()
    nodes = tuple(
        Node(
            id=f"n{i}",
            name=f"n{i}",
            status=NodeStatus.READY,
            drivers={"mock": DriverInfo()},
            node_resources=NodeResources(cpu=4000, memory_mb=8192, disk_mb=10_000),
        ).with_computed_class()
        for i in range(2)
    )
    assert leader.handle(LeaderRequest(RequestKind.UPSERT_NODES, request_id="n", nodes=nodes)).ok
    return leader, broker


def register(leader: LeaderService, spec: Job) -> str:
    request = LeaderRequest(RequestKind.REGISTER_JOB, request_id=f"reg-{spec.id}", job=spec)
    response = leader.handle(request)
    assert response.ok and response.eval_id
    return response.eval_id


def delivered(client: redis.Redis) -> list[EvalDelivery]:
    """What went out to the workers."""
    out = []
    for _id, fields in client.xrange(NAMES.deliveries):
        _type, delivery, _trace = decode_message(fields, registry_of(EvalDelivery))
        assert isinstance(delivery, EvalDelivery)
        out.append(delivery)
    return out


def allocs_of(leader: LeaderService, job_id: str) -> list[Any]:
    return list(leader.store.snapshot().allocs_by_job("default", job_id))


def test_an_idle_leader_places_a_small_job_itself_and_acks_its_delivery(
    client: redis.Redis,
) -> None:
    leader, broker = start(client)
    eval_id = register(leader, job("web", count=3))
    assert not delivered(client)  # held for the end of the turn: the leader may take it
    leader.poll_once()

    assert len(allocs_of(leader, "web")) == 3
    evaluation = leader.store.snapshot().eval(eval_id)
    assert evaluation is not None and evaluation.status is EvalStatus.COMPLETE
    assert not delivered(client)  # no worker was involved
    assert broker.stats["delivered_local"] == 1 and broker.stats["acked"] == 1
    assert broker.stats["delivered"] == 0
    assert leader.local is not None and leader.local.stats["evals"] == 1
    assert leader.stats.local_evals == 1
    with broker.lock:
        assert broker.broker.stats().total_unacked == 0


def test_a_job_larger_than_the_limit_goes_to_the_workers(client: redis.Redis) -> None:
    leader, broker = start(client)
    eval_id = register(leader, job("big", count=LOCAL_MAX_ALLOCS + 1))
    leader.poll_once()

    (delivery,) = delivered(client)
    assert delivery.eval.id == eval_id
    assert not allocs_of(leader, "big")
    assert leader.local is not None and leader.local.stats["handed_on"] == 1
    assert broker.stats["delivered_local"] == 1 and broker.stats["delivered"] == 1


def test_once_the_turn_budget_is_spent_ready_evals_go_to_the_workers(
    client: redis.Redis,
) -> None:
    leader, broker = start(client)
    assert leader.local is not None
    leader.local.budget_s = 0.0
    first, second = register(leader, job("a")), register(leader, job("b"))
    leader.poll_once()
    assert {d.eval.id for d in delivered(client)} == {first, second}  # capacity 2
    assert broker.stats["delivered_local"] == 0 and leader.stats.local_evals == 0

    leader.local.budget_s = 1.0  # a busy worker does not keep the leader from scheduling
    third = register(leader, job("c"))
    leader.poll_once()
    assert len(allocs_of(leader, "c")) == 1
    assert third not in {d.eval.id for d in delivered(client)}


def test_nothing_is_scheduled_here_while_plans_are_held(client: redis.Redis) -> None:
    leader, _broker = start(client)
    leader.hold_plans(2, timeout_s=30)
    eval_id = register(leader, job("web"))
    leader.poll_once()
    assert [d.eval.id for d in delivered(client)] == [eval_id]
    assert not allocs_of(leader, "web")


def test_a_registration_over_the_stream_is_answered_with_its_allocation_committed(
    client: redis.Redis,
) -> None:
    leader, _broker = start(client)
    reply_to = "loc:reply"
    request = LeaderRequest(
        RequestKind.REGISTER_JOB, request_id="reg-web", job=job("web"), reply_to=reply_to
    )
    StreamBus(client).publish(NAMES.requests, [("LeaderRequest", request)])
    # The answer goes out with the commit of the local placement: when the client reads
    # it, the log already holds the allocation (the API's replica follows the log).
    commits: list[tuple[int, bool]] = []
    real_commit = leader.durable.commit

    def commit(expected: int, entries: Any, fences: Any, **more: Any) -> Any:
        commits.append((len(allocs_of(leader, "web")), more.get("outbox") is not None))
        return real_commit(expected, entries, fences, **more)

    leader.durable.commit = commit  # type: ignore[method-assign]
    leader.poll_once()

    (answer,) = [
        decode_message(fields, registry_of(LeaderResponse))[1]
        for _id, fields in client.xrange(reply_to)
    ]
    assert isinstance(answer, LeaderResponse) and answer.ok
    assert commits == [(1, True)]  # one commit: the registration, its placement, the answer
    (alloc,) = allocs_of(leader, "web")
    assert alloc.create_index > answer.index  # committed after the registration, before
    assert not delivered(client)


def test_an_eval_that_failed_here_is_nacked_and_goes_to_a_worker_next(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    leader, broker = start(client)

    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("scheduler broke")

    monkeypatch.setattr(local_scheduling, "new_scheduler", broken)
    eval_id = register(leader, job("web"))
    leader.poll_once()
    assert broker.stats["nacked"] == 1
    assert leader.local is not None and leader.local.stats["nacks"] == 1
    assert not delivered(client)

    # Nomad's nack delay (1 s) makes it ready again; this time it goes to a worker: the
    # leader hands it on, or the broker's loop delivers it first (whichever runs first once
    # the delay is over), and the leader does not schedule it again.
    deadline_turns = 400
    while not delivered(client) and deadline_turns:
        broker.poll_once()
        leader.poll_once()
        deadline_turns -= 1
    (delivery,) = delivered(client)
    assert delivery.eval.id == eval_id
    assert leader.local.stats["evals"] == 1 and leader.local.stats["handed_on"] <= 1


def test_a_redelivered_eval_taken_here_fences_out_its_earlier_holder(
    client: redis.Redis,
) -> None:
    leader, broker = start(client)
    leader.hold_plans(1, timeout_s=30)  # so that the first delivery goes to a worker
    eval_id = register(leader, job("web"))
    leader.poll_once()
    (first,) = delivered(client)
    leader.release_plans()
    leader.poll_once()  # the hold is over
    assert client.hget(NAMES.tokens_key, eval_id) == first.token.encode()

    # The worker never answers: its delivery times out and the eval is ready again.
    with broker.lock:
        broker.broker.nack(eval_id, first.token, "worker gone")
    deadline = time.monotonic() + 30
    taken = None
    while taken is None and time.monotonic() < deadline:
        time.sleep(0.05)
        with broker.lock:
            broker.broker.tick()  # Nomad's nack delay (1 s) makes it ready again
        taken = broker.take_local(("service",))
    assert taken is not None
    delivery, _trace = taken
    assert delivery.eval.id == eval_id and delivery.token != first.token
    # The old token no longer passes the commit script.
    assert client.hget(NAMES.tokens_key, eval_id) == delivery.token.encode()


def test_a_turns_plans_are_one_commit_and_its_lost_answer_rebuilds_the_store(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The leader's plans of one scheduling turn are staged and made durable together. That
    commit's answer is lost (durable, but the leader never knows): the store and the broker
    are rebuilt from the log, and nothing is scheduled twice."""
    leader, _broker = start(client)
    register(leader, job("a"))
    register(leader, job("b"))
    real_commit = leader.durable.commit
    calls: list[int] = []

    def commit_then_lose_the_answer(expected: int, entries: Any, fences: Any, **more: Any) -> Any:
        calls.append(len(entries))
        outcome = real_commit(expected, entries, fences, **more)  # durable...
        if len(calls) == 1:
            raise redis.ConnectionError("connection lost")  # ...but the leader never knows
        return outcome

    monkeypatch.setattr(leader.durable, "commit", commit_then_lose_the_answer)
    store_before = leader.store
    with pytest.raises(redis.ConnectionError):  # the loop's Reconnecting retries the turn
        leader.poll_once()
    assert calls == [2]  # two plans (each with its eval's final status): one commit

    # The store was rebuilt from the log (the lost commit is in it).
    assert leader.store is not store_before and not leader._store_lost
    assert leader.store.latest_index() == int(client.xlen(NAMES.log))
    assert [len(allocs_of(leader, j)) for j in ("a", "b")] == [1, 1]
    # The rebuilt broker holds both evals complete: no one schedules them again.
    leader.poll_once()
    assert [len(allocs_of(leader, j)) for j in ("a", "b")] == [1, 1]
    assert not delivered(client) and calls == [2]


def test_a_delivery_that_cannot_reach_the_workers_does_not_stop_the_leader(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    leader, broker = start(client)
    _cut_off_from_workers(monkeypatch, broker)
    register(leader, job("big", count=LOCAL_MAX_ALLOCS + 1))
    leader.poll_once()  # logged, not raised: the broker's nack timeout redelivers it
    assert leader.local is not None and leader.local.stats["handed_on"] == 1
    with broker.lock:
        assert broker.broker.stats().total_unacked == 1
    assert not delivered(client)


def test_a_delivery_is_settled_only_once_its_plan_is_durable(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ack frees the job's slot, and the broker's own thread may hand the job's next
    eval to a worker at once: that worker's replica must already hold the plan."""
    leader, broker = start(client)
    first = register(leader, job("a"))
    real_commit = leader.durable.commit
    seen: list[object] = []

    def commit(expected: int, entries: Any, fences: Any, **more: Any) -> Any:
        with broker.lock:
            seen.append(broker.broker.location(first))
        return real_commit(expected, entries, fences, **more)

    monkeypatch.setattr(leader.durable, "commit", commit)
    leader.poll_once()
    assert len(allocs_of(leader, "a")) == 1
    assert [str(s) for s in seen] == ["unacked"]  # still held as the turn's commit went out
    with broker.lock:
        assert broker.broker.location(first) is None  # acked after it


def _registrations(client: redis.Redis, specs: list[Job], reply_to: str = "loc:reply") -> None:
    """Registrations sent over the leader's request stream, as the API sends them."""
    StreamBus(client).publish(
        NAMES.requests,
        [
            (
                "LeaderRequest",
                LeaderRequest(
                    RequestKind.REGISTER_JOB,
                    request_id=f"reg-{spec.id}",
                    job=spec,
                    reply_to=reply_to,
                ),
            )
            for spec in specs
        ],
    )


def _cut_off_from_workers(monkeypatch: pytest.MonkeyPatch, broker: BrokerService) -> None:
    """Deliveries to the workers fail as if Redis were away."""

    def unreachable(_deliveries: Any) -> None:
        raise redis.ConnectionError("Redis is away")

    monkeypatch.setattr(broker, "_publish", unreachable)


def _answers(client: redis.Redis, reply_to: str) -> list[LeaderResponse]:
    out = []
    for _id, fields in client.xrange(reply_to):
        answer = decode_message(fields, registry_of(LeaderResponse))[1]
        assert isinstance(answer, LeaderResponse)
        out.append(answer)
    return out


def test_a_batch_of_registrations_and_their_placements_is_one_commit_acked_with_the_answers(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    leader, _broker = start(client)
    commits: list[int] = []
    real_commit = leader.durable.commit

    def commit(expected: int, entries: Any, fences: Any, **more: Any) -> Any:
        commits.append(len(entries))
        return real_commit(expected, entries, fences, **more)

    monkeypatch.setattr(leader.durable, "commit", commit)
    _registrations(client, [job(j) for j in ("a", "b", "c")])
    leader.poll_once()

    assert len(commits) == 1  # the three registrations, their evals and their plans
    answers = _answers(client, "loc:reply")
    assert len(answers) == 3 and all(a.ok for a in answers)
    for answer, job_id in zip(answers, "abc", strict=True):
        (alloc,) = allocs_of(leader, job_id)
        assert answer.index < alloc.create_index <= answer.visible_index
    assert client.xpending(NAMES.requests, "leader")["pending"] == 0  # acked with them
    assert not delivered(client)


def test_a_lost_batch_commit_answers_nothing_and_its_requests_are_decided_again(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch's commit (its registrations and the plans made on them) fails before it is
    durable: the store and the broker are rebuilt from the log, nothing of it was answered
    or delivered, and the consumer retries the requests one by one."""
    leader, broker = start(client)
    real_commit = leader.durable.commit
    calls: list[int] = []

    def fail_first(expected: int, entries: Any, fences: Any, **more: Any) -> Any:
        calls.append(len(entries))
        if len(calls) == 1:
            raise redis.ConnectionError("connection lost")  # nothing was appended
        return real_commit(expected, entries, fences, **more)

    monkeypatch.setattr(leader.durable, "commit", fail_first)
    _registrations(client, [job("a"), job("b")])
    leader.poll_once()

    answers = _answers(client, "loc:reply")
    assert len(answers) == 2 and all(a.ok for a in answers)  # each once, after the retry
    assert [len(allocs_of(leader, j)) for j in ("a", "b")] == [1, 1]
    assert leader.store.latest_index() == int(client.xlen(NAMES.log))
    assert not delivered(client)
    with broker.lock:
        assert not broker._held and not broker._held_writes and not broker._held_handed


def test_a_feed_that_fails_under_the_hold_rebuilds_the_store_and_the_broker_from_the_log(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broker is fed the batch's entries before they are durable; if that fails, what
    it was fed cannot be trusted: both are rebuilt from the log before the consumer
    retries the requests, which are answered once each, with durable indexes."""
    leader, broker = start(client)
    real_on_commit = broker.on_commit
    failures: list[int] = []

    def on_commit(entry: Any, state: Any) -> None:
        if not failures and broker._held:
            failures.append(entry.index)
            raise RuntimeError("a feed bug")
        real_on_commit(entry, state)

    monkeypatch.setattr(broker, "on_commit", on_commit)
    _registrations(client, [job("a"), job("b")])
    leader.poll_once()

    assert failures  # the early feed failed once
    answers = _answers(client, "loc:reply")
    assert len(answers) == 2 and all(a.ok for a in answers)
    durable = int(client.xlen(NAMES.log))
    assert all(a.index <= durable and a.visible_index <= durable for a in answers)
    assert leader.store.latest_index() == durable
    assert [len(allocs_of(leader, j)) for j in ("a", "b")] == [1, 1]
    assert client.xpending(NAMES.requests, "leader")["pending"] == 0


def test_a_durable_batch_is_answered_even_if_its_deliveries_cannot_go_out(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    leader, broker = start(client)
    _cut_off_from_workers(monkeypatch, broker)
    _registrations(client, [job("big", count=LOCAL_MAX_ALLOCS + 1)])
    leader.poll_once()  # the big job's delivery is handed on, held, and fails on release
    (answer,) = _answers(client, "loc:reply")
    assert answer.ok and client.xpending(NAMES.requests, "leader")["pending"] == 0
    with broker.lock:  # outstanding: the broker's nack timeout redelivers it
        assert broker.broker.stats().total_unacked == 1 and not broker._held
    assert not delivered(client)


def test_a_runs_evals_share_a_snapshot_and_the_plan_check_keeps_nodes_from_overfilling(
    client: redis.Redis,
) -> None:
    """Three jobs that each fill a node, registered in one batch, on two nodes: the run
    schedules all three on one snapshot (none sees the others' plans); the leader's plan
    check rejects what no longer fits, the scheduler retries on a fresh snapshot, and the
    third is blocked, not overcommitted."""
    leader, _broker = start(client)

    def big(job_id: str) -> Job:
        task = Task(name="t", driver="mock", resources=Resources(cpu=3000, memory_mb=16))
        return Job(id=job_id, name=job_id, task_groups=(TaskGroup("g", 1, tasks=(task,)),))

    _registrations(client, [big(j) for j in ("a", "b", "c")])
    leader.poll_once()

    placed = [a for j in ("a", "b", "c") for a in allocs_of(leader, j)]
    assert len(placed) == 2 and len({a.node_id for a in placed}) == 2
    assert leader.stats.partial_plans >= 1  # at least the third was refused at first
    assert leader.local is not None
    assert leader.local.stats["refreshes"] == leader.stats.partial_plans  # each retried
    (unplaced,) = [j for j in ("a", "b", "c") if not allocs_of(leader, j)]
    evals = leader.store.snapshot().evals_by_job("default", unplaced)
    assert any(e.status is EvalStatus.BLOCKED for e in evals)


def test_room_freed_earlier_in_a_run_is_seen_by_the_evals_after_it(client: redis.Redis) -> None:
    """A job stopped and another registered in one batch, on full nodes: the stop's eval
    frees room (its plan stops an allocation), so the next eval takes a fresh snapshot and
    places the new job there instead of blocking on the run's stale one."""
    leader, _broker = start(client)

    def big(job_id: str) -> Job:
        task = Task(name="t", driver="mock", resources=Resources(cpu=3000, memory_mb=16))
        return Job(id=job_id, name=job_id, task_groups=(TaskGroup("g", 1, tasks=(task,)),))

    for job_id in ("x1", "x2"):
        register(leader, big(job_id))
    leader.poll_once()
    assert [len(allocs_of(leader, j)) for j in ("x1", "x2")] == [1, 1]  # both nodes full
    partial_before = leader.stats.partial_plans  # x2 may have met x1 on the shared snapshot
    StreamBus(client).publish(
        NAMES.requests,
        [
            ("LeaderRequest", LeaderRequest(RequestKind.STOP_JOB, request_id="stop", job_id="x1")),
            (
                "LeaderRequest",
                LeaderRequest(RequestKind.REGISTER_JOB, request_id="reg-y", job=big("y")),
            ),
        ],
    )
    leader.poll_once()
    (placed,) = allocs_of(leader, "y")
    (stopped,) = allocs_of(leader, "x1")
    assert placed.node_id == stopped.node_id and stopped.terminal()
    assert leader.stats.partial_plans == partial_before  # placed on a fresh snapshot


def test_a_leader_deposed_at_its_turns_commit_empties_its_broker_and_decides_nothing_more(
    client: redis.Redis,
) -> None:
    """A newer leader took the term while this one scheduled its ready evals: the commit is
    refused, and this leader's broker is emptied (it must not deliver evals the newer leader
    now owns) rather than restored from the log; its store is rebuilt from the log without
    the staged plans that were never committed (the actor serves reads from it)."""
    leader, broker = start(client)
    register(leader, job("a"))
    register(leader, job("b"))
    DurableLog(client, NAMES).acquire_term()
    store_before = leader.store

    with pytest.raises(NotLeaderError):
        leader.poll_once()

    assert leader.store is not store_before
    assert leader.store.latest_index() == int(client.xlen(NAMES.log))
    assert not allocs_of(leader, "a") and not allocs_of(leader, "b")  # never committed
    with broker.lock:
        stats = broker.broker.stats()
    assert stats.total_ready == 0 and stats.total_unacked == 0
    assert broker.deliver() == 0 and not delivered(client)
    with pytest.raises(NotLeaderError):  # and it decides nothing more
        leader.poll_once()


def test_a_run_that_fails_under_the_hold_rebuilds_the_store_once(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The turn's end rebuilds the store and the broker where the run failed; the loop,
    seeing the failure, does not rebuild them again (a second reset would forget, and send
    again, the deliveries the first rebuild's broker made meanwhile)."""
    leader, _broker = start(client)
    register(leader, job("a"))
    assert leader.local is not None
    real_run = leader.local.run
    failures: list[int] = []

    def run_with_a_bug() -> int:
        if not failures:
            failures.append(1)
            raise RuntimeError("a scheduling bug")
        return real_run()

    monkeypatch.setattr(leader.local, "run", run_with_a_bug)
    stop = threading.Event()
    loop = threading.Thread(target=leader.run, args=(stop,), daemon=True)
    loop.start()
    try:
        deadline = time.monotonic() + 10
        while not allocs_of(leader, "a") and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        stop.set()
        loop.join(timeout=10)
    assert not loop.is_alive()
    assert leader.stats.loop_errors == 1
    assert leader._rebuilds == 1
    assert len(allocs_of(leader, "a")) == 1  # scheduled on the next turn


def test_a_leader_that_learns_it_was_deposed_from_a_request_stops_and_empties_its_broker(
    client: redis.Redis,
) -> None:
    """Deposed, found by a request's commit rather than the turn's own: the caller gets the
    error, the loop stops, and the broker it hosts delivers and writes nothing more."""
    leader, broker = start(client, local_scheduling=False)
    register(leader, job("a"))  # ready: delivered to the workers, in flight
    with broker.lock:
        assert broker.broker.stats().total_unacked + broker.broker.stats().total_ready == 1
    DurableLog(client, NAMES).acquire_term()
    stop = threading.Event()
    loop = threading.Thread(target=leader.run, args=(stop,), daemon=True)
    loop.start()
    try:
        with pytest.raises(NotLeaderError):
            leader.submit(LeaderRequest(RequestKind.REGISTER_JOB, request_id="b", job=job("b")))
        loop.join(timeout=10)
        assert not loop.is_alive()  # the loop stopped by itself
    finally:
        stop.set()
        loop.join(timeout=10)
    with broker.lock:
        stats = broker.broker.stats()
        assert broker._writes == []
    assert stats.total_ready == 0 and stats.total_unacked == 0
    assert broker.deliver() == 0
