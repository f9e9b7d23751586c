"""The broker service on a real Redis, hosted by a real leader (no Ray): deliveries up to
capacity with their tokens written for the leader's fencing, acks and nacks, nack timeouts, a
new leader that redelivers under a new token, and the writes it sends the leader."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import redis

from actors.broker.service import BrokerService
from actors.leader.service import STALE_TOKEN, LeaderService
from actors.streams import StreamBus
from actors.streams.envelope import decode_message, registry_of
from actors.streams.names import StreamNames
from contracts import EvalStatus, Job, Resources, Task, TaskGroup, TriggeredBy
from contracts.messages import AckOutcome, EvalAck, EvalDelivery, LeaderRequest, RequestKind

NAMES = StreamNames("brk")


def job(job_id: str) -> Job:
    task = Task(name="t", driver="mock", resources=Resources(cpu=100, memory_mb=64))
    return Job(id=job_id, name=job_id, task_groups=(TaskGroup("g", 1, tasks=(task,)),))


def new_leader(client: redis.Redis, **options: Any) -> tuple[LeaderService, BrokerService]:
    """A leader and the broker it hosts, started: the broker is fed the log so far."""
    broker = BrokerService(client, NAMES, **options)
    broker.start()
    leader = LeaderService(client, NAMES, broker=broker)
    leader.start()
    return leader, broker


def register(leader: LeaderService, job_id: str) -> tuple[str, int]:
    """(eval id, commit index) of a registered job."""
    response = leader.handle(
        LeaderRequest(RequestKind.REGISTER_JOB, request_id=f"reg-{job_id}", job=job(job_id))
    )
    assert response.ok and response.eval_id
    return response.eval_id, response.index


def delivered(client: redis.Redis) -> list[EvalDelivery]:
    """Every delivery the broker published, oldest first."""
    out = []
    for _id, fields in client.xrange(NAMES.deliveries):
        _type, delivery, _trace = decode_message(fields, registry_of(EvalDelivery))
        assert isinstance(delivery, EvalDelivery)
        out.append(delivery)
    return out


def tokens(client: redis.Redis) -> dict[str, str]:
    """The fencing hash the leader's commit script reads: eval id -> outstanding token."""
    return {k.decode(): v.decode() for k, v in client.hgetall(NAMES.tokens_key).items()}


def settle(client: redis.Redis, delivery: EvalDelivery, outcome: AckOutcome) -> None:
    ack = EvalAck(delivery.eval.id, delivery.token, outcome, "worker-1")
    StreamBus(client).publish(NAMES.acks, [("EvalAck", ack)])


def poll_until(broker: BrokerService, done: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "condition not reached in time"
        broker.poll_once()


def wait_for(done: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def test_evals_from_the_log_go_out_up_to_capacity_each_with_its_token(
    client: redis.Redis,
) -> None:
    leader, broker = new_leader(client, capacity=1)
    first, index = register(leader, "a")  # each commit feeds the broker, which delivers
    second, _ = register(leader, "b")

    (d1,) = delivered(client)
    assert d1.eval.id in (first, second) and d1.eval.status is EvalStatus.PENDING
    assert d1.wait_index >= index
    assert tokens(client) == {d1.eval.id: d1.token}
    broker.poll_once()
    assert len(delivered(client)) == 1  # one in flight: the capacity

    settle(client, d1, AckOutcome.ACK)
    broker.poll_once()
    _, d2 = delivered(client)
    assert {d1.eval.id, d2.eval.id} == {first, second}
    # The acked eval's token is gone (nothing of it may commit any more); the new one is in.
    assert tokens(client) == {d2.eval.id: d2.token}
    assert broker.stats["acked"] == 1 and broker.stats["delivered"] == 2


def test_a_nacked_eval_comes_back_under_a_new_token_that_fences_out_the_old_one(
    client: redis.Redis,
) -> None:
    leader, broker = new_leader(client)
    eval_id, _ = register(leader, "a")
    broker.poll_once()
    (d1,) = delivered(client)

    settle(client, d1, AckOutcome.NACK)
    poll_until(broker, lambda: len(delivered(client)) == 2)  # after Nomad's 1 s nack delay
    d2 = delivered(client)[1]
    assert d2.eval.id == eval_id and d2.token != d1.token
    assert tokens(client) == {eval_id: d2.token}
    assert broker.stats["nacked"] == 1

    # The leader fences on what the broker wrote: the old delivery can no longer commit.
    final = leader.store.eval(eval_id)
    assert final is not None
    update = LeaderRequest(
        RequestKind.UPDATE_EVALS,
        request_id="late",
        evals=(final,),
        fence_eval_id=eval_id,
        fence_token=d1.token,
    )
    refused = leader.handle(update)
    assert not refused.ok and refused.error == STALE_TOKEN
    accepted = leader.handle(replace(update, request_id="current", fence_token=d2.token))
    assert accepted.ok

    # A late ack under the old token is counted and harmless: the new token stays.
    settle(client, d1, AckOutcome.ACK)
    poll_until(broker, lambda: broker.stats["stale_acks"] == 1)
    assert tokens(client) == {eval_id: d2.token} and broker.stats["acked"] == 0


def test_an_unacked_delivery_times_out_and_is_redelivered_under_a_new_token(
    client: redis.Redis,
) -> None:
    leader, broker = new_leader(client, nack_timeout_s=0.2)
    eval_id, _ = register(leader, "a")
    broker.poll_once()
    poll_until(broker, lambda: len(delivered(client)) == 2)  # nobody acks: the timer nacks
    d1, d2 = delivered(client)
    assert d1.eval.id == d2.eval.id == eval_id and d1.token != d2.token
    assert tokens(client) == {eval_id: d2.token}


def test_an_eval_past_its_delivery_limit_is_failed_through_the_leader(
    client: redis.Redis,
) -> None:
    leader, broker = new_leader(client, delivery_limit=1)
    eval_id, _ = register(leader, "a")
    broker.poll_once()
    (d1,) = delivered(client)
    settle(client, d1, AckOutcome.NACK)
    broker.poll_once()  # the nack reaches the limit: failed, and the write goes out

    assert leader.poll_once() == 1  # the broker's request, applied by the leader
    failed = leader.store.eval(eval_id)
    assert failed is not None and failed.status is EvalStatus.FAILED
    follow_up = leader.store.eval(failed.next_eval)
    assert follow_up is not None and follow_up.status is EvalStatus.PENDING
    assert follow_up.previous_eval == eval_id
    assert follow_up.triggered_by is TriggeredBy.FAILED_FOLLOW_UP
    assert follow_up.wait_until > 0  # Nomad's follow-up delay, not at once
    assert len(delivered(client)) == 1  # never delivered again
    # The failed eval's last token is gone: the worker that still holds it cannot commit.
    assert eval_id not in tokens(client)


def test_a_new_leaders_broker_redelivers_what_was_in_flight_under_a_new_token(
    client: redis.Redis,
) -> None:
    leader, first = new_leader(client)
    eval_id, _ = register(leader, "a")
    first.poll_once()
    (d1,) = delivered(client)

    # The leader died with d1 unacked: the next one rebuilds its store and its broker from
    # the log, and fences the old one out.
    _, second = new_leader(client)
    second.poll_once()
    d2 = delivered(client)[1]
    assert d2.eval.id == eval_id and d2.token != d1.token
    assert tokens(client) == {eval_id: d2.token}


def test_the_running_broker_is_fed_each_commit_of_its_leader(client: redis.Redis) -> None:
    leader, broker = new_leader(client)
    stop = threading.Event()
    loop = threading.Thread(target=broker.run, args=(stop,), daemon=True)
    loop.start()
    try:
        eval_id, _ = register(leader, "late")  # committed after the broker started
        wait_for(lambda: len(delivered(client)) == 1)
        (delivery,) = delivered(client)
        assert delivery.eval.id == eval_id
        settle(client, delivery, AckOutcome.ACK)
        wait_for(lambda: broker.stats["acked"] == 1 and not tokens(client))
    finally:
        stop.set()
        loop.join(timeout=30)
    assert not loop.is_alive()


def blocked_read(client: redis.Redis, connection_id: int | None) -> bool:
    return connection_id is not None and any(
        int(c["id"]) == connection_id and "b" in c["flags"] for c in client.client_list()
    )


def test_an_eval_committed_while_the_loop_waits_for_acks_goes_out_at_once(
    client: redis.Redis, run_in_thread: Any
) -> None:
    """The loop blocks reading acks; an eval the leader commits meanwhile is delivered from
    the leader's thread right after the commit, without waking the loop. The block is a
    minute long here: a delivery that waited for the loop misses the deadline."""
    leader, broker = new_leader(client, ack_block_ms=60_000)
    halt = run_in_thread(broker)
    try:
        wait_for(lambda: blocked_read(client, broker.reads.connection_id))
        eval_id, _ = register(leader, "woken")
        wait_for(lambda: len(delivered(client)) == 1, timeout_s=30)
        assert delivered(client)[0].eval.id == eval_id
        assert broker.reads.wakes == 0  # the loop had no part in it
    finally:
        halt()


def test_a_completing_plan_acks_its_delivery_at_the_leader_and_the_worker_sends_none(
    client: redis.Redis, run_in_thread: Any
) -> None:
    """The plan that carries an eval's final status settles its delivery as it commits:
    no ack crosses the acks stream, the token goes, and the room is the next eval's."""
    from actors.worker.service import WorkerService
    from contracts import DriverInfo, Node, NodeResources

    leader, broker = new_leader(client, capacity=1)
    node = Node(
        "n1", "n1", drivers={"mock": DriverInfo()}, node_resources=NodeResources(4000, 4096)
    ).with_computed_class()
    assert leader.handle(LeaderRequest(RequestKind.UPSERT_NODES, request_id="n", nodes=(node,))).ok
    first, _ = register(leader, "a")
    second, _ = register(leader, "b")
    broker.poll_once()
    (d1,) = delivered(client)
    halt = run_in_thread(leader)
    worker = WorkerService("w1", client, NAMES)
    worker.start()
    try:
        processed = worker.process(d1)
    finally:
        halt()
    assert processed.outcome is AckOutcome.ACK and processed.acked_by_leader
    assert processed.request_id == ""  # the final status went with the plan
    assert broker.stats["acked"] == broker.stats["acked_on_commit"] == 1
    assert client.xlen(NAMES.acks) == 0
    final = leader.store.eval(d1.eval.id)
    assert final is not None and final.status is EvalStatus.COMPLETE
    broker.poll_once()  # the token goes; the freed room takes the other eval
    d2 = delivered(client)[1]
    assert {d1.eval.id, d2.eval.id} == {first, second}
    assert tokens(client) == {d2.eval.id: d2.token}


def test_a_write_the_feed_decides_wakes_the_loop_waiting_for_acks(
    client: redis.Redis, run_in_thread: Any
) -> None:
    """Writes (here a blocked eval released by a node that became ready) are the loop's to
    send: a commit that makes one wakes it, even a minute into its read of acks."""
    from contracts import DriverInfo, Evaluation, Node, NodeResources

    leader, broker = new_leader(client, ack_block_ms=60_000)
    register(leader, "a")
    blocked = Evaluation(
        "blocked-1", job_id="a", status=EvalStatus.BLOCKED, escaped_computed_class=True
    )
    update = LeaderRequest(RequestKind.UPDATE_EVALS, request_id="block", evals=(blocked,))
    assert leader.handle(update).ok
    halt = run_in_thread(broker)
    try:
        wait_for(lambda: blocked_read(client, broker.reads.connection_id))
        node = Node(
            "n1", "n1", drivers={"mock": DriverInfo()}, node_resources=NodeResources(4000, 4096)
        ).with_computed_class()
        nodes = LeaderRequest(RequestKind.UPSERT_NODES, request_id="n", nodes=(node,))
        assert leader.handle(nodes).ok

        def released() -> bool:
            for _id, fields in client.xrange(NAMES.requests):
                _type, message, _trace = decode_message(fields, registry_of(LeaderRequest))
                if isinstance(message, LeaderRequest) and any(
                    e.id == "blocked-1" and e.status is EvalStatus.PENDING for e in message.evals
                ):
                    return True
            return False

        wait_for(released, timeout_s=30)
        assert broker.reads.wakes >= 1
    finally:
        halt()


def test_what_held_entries_make_ready_goes_out_only_once_they_are_durable(
    client: redis.Redis,
) -> None:
    """The leader feeds a batch's entries before their commit under `hold`: the broker's
    own loop and `deliver` send nothing they made ready until `release(True)`."""
    leader, broker = new_leader(client, capacity=2)
    broker.hold()
    eval_id, _index = register(leader, "web")  # fed, as the leader's flush feeds it
    broker.poll_once()
    assert broker.deliver() == 0 and not delivered(client)
    broker.release(durable=True)
    assert broker.deliver() == 1
    assert [d.eval.id for d in delivered(client)] == [eval_id]


def test_a_delivery_handed_on_under_hold_is_sent_on_release_or_dropped_with_the_entries(
    client: redis.Redis,
) -> None:
    leader, broker = new_leader(client, capacity=2)
    broker.hold()  # the leader takes what its staged registrations make ready
    register(leader, "kept")
    register(leader, "lost")
    kept = broker.take_local(("service",))
    lost = broker.take_local(("service",))
    assert kept is not None and lost is not None
    broker.hand_to_workers(kept[0])
    assert not delivered(client)  # not before the held entries are durable
    broker.release(durable=True)
    assert [d.eval.id for d in delivered(client)] == [kept[0].eval.id]
    broker.hold()
    broker.hand_to_workers(lost[0])
    broker.release(durable=False)  # the leader rebuilds the broker from the log
    assert [d.eval.id for d in delivered(client)] == [kept[0].eval.id]


def test_an_abandoned_broker_stops_and_sends_nothing_a_newer_leader_decides(
    client: redis.Redis,
) -> None:
    """Its leader was deposed: the broker is emptied, its loop stops (woken out of its read of
    acks), and nothing it still holds goes out: no delivery, no token, no ack read away
    from the newer leader's broker."""
    leader, broker = new_leader(client, capacity=1, ack_block_ms=60_000)
    register(leader, "a")
    register(leader, "b")  # ready, waiting for room
    stop = threading.Event()
    loop = threading.Thread(target=broker.run, args=(stop,), daemon=True)
    loop.start()
    try:
        wait_for(lambda: len(delivered(client)) == 1)
        (first,) = delivered(client)
        # Blocked reading acks, for up to a minute: only the wake ends it in time.
        wait_for(lambda: blocked_read(client, broker.reads.connection_id))
        broker.abandon()
        loop.join(timeout=5)
        assert not loop.is_alive()  # woken and stopped by itself, stop never set
    finally:
        stop.set()
        loop.join(timeout=10)

    with broker.lock:
        stats = broker.broker.stats()
    assert stats.total_ready == 0 and stats.total_unacked == 0
    settle(client, first, AckOutcome.ACK)  # an ack for the newer leader's broker to read
    assert broker.poll_once() is False
    broker._publish([first])  # a delivery it had taken before: not sent
    assert len(delivered(client)) == 1 and tokens(client) == {first.eval.id: first.token}
    assert client.xpending(NAMES.acks, "broker")["pending"] == 0  # left unread
    assert client.xlen(NAMES.acks) == 1
