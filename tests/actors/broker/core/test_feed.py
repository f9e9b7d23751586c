"""BrokerFeed: committed log entries drive the broker, as Nomad's FSM drives its broker."""

from __future__ import annotations

import dataclasses
import itertools

from actors.broker.core import BlockedEvals, EvalBroker, ManualClock
from actors.broker.core.feed import BrokerFeed
from actors.state import StateStore
from contracts import (
    Allocation,
    ClientStatus,
    DriverInfo,
    EvalStatus,
    Evaluation,
    Node,
    NodeResources,
    NodeStatus,
    TriggeredBy,
)
from contracts.state_log import (
    AllocClientUpdate,
    LogEntry,
    StateChange,
    UpdateAllocsClientStatus,
    UpsertAllocs,
    UpsertEvals,
    UpsertNodes,
)


class Harness:
    def __init__(self) -> None:
        self.store = StateStore()
        self.clock = ManualClock()
        self.broker = EvalBroker(self.clock, nack_timeout_s=5, delivery_limit=3)
        self.blocked = BlockedEvals()
        ids = (f"new-{n}" for n in itertools.count())
        self.feed = BrokerFeed(
            self.broker, self.blocked, new_id=lambda: next(ids), now_ns=lambda: 7
        )

    def commit(self, change: StateChange) -> list[Evaluation]:
        index = self.store.commit(change)
        return self.feed.apply(LogEntry(index, 0, change), self.store)


def pending(eval_id: str, job_id: str = "web", **kw: object) -> Evaluation:
    return Evaluation(id=eval_id, job_id=job_id, type="service", status=EvalStatus.PENDING, **kw)  # type: ignore[arg-type]


def node(node_id: str, node_class: str, status: NodeStatus = NodeStatus.READY) -> Node:
    return Node(
        id=node_id,
        node_class=node_class,
        status=status,
        drivers={"mock": DriverInfo()},
        node_resources=NodeResources(cpu=1000, memory_mb=1000),
    ).with_computed_class()


def blocked_on(h: Harness, gpu: Node) -> Evaluation:
    """A batch eval of `train` blocked for want of `gpu`'s class, at the store's index."""
    return Evaluation(
        id="b1",
        job_id="train",
        type="batch",
        status=EvalStatus.BLOCKED,
        triggered_by=TriggeredBy.QUEUED_ALLOCS,
        class_eligibility={gpu.computed_class: True},
        snapshot_index=h.store.latest_index(),
    )


def test_pending_evals_in_the_log_are_enqueued_once_per_job() -> None:
    h = Harness()
    assert h.commit(UpsertEvals((pending("e1"), pending("e2"), pending("x1", "other")))) == []
    stats = h.broker.stats()
    assert (stats.total_ready, stats.total_pending) == (2, 1)
    first = h.broker.dequeue(["service"])
    assert first is not None and first.eval.id in {"e1", "x1"}


def test_blocked_eval_released_when_a_node_of_an_eligible_class_comes_up() -> None:
    h = Harness()
    gpu = node("n1", "gpu", NodeStatus.DOWN)
    h.commit(UpsertNodes((gpu,)))
    blocked = blocked_on(h, gpu)
    assert h.commit(UpsertEvals((blocked,))) == []
    assert h.blocked.get("default", "train") is not None
    writes = h.commit(UpsertNodes((node("n1", "gpu"),)))
    assert [(e.id, e.status) for e in writes] == [("b1", EvalStatus.PENDING)]
    # The release comes back through the log and is then enqueued.
    h.commit(UpsertEvals(tuple(writes)))
    delivery = h.broker.dequeue(["batch"])
    assert delivery is not None and delivery.eval.id == "b1"


def test_finished_allocation_unblocks_its_node_class() -> None:
    h = Harness()
    n = node("n1", "std")
    h.commit(UpsertNodes((n,)))
    h.commit(UpsertAllocs((Allocation(id="a1", node_id="n1", job_id="old", task_group="g"),)))
    blocked = Evaluation(
        id="b1",
        job_id="web",
        type="service",
        status=EvalStatus.BLOCKED,
        class_eligibility={n.computed_class: True},
        snapshot_index=h.store.latest_index(),
    )
    h.commit(UpsertEvals((blocked,)))
    writes = h.commit(UpdateAllocsClientStatus((AllocClientUpdate("a1", ClientStatus.COMPLETE),)))
    assert [e.id for e in writes] == ["b1"]


def test_release_while_outstanding_waits_for_the_ack() -> None:
    """A worker reblocks its eval, capacity appears before it acks: the released eval is
    parked on the delivery's token and enqueued only once that delivery is acked."""
    h = Harness()
    n = node("n1", "std", NodeStatus.DOWN)
    h.commit(UpsertNodes((n,)))
    h.commit(UpsertEvals((pending("e1"),)))
    delivery = h.broker.dequeue(["service"])
    assert delivery is not None
    reblocked = Evaluation(
        id="e1",
        job_id="web",
        type="service",
        status=EvalStatus.BLOCKED,
        class_eligibility={n.computed_class: True},
        snapshot_index=h.store.latest_index(),
    )
    h.commit(UpsertEvals((reblocked,)))
    writes = h.commit(UpsertNodes((node("n1", "std"),)))
    h.commit(UpsertEvals(tuple(writes)))
    assert h.broker.dequeue(["service"]) is None  # parked, not ready
    h.broker.ack("e1", delivery.token)
    again = h.broker.dequeue(["service"])
    assert again is not None and again.eval.id == "e1"


def test_superseded_evals_are_canceled_through_the_leader() -> None:
    h = Harness()
    h.commit(UpsertEvals((pending("e1"),)))
    h.commit(UpsertEvals((pending("e2"), pending("e3"))))
    first = h.broker.dequeue(["service"])
    assert first is not None
    h.broker.ack(first.eval.id, first.token)
    writes = h.feed.housekeeping()
    assert [(e.status, e.status_description) for e in writes] == [
        (EvalStatus.CANCELED, "canceled after more recent eval was processed")
    ]


def test_delivery_limit_fails_the_eval_with_a_follow_up() -> None:
    h = Harness()
    h.commit(UpsertEvals((pending("e1"),)))
    for _ in range(3):
        h.clock.advance(60)
        delivery = h.broker.dequeue(["service"])
        assert delivery is not None
        h.broker.nack("e1", delivery.token)
    writes = h.feed.housekeeping()
    failed, follow_up = writes
    assert failed.status is EvalStatus.FAILED and "delivery limit (3)" in failed.status_description
    assert failed.next_eval == follow_up.id
    assert follow_up.triggered_by is TriggeredBy.FAILED_FOLLOW_UP
    assert follow_up.previous_eval == "e1" and follow_up.wait_until > 0


def test_a_rebuilt_store_restores_only_what_is_still_pending_or_blocked() -> None:
    """Nomad's restoreEvals: a new leader's broker tracks the evals pending or blocked in
    the store as it finally stands; one the log registered and later completed is not
    run again."""
    h = Harness()
    gpu = node("n1", "gpu", NodeStatus.DOWN)
    h.store.commit(UpsertNodes((gpu,)))
    done = pending("done", "finished")
    h.store.commit(UpsertEvals((done, pending("waits", "web"))))
    h.store.commit(UpsertEvals((pending("next", "web"),)))
    h.store.commit(UpsertEvals((dataclasses.replace(done, status=EvalStatus.COMPLETE),)))
    blocked = blocked_on(h, gpu)
    h.store.commit(UpsertEvals((blocked,)))

    assert h.feed.restore(h.store) == []
    stats = h.broker.stats()
    assert (stats.total_ready, stats.total_pending) == (1, 1)  # one per job at a time
    assert h.broker.location("done") is None
    first = h.broker.dequeue(["service", "batch"])
    assert first is not None and first.eval.id == "waits"  # the older of its job's two
    assert h.blocked.get("default", "train") is not None


def test_a_restored_blocked_eval_that_missed_capacity_is_released() -> None:
    """The old leader stopped after capacity came (a node up, an allocation finished) but
    before it wrote the release; an eval that saw all the capacity there is stays blocked."""

    # A node that came up after the eval's snapshot.
    h = Harness()
    gpu = node("n1", "gpu", NodeStatus.DOWN)
    h.store.commit(UpsertNodes((gpu,)))
    h.store.commit(UpsertEvals((blocked_on(h, gpu),)))
    h.store.commit(UpsertNodes((node("n1", "gpu"),)))
    writes = h.feed.restore(h.store)
    assert [(e.id, e.status) for e in writes] == [("b1", EvalStatus.PENDING)]
    assert h.blocked.get("default", "train") is None

    # An allocation that finished in the log's tail, on a node ready all along.
    h = Harness()
    gpu = node("n1", "gpu")
    h.store.commit(UpsertNodes((gpu,)))
    alloc = Allocation(id="a1", job_id="other", node_id="n1", task_group="g")
    h.store.commit(UpsertAllocs((alloc,)))
    h.store.commit(UpsertEvals((blocked_on(h, gpu),)))
    done = UpdateAllocsClientStatus((AllocClientUpdate("a1", ClientStatus.COMPLETE, node_id="n1"),))
    tail = [LogEntry(h.store.commit(done), 0, done)]
    assert h.feed.restore(h.store) == []  # without the tail it waits for new capacity
    again = Harness()
    again.store = h.store
    writes = again.feed.restore(again.store, tail)
    assert [(e.id, e.status) for e in writes] == [("b1", EvalStatus.PENDING)]
