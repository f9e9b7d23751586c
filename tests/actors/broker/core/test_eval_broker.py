"""EvalBroker: Nomad's nomad/eval_broker_test.go ported to a fake clock, plus properties."""

from __future__ import annotations

import dataclasses
import random
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.broker.core import (
    CANCELED_DESCRIPTION,
    FAILED_QUEUE,
    BrokerStats,
    EvalBroker,
    EvalBrokerError,
    Location,
    ManualClock,
    NackTimeoutReachedError,
    NotOutstandingError,
    TokenMismatchError,
)
from actors.broker.core.ready_queue import PendingQueue, ReadyQueue
from actors.broker.core.timers import TimerHeap
from contracts import Evaluation

DEFAULT_SCHED = ["service", "batch"]


def mock_eval(**fields: Any) -> Evaluation:
    """Nomad's mock.Eval(): a pending service eval at priority 50 for a fresh job."""
    fields.setdefault("id", str(uuid.uuid4()))
    fields.setdefault("job_id", str(uuid.uuid4()))
    return Evaluation(**fields)


def totals(broker: EvalBroker) -> BrokerStats:
    """Stats without by_scheduler, like the Go tests' getStats(); the counts the leader
    reads each turn without building the stats agree with them wherever a test looks."""
    stats = broker.stats()
    counts = (broker.ready_count(), broker.unacked_count(), broker.failed_count())
    assert counts == (stats.total_ready, stats.total_unacked, stats.total_failed)
    return dataclasses.replace(stats, by_scheduler={})


def make(clock: ManualClock, **kwargs: Any) -> EvalBroker:
    return EvalBroker(clock, **kwargs)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def broker(clock: ManualClock) -> EvalBroker:
    return make(clock, rng=random.Random(7))


# --------------------------------------------------------------------------- basics


def test_enqueue_dequeue_nack_ack(clock: ManualClock, broker: EvalBroker) -> None:
    ev = mock_eval()
    broker.enqueue(ev)
    broker.enqueue(ev)  # double enqueue is a no-op
    stats = broker.stats()
    assert stats.total_ready == 1
    assert stats.by_scheduler["service"].ready == 1

    out = broker.dequeue(DEFAULT_SCHED)
    assert out is not None and out.eval is ev
    assert broker.outstanding(ev.id) == out.token

    with pytest.raises(NotOutstandingError):
        broker.outstanding_reset("nope", "foo")
    with pytest.raises(TokenMismatchError):
        broker.outstanding_reset(ev.id, "foo")
    broker.outstanding_reset(ev.id, out.token)

    stats = broker.stats()
    assert (stats.total_ready, stats.total_unacked) == (0, 1)
    assert stats.by_scheduler["service"].unacked == 1

    with pytest.raises(TokenMismatchError):
        broker.nack(ev.id, "foobarbaz")
    broker.nack(ev.id, out.token)
    assert broker.outstanding(ev.id) is None
    assert broker.location(ev.id) is Location.WAITING

    clock.advance(1.0)  # the initial nack re-enqueue delay
    broker.tick()
    stats = broker.stats()
    assert (stats.total_ready, stats.total_unacked, stats.total_waiting) == (1, 0, 0)

    out2 = broker.dequeue(DEFAULT_SCHED)
    assert out2 is not None and out2.eval is ev
    assert out2.token != out.token
    with pytest.raises(TokenMismatchError):
        broker.ack(ev.id, "zip")
    broker.ack(ev.id, out2.token)

    assert broker.outstanding(ev.id) is None
    assert broker.location(ev.id) is None
    assert totals(broker) == BrokerStats()
    assert broker.stats().by_scheduler["service"].ready == 0
    assert len(broker) == 0
    broker.check_invariants()


def test_ack_and_nack_unknown_eval(broker: EvalBroker) -> None:
    with pytest.raises(NotOutstandingError, match="Evaluation ID not found"):
        broker.ack("missing", "token")
    with pytest.raises(NotOutstandingError):
        broker.nack("missing", "token")
    ev = mock_eval()
    broker.enqueue(ev)  # ready, not outstanding
    with pytest.raises(NotOutstandingError):
        broker.ack(ev.id, "token")
    with pytest.raises(EvalBrokerError):  # the common base class
        broker.pause_nack_timeout(ev.id, "token")


def test_nack_delay(clock: ManualClock) -> None:
    broker = make(clock, delivery_limit=5, initial_nack_delay_s=1.0, subsequent_nack_delay_s=20.0)
    ev = mock_eval()
    broker.enqueue(ev)

    def cycle() -> None:
        out = broker.dequeue(DEFAULT_SCHED)
        assert out is not None and out.eval is ev
        broker.nack(ev.id, out.token)
        assert totals(broker) == BrokerStats(total_waiting=1)

    def redeliverable_after(delay: float) -> None:
        clock.advance(delay - 0.001)
        assert broker.dequeue(DEFAULT_SCHED) is None
        clock.advance(0.001)
        broker.tick()
        assert totals(broker) == BrokerStats(total_ready=1)

    cycle()
    redeliverable_after(1.0)  # 1st nack: initial delay
    cycle()
    redeliverable_after(20.0)  # 2nd: (2-1) x subsequent
    cycle()
    redeliverable_after(40.0)  # 3rd: (3-1) x subsequent

    out = broker.dequeue(DEFAULT_SCHED)
    assert out is not None
    broker.ack(ev.id, out.token)
    assert totals(broker) == BrokerStats()


def test_nacked_eval_keeps_its_job_slot(clock: ManualClock, broker: EvalBroker) -> None:
    first = mock_eval(job_id="web", create_index=1, modify_index=1)
    second = mock_eval(job_id="web", create_index=2, modify_index=2)
    broker.enqueue(first)
    out = broker.dequeue(DEFAULT_SCHED)
    assert out is not None
    broker.nack(first.id, out.token)
    broker.enqueue(second)
    assert broker.location(second.id) is Location.PENDING
    clock.advance(1.0)
    again = broker.dequeue(DEFAULT_SCHED)
    assert again is not None and again.eval is first


# --------------------------------------------------------------------------- serialisation


def test_serialize_duplicate_job_id(broker: EvalBroker) -> None:
    def new_eval(idx: int, ns: str) -> Evaluation:
        ev = mock_eval(
            id=f"eval:{idx}", job_id="example", namespace=ns, create_index=idx, modify_index=idx
        )
        broker.enqueue(ev)
        return ev

    eval1 = new_eval(1, "namespace-one")
    new_eval(2, "namespace-one")
    new_eval(3, "namespace-one")
    eval4 = new_eval(4, "namespace-one")
    eval5 = new_eval(5, "namespace-two")
    new_eval(6, "namespace-two")
    eval7 = new_eval(7, "namespace-two")

    assert totals(broker) == BrokerStats(total_ready=2, total_pending=5)

    out = broker.dequeue(DEFAULT_SCHED)
    assert out is not None and out.eval is eval1
    assert out.wait_index == 4  # the newest eval of the job the broker knows
    assert totals(broker) == BrokerStats(total_ready=1, total_unacked=1, total_pending=5)

    broker.ack(eval1.id, out.token)
    assert totals(broker) == BrokerStats(total_ready=2, total_pending=2, total_cancelable=2)

    out = broker.dequeue(DEFAULT_SCHED)
    assert out is not None and out.eval is eval4
    assert totals(broker) == BrokerStats(
        total_ready=1, total_unacked=1, total_pending=2, total_cancelable=2
    )
    broker.ack(eval4.id, out.token)
    assert totals(broker) == BrokerStats(total_ready=1, total_pending=2, total_cancelable=2)

    out = broker.dequeue(DEFAULT_SCHED)
    assert out is not None and out.eval is eval5
    assert out.wait_index == 7
    assert totals(broker) == BrokerStats(total_unacked=1, total_pending=2, total_cancelable=2)
    broker.ack(eval5.id, out.token)
    assert totals(broker) == BrokerStats(total_ready=1, total_cancelable=3)

    out = broker.dequeue(DEFAULT_SCHED)
    assert out is not None and out.eval is eval7
    assert totals(broker) == BrokerStats(total_unacked=1, total_cancelable=3)
    broker.ack(eval7.id, out.token)
    assert totals(broker) == BrokerStats(total_cancelable=3)

    canceled = broker.take_cancelable(2)
    assert {e.id for e in canceled} == {"eval:2", "eval:3"}
    assert [e.id for e in broker.take_cancelable(10)] == ["eval:6"]
    assert totals(broker) == BrokerStats()
    assert len(broker) == 0
    assert CANCELED_DESCRIPTION == "canceled after more recent eval was processed"


def test_ack_keeps_highest_priority_pending_then_newest(broker: EvalBroker) -> None:
    head = mock_eval(job_id="j", modify_index=1)
    urgent_old = mock_eval(job_id="j", priority=90, modify_index=2)
    newer = mock_eval(job_id="j", priority=50, modify_index=3)
    for ev in (head, urgent_old, newer):
        broker.enqueue(ev)
    out = broker.dequeue(DEFAULT_SCHED)
    assert out is not None and out.wait_index == 3
    broker.ack(head.id, out.token)
    assert broker.location(urgent_old.id) is Location.READY
    assert broker.location(newer.id) is Location.CANCELABLE
    out = broker.dequeue(DEFAULT_SCHED)
    assert out is not None and out.eval is urgent_old
    assert out.wait_index == 3  # covers the canceled eval's index too


def test_namespaced_jobs(broker: EvalBroker) -> None:
    eval1 = mock_eval(job_id="test-jobID", namespace="n1")
    eval2 = mock_eval(job_id="test-jobID", namespace="default")
    eval3 = mock_eval(job_id="test-jobID", namespace="default")
    for ev in (eval1, eval2, eval3):
        broker.enqueue(ev)
    out1, out2 = broker.dequeue(DEFAULT_SCHED), broker.dequeue(DEFAULT_SCHED)
    assert out1 is not None and out2 is not None
    assert {out1.eval.id, out2.eval.id} == {eval1.id, eval2.id}
    assert broker.dequeue(DEFAULT_SCHED) is None
    assert broker.location(eval3.id) is Location.PENDING


# --------------------------------------------------------------------------- ordering


def test_dequeue_priority(broker: EvalBroker) -> None:
    evals = [mock_eval(priority=p) for p in (10, 30, 20)]
    for ev in evals:
        broker.enqueue(ev)
    order = [broker.dequeue(DEFAULT_SCHED) for _ in range(3)]
    assert [d.eval.priority for d in order if d is not None] == [30, 20, 10]


def test_dequeue_fifo(broker: EvalBroker) -> None:
    for i in range(100, 0, -1):
        broker.enqueue(mock_eval(create_index=i, modify_index=i))
    for i in range(1, 101):
        out = broker.dequeue(DEFAULT_SCHED)
        assert out is not None and out.eval.create_index == i


def test_dequeue_fairness(clock: ManualClock) -> None:
    broker = make(clock, rng=random.Random(1234))
    for i in range(1000):
        broker.enqueue(mock_eval(type="service" if i < 500 else "batch"))
    counter = 0
    seen = {"service": 0, "batch": 0}
    for _ in range(1000):
        out = broker.dequeue(DEFAULT_SCHED)
        assert out is not None
        seen[out.eval.type] += 1
        # A run of one type grows the counter's magnitude; a switch resets it.
        counter = max(counter, 0) + 1 if out.eval.type == "service" else min(counter, 0) - 1
        assert abs(counter) < 250, "one scheduler type starved the other"
    assert seen == {"service": 500, "batch": 500}


def test_dequeue_tie_break_uses_injected_rng(clock: ManualClock) -> None:
    class Last(random.Random):
        def choice(self, seq: Any) -> Any:
            return seq[-1]

    broker = make(clock, rng=Last())
    broker.enqueue(mock_eval(type="service"))
    broker.enqueue(mock_eval(type="batch"))
    out = broker.dequeue(["service", "batch"])
    assert out is not None and out.eval.type == "batch"


def test_dequeue_highest_priority_across_schedulers(broker: EvalBroker) -> None:
    broker.enqueue(mock_eval(type="service", priority=40))
    broker.enqueue(mock_eval(type="batch", priority=70))
    broker.enqueue(mock_eval(type="system", priority=99))
    out = broker.dequeue(DEFAULT_SCHED)  # system not requested
    assert out is not None and out.eval.priority == 70
    assert broker.dequeue(["_core"]) is None


def test_enqueue_all_dequeue_fair(broker: EvalBroker) -> None:
    broker.enqueue_all((mock_eval(priority=p), "") for p in range(10, 100, 10))
    out = broker.dequeue(DEFAULT_SCHED)
    assert out is not None and out.eval.priority == 90


def test_ready_queue_ordering() -> None:
    ready = ReadyQueue()
    ready.push(mock_eval(id="eval01", priority=50, create_index=1))
    ready.push(mock_eval(id="eval03", priority=70, create_index=3))
    ready.push(mock_eval(id="eval02", priority=50, create_index=2))
    assert ready.pop() == "eval03"
    assert ready.pop() == "eval01"
    ready.push(mock_eval(id="eval04", priority=50, create_index=4))
    assert ready.pop() == "eval02"


def test_pending_queue_ordering_and_drain() -> None:
    pending = PendingQueue()
    pending.push(mock_eval(id="eval03", priority=50, modify_index=3))
    pending.push(mock_eval(id="eval02", priority=100, modify_index=2))
    pending.push(mock_eval(id="eval01", priority=50, modify_index=1))
    assert pending.pop() == "eval02"
    assert pending.pop() == "eval03"
    pending.push(mock_eval(id="eval04", priority=30, modify_index=4))
    assert pending.pop() == "eval01"
    for i in range(100, 0, -10):
        pending.push(mock_eval(id=f"m{i}", modify_index=i))
    top = pending.pop()
    assert top == "m100"  # MarkForCancel keeps the newest
    assert len(pending.drain()) == 10  # m10..m90 plus eval04
    assert not pending


# --------------------------------------------------------------------------- delivery limit


def test_delivery_limit(broker: EvalBroker, clock: ManualClock) -> None:
    ev = mock_eval()
    broker.enqueue(ev)
    for _ in range(3):
        clock.advance(100.0)
        out = broker.dequeue(DEFAULT_SCHED)
        assert out is not None and out.eval is ev
        broker.nack(ev.id, out.token)

    stats = broker.stats()
    assert (stats.total_ready, stats.total_unacked, stats.total_failed) == (1, 0, 1)
    assert (broker.ready_count(), broker.unacked_count(), broker.failed_count()) == (1, 0, 1)
    assert stats.by_scheduler[FAILED_QUEUE].ready == 1
    assert broker.location(ev.id) is Location.FAILED
    assert broker.dequeue(DEFAULT_SCHED) is None

    out = broker.dequeue([FAILED_QUEUE])
    assert out is not None and out.eval is ev
    stats = broker.stats()
    assert (stats.total_ready, stats.total_unacked, stats.total_failed) == (0, 1, 0)
    assert stats.by_scheduler[FAILED_QUEUE].unacked == 1

    broker.ack(ev.id, out.token)
    assert broker.outstanding(ev.id) is None
    stats = broker.stats()
    assert stats.by_scheduler[FAILED_QUEUE].ready == 0
    assert stats.by_scheduler[FAILED_QUEUE].unacked == 0
    assert totals(broker) == BrokerStats()


def test_ack_at_delivery_limit(broker: EvalBroker, clock: ManualClock) -> None:
    ev = mock_eval()
    broker.enqueue(ev)
    for i in range(3):
        clock.advance(100.0)
        out = broker.dequeue(DEFAULT_SCHED)
        assert out is not None and out.eval is ev
        if i == 2:
            broker.ack(ev.id, out.token)
        else:
            broker.nack(ev.id, out.token)
    stats = broker.stats()
    assert (stats.total_ready, stats.total_unacked) == (0, 0)
    assert FAILED_QUEUE not in stats.by_scheduler


def test_failed_eval_holds_job_slot_until_reaped(broker: EvalBroker, clock: ManualClock) -> None:
    ev = mock_eval(job_id="j", modify_index=1)
    broker.enqueue(ev)
    for _ in range(3):
        clock.advance(100.0)
        out = broker.dequeue(DEFAULT_SCHED)
        assert out is not None
        broker.nack(ev.id, out.token)
    later = mock_eval(job_id="j", modify_index=5)
    broker.enqueue(later)
    assert broker.location(later.id) is Location.PENDING
    reaped = broker.dequeue([FAILED_QUEUE])
    assert reaped is not None and reaped.wait_index == 5
    broker.ack(ev.id, reaped.token)
    assert broker.location(later.id) is Location.READY


# --------------------------------------------------------------------------- nack timers


def test_nack_timeout(clock: ManualClock) -> None:
    broker = make(clock, nack_timeout_s=5.0)
    ev = mock_eval()
    broker.enqueue(ev)
    out = broker.dequeue(DEFAULT_SCHED)
    assert out is not None

    clock.advance(4.999)
    assert broker.dequeue(DEFAULT_SCHED) is None
    assert broker.outstanding(ev.id) == out.token

    clock.advance(0.001)  # the timer fires: an automatic nack, then the 1s re-enqueue delay
    broker.tick()
    assert broker.outstanding(ev.id) is None
    assert broker.location(ev.id) is Location.WAITING
    clock.advance(1.0)
    again = broker.dequeue(DEFAULT_SCHED)
    assert again is not None and again.eval is ev and again.token != out.token
    with pytest.raises(TokenMismatchError):
        broker.ack(ev.id, out.token)


def test_nack_timeout_reset(clock: ManualClock) -> None:
    broker = make(clock, nack_timeout_s=5.0)
    ev = mock_eval()
    broker.enqueue(ev)
    out = broker.dequeue(DEFAULT_SCHED)
    assert out is not None
    clock.advance(2.0)
    broker.outstanding_reset(ev.id, out.token)
    clock.advance(4.9)  # 6.9s since dequeue, 4.9s since the reset
    broker.tick()
    assert broker.outstanding(ev.id) == out.token
    clock.advance(0.1)
    broker.tick()
    assert broker.outstanding(ev.id) is None


def test_pause_resume_nack_timeout(clock: ManualClock) -> None:
    broker = make(clock, nack_timeout_s=5.0)
    ev = mock_eval()
    broker.enqueue(ev)
    out = broker.dequeue(DEFAULT_SCHED)
    assert out is not None

    clock.advance(2.0)
    broker.pause_nack_timeout(ev.id, out.token)
    broker.pause_nack_timeout(ev.id, out.token)  # idempotent
    clock.advance(100.0)  # e.g. queued behind the plan applier
    assert broker.dequeue(DEFAULT_SCHED) is None
    assert broker.outstanding(ev.id) == out.token
    broker.outstanding_reset(ev.id, out.token)  # no-op while paused

    broker.resume_nack_timeout(ev.id, out.token)  # a full timeout from now
    clock.advance(4.9)
    assert broker.dequeue(DEFAULT_SCHED) is None
    clock.advance(0.1 + 1.0)  # fires, then the initial re-enqueue delay
    again = broker.dequeue(DEFAULT_SCHED)
    assert again is not None and again.eval is ev


def test_ack_after_nack_timer_expiration(clock: ManualClock) -> None:
    broker = make(clock, nack_timeout_s=5.0)
    ev = mock_eval()
    broker.enqueue(ev)
    out = broker.dequeue(DEFAULT_SCHED)
    assert out is not None
    broker.enqueue_all([(ev, out.token)])  # a requeue that the nack must drop
    clock.advance(5.0)  # overdue, but no tick has run yet
    with pytest.raises(NackTimeoutReachedError, match="Ack'd after Nack timer expiration"):
        broker.ack(ev.id, out.token)
    assert broker.location(ev.id) is Location.WAITING
    with pytest.raises(NotOutstandingError):
        broker.ack(ev.id, out.token)
    clock.advance(1.0)
    again = broker.dequeue(DEFAULT_SCHED)
    assert again is not None
    broker.ack(ev.id, again.token)
    assert len(broker) == 0  # the requeue was dropped with the expired delivery


def test_reset_after_expiration_is_refused(clock: ManualClock) -> None:
    broker = make(clock, nack_timeout_s=5.0)
    ev = mock_eval()
    broker.enqueue(ev)
    out = broker.dequeue(DEFAULT_SCHED)
    assert out is not None
    clock.advance(6.0)
    with pytest.raises(NackTimeoutReachedError, match="nack timeout reached"):
        broker.outstanding_reset(ev.id, out.token)


def test_many_resets_keep_timer_heap_small(clock: ManualClock) -> None:
    broker = make(clock, nack_timeout_s=5.0)
    ev = mock_eval()
    broker.enqueue(ev)
    out = broker.dequeue(DEFAULT_SCHED)
    assert out is not None
    for _ in range(10_000):
        broker.outstanding_reset(ev.id, out.token)
    assert broker._timers.heap_size() < 200  # stale timer entries are compacted
    broker.check_invariants()


def test_timer_heap_rearm_cancel_and_order() -> None:
    timers = TimerHeap()
    timers.arm("a", 5.0)
    timers.arm("b", 3.0)
    timers.arm("c", 4.0)
    timers.arm("a", 1.0)  # moved earlier: the 5.0 entry goes stale
    timers.cancel("c")
    assert timers.pop_due(0.5) is None
    assert timers.pop_due(10.0) == ("a", 1.0)
    assert timers.pop_due(10.0) == ("b", 3.0)
    assert timers.pop_due(10.0) is None  # c cancelled, a's old deadline stale
    assert len(timers) == 0 and "a" not in timers


# --------------------------------------------------------------------------- requeue


def test_enqueue_all_requeue_ack(broker: EvalBroker) -> None:
    ev = mock_eval()
    broker.enqueue(ev)
    out = broker.dequeue(DEFAULT_SCHED)
    assert out is not None
    reblocked = dataclasses.replace(ev, modify_index=9)
    broker.enqueue_all([(reblocked, out.token)])
    assert totals(broker) == BrokerStats(total_unacked=1)

    broker.ack(ev.id, out.token)
    assert totals(broker) == BrokerStats(total_ready=1)
    out2 = broker.dequeue(DEFAULT_SCHED)
    assert out2 is not None and out2.eval is reblocked and out2.token != out.token
    assert out2.wait_index == 9


def test_enqueue_all_requeue_nack(broker: EvalBroker, clock: ManualClock) -> None:
    ev = mock_eval()
    broker.enqueue(ev)
    out = broker.dequeue(DEFAULT_SCHED)
    assert out is not None
    broker.enqueue_all([(ev, out.token)])
    assert totals(broker) == BrokerStats(total_unacked=1)

    broker.nack(ev.id, out.token)
    clock.advance(1.0)
    broker.tick()
    assert totals(broker) == BrokerStats(total_ready=1)  # the original, redelivered
    assert broker._requeue == {}
    out2 = broker.dequeue(DEFAULT_SCHED)
    assert out2 is not None
    broker.ack(ev.id, out2.token)
    assert len(broker) == 0  # the requeued copy was dropped


def test_enqueue_all_with_stale_token_is_a_noop(broker: EvalBroker) -> None:
    ev = mock_eval()
    broker.enqueue(ev)
    out = broker.dequeue(DEFAULT_SCHED)
    assert out is not None
    broker.enqueue_all([(ev, "not-the-token")])
    broker.ack(ev.id, out.token)
    assert len(broker) == 0


# --------------------------------------------------------------------------- delayed evals


def test_wait_until(broker: EvalBroker, clock: ManualClock) -> None:
    now = clock.now_ns()
    eval1 = mock_eval(wait_until=now + 1_000_000_000, create_index=1)
    eval2 = mock_eval(wait_until=now + 100_000_000, create_index=2)
    eval3 = mock_eval(wait_until=now + 20_000_000, create_index=1)
    for ev in (eval1, eval2, eval3):
        broker.enqueue(ev)
    assert broker.stats().total_waiting == 3
    assert broker.dequeue(DEFAULT_SCHED) is None

    clock.advance(0.2)
    first, second = broker.dequeue(DEFAULT_SCHED), broker.dequeue(DEFAULT_SCHED)
    assert first is not None and first.eval is eval3
    assert second is not None and second.eval is eval2
    assert broker.dequeue(DEFAULT_SCHED) is None

    clock.advance(1.0)
    third = broker.dequeue(DEFAULT_SCHED)
    assert third is not None and third.eval is eval1
    assert broker.stats().total_waiting == 0


def test_wait_until_in_the_past_is_ready_now(broker: EvalBroker, clock: ManualClock) -> None:
    ev = mock_eval(wait_until=clock.now_ns() - 1)
    broker.enqueue(ev)
    assert broker.location(ev.id) is Location.READY


def test_delayed_eval_does_not_hold_its_job(broker: EvalBroker, clock: ManualClock) -> None:
    later = mock_eval(job_id="j", wait_until=clock.now_ns() + 10_000_000_000)
    now = mock_eval(job_id="j")
    broker.enqueue(later)
    broker.enqueue(now)
    out = broker.dequeue(DEFAULT_SCHED)
    assert out is not None and out.eval is now
    clock.advance(10.0)
    broker.tick()  # due while the job's other eval is in flight: it waits behind it
    assert broker.location(later.id) is Location.PENDING
    broker.ack(now.id, out.token)
    assert broker.location(later.id) is Location.READY


def test_flush(broker: EvalBroker, clock: ManualClock) -> None:
    broker.enqueue(mock_eval(job_id="a"))
    broker.enqueue(mock_eval(job_id="a"))
    broker.enqueue(mock_eval(wait_until=clock.now_ns() + 10**10))
    assert broker.dequeue(DEFAULT_SCHED) is not None
    broker.flush()
    assert totals(broker) == BrokerStats()
    assert broker.stats().by_scheduler == {}
    assert len(broker) == 0
    clock.advance(100.0)
    assert broker.dequeue(DEFAULT_SCHED) is None


# --------------------------------------------------------------------------- properties

JOBS = [("default", "a"), ("default", "b"), ("other", "a")]
SCHEDS = ["service", "batch"]
IDX = st.integers(0, 30)

ENQUEUE = st.tuples(
    st.just("enqueue"),
    st.integers(0, len(JOBS) - 1),
    st.sampled_from([10, 50, 50, 90]),
    st.sampled_from(SCHEDS),
    st.sampled_from([0.0, 0.0, 0.0, 1.5, 30.0]),
)
DEQUEUE = st.tuples(st.just("dequeue"), st.sampled_from([("service",), ("batch",), tuple(SCHEDS)]))
# Repeated branches weight the draw towards delivery cycles, so evals reach the limit.
OPS = st.one_of(
    ENQUEUE,
    ENQUEUE,
    DEQUEUE,
    DEQUEUE,
    DEQUEUE,
    st.tuples(st.just("nack"), IDX),
    st.tuples(st.just("nack"), IDX),
    st.tuples(st.just("ack"), IDX),
    st.tuples(st.sampled_from(["requeue", "reset", "pause", "resume"]), IDX),
    # "advance" ticks; "sleep" only moves the clock, so overdue timers are met lazily.
    st.tuples(st.sampled_from(["advance", "sleep"]), st.sampled_from([0.5, 1.0, 3.0, 11.0])),
    st.tuples(st.just("cancel"), st.integers(1, 3)),
    st.tuples(st.just("reap")),
)


class Harness:
    """Drives a broker and a model of what must have happened to every eval."""

    def __init__(self) -> None:
        self.clock = ManualClock()
        self.broker = EvalBroker(
            self.clock,
            nack_timeout_s=10.0,
            initial_nack_delay_s=1.0,
            subsequent_nack_delay_s=2.0,
            rng=random.Random(0),
        )
        self.evals: dict[str, Evaluation] = {}
        self.finished: set[str] = set()  # acked for good, or handed out as cancelable
        self.deliveries: list[tuple[str, str]] = []
        self.requeued: dict[str, str] = {}  # token -> eval id parked under it
        self.index = 0

    def run(self, op: tuple[Any, ...]) -> None:
        getattr(self, f"op_{op[0]}")(*op[1:])
        self.check()

    def op_enqueue(self, job: int, priority: int, sched: str, delay: float) -> None:
        self.index += 1
        ns, job_id = JOBS[job]
        wait_until = self.clock.now_ns() + int(delay * 1e9) if delay else 0
        ev = Evaluation(
            id=f"e{self.index}",
            namespace=ns,
            job_id=job_id,
            priority=priority,
            type=sched,
            create_index=self.index,
            modify_index=self.index,
            wait_until=wait_until,
        )
        self.evals[ev.id] = ev
        self.broker.enqueue(ev)

    def op_dequeue(self, scheds: tuple[str, ...]) -> None:
        self.broker.tick()  # so the ready set below is what dequeue will see
        ready = [
            e
            for e in self.evals.values()
            if self.broker.location(e.id) is Location.READY and e.type in scheds
        ]
        out = self.broker.dequeue(list(scheds))
        if not ready:
            assert out is None
            return
        assert out is not None
        # (c) priority order: nothing ready in the requested queues outranks it...
        assert out.eval.priority == max(e.priority for e in ready)
        # ...and within its queue and priority it is the oldest (FIFO by CreateIndex).
        peers = [e for e in ready if e.type == out.eval.type and e.priority == out.eval.priority]
        assert out.eval.create_index == min(e.create_index for e in peers)
        same_job = [
            e
            for e in self.evals.values()
            if (e.namespace, e.job_id) == (out.eval.namespace, out.eval.job_id)
            and e.id not in self.finished
        ]
        assert out.wait_index >= max(e.modify_index for e in same_job)
        self.deliveries.append((out.eval.id, out.token))

    def _settle(self, eval_id: str, token: str) -> None:
        if token in self.requeued:
            self.requeued.pop(token)
        else:
            self.finished.add(eval_id)

    def op_ack(self, k: int) -> None:
        if not self.deliveries:
            return
        eval_id, token = self.deliveries.pop(k % len(self.deliveries))
        try:
            self.broker.ack(eval_id, token)
        except EvalBrokerError:
            assert self.broker.outstanding(eval_id) != token
            return
        self._settle(eval_id, token)

    def op_nack(self, k: int) -> None:
        if not self.deliveries:
            return
        eval_id, token = self.deliveries.pop(k % len(self.deliveries))
        try:
            self.broker.nack(eval_id, token)
        except EvalBrokerError:
            assert self.broker.outstanding(eval_id) != token

    def op_requeue(self, k: int) -> None:
        if not self.deliveries:
            return
        eval_id, token = self.deliveries[k % len(self.deliveries)]
        if eval_id in self.finished:
            return
        self.index += 1
        ev = dataclasses.replace(self.evals[eval_id], modify_index=self.index)
        if self.broker.outstanding(eval_id) == token:
            self.requeued[token] = eval_id
            self.evals[eval_id] = ev
        self.broker.enqueue_all([(ev, token)])

    def _timer_op(self, name: str, k: int) -> None:
        if not self.deliveries:
            return
        eval_id, token = self.deliveries[k % len(self.deliveries)]
        try:
            getattr(self.broker, name)(eval_id, token)
        except EvalBrokerError:
            assert self.broker.outstanding(eval_id) != token

    def op_reset(self, k: int) -> None:
        self._timer_op("outstanding_reset", k)

    def op_pause(self, k: int) -> None:
        self._timer_op("pause_nack_timeout", k)

    def op_resume(self, k: int) -> None:
        self._timer_op("resume_nack_timeout", k)

    def op_advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.broker.tick()

    def op_sleep(self, seconds: float) -> None:
        self.clock.advance(seconds)

    def op_cancel(self, n: int) -> None:
        for ev in self.broker.take_cancelable(n):
            assert ev.id not in self.finished
            self.finished.add(ev.id)

    def op_reap(self) -> None:
        out = self.broker.dequeue([FAILED_QUEUE])
        if out is not None:
            self.broker.ack(out.eval.id, out.token)
            self._settle(out.eval.id, out.token)

    def check(self) -> None:
        broker = self.broker
        broker.check_invariants()
        where = {eval_id: broker.location(eval_id) for eval_id in self.evals}
        # (b) nothing is lost: an eval is tracked in exactly one place until it is finished.
        for eval_id, loc in where.items():
            assert (loc is None) == (eval_id in self.finished), (eval_id, loc)
        # (a) at most one eval per job is ready or in flight.
        for job in JOBS:
            active = [
                i
                for i, loc in where.items()
                if loc in (Location.READY, Location.UNACKED, Location.FAILED)
                and (self.evals[i].namespace, self.evals[i].job_id) == job
            ]
            assert len(active) <= 1, (job, active)
        count = {loc: sum(1 for v in where.values() if v is loc) for loc in Location}
        stats = broker.stats()
        assert stats.total_ready == count[Location.READY] + count[Location.FAILED]
        assert stats.total_failed == count[Location.FAILED]
        assert stats.total_unacked == count[Location.UNACKED]
        assert stats.total_pending == count[Location.PENDING]
        assert stats.total_waiting == count[Location.WAITING]
        assert stats.total_cancelable == count[Location.CANCELABLE]
        assert len(broker) == sum(count.values())

    def drain(self) -> None:
        """Let time pass and act as a perfect worker and leader: everything must finish."""
        while self.deliveries:  # finish what is in flight (a paused timer never fires)
            self.op_ack(0)
        for _ in range(10_000):
            self.clock.advance(1000.0)
            out = self.broker.dequeue([*SCHEDS, FAILED_QUEUE])
            if out is not None:
                self.broker.ack(out.eval.id, out.token)
                self._settle(out.eval.id, out.token)
            else:
                self.op_cancel(10**6)
                if len(self.broker) == 0:
                    break
            self.check()
        assert self.finished == set(self.evals)
        assert totals(self.broker) == BrokerStats()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPS, min_size=20, max_size=100))
def test_property_no_eval_lost_one_per_job_priority_order(ops: list[tuple[Any, ...]]) -> None:
    harness = Harness()
    for op in ops:
        harness.run(op)
    harness.drain()
