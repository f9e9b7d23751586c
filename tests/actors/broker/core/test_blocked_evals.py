"""BlockedEvals: Nomad's nomad/blocked_evals_test.go ported, plus a property test."""

from __future__ import annotations

import random
import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actors.broker.core import (
    BlockedEvals,
    BlockedStats,
    BlockOutcome,
    EvalBroker,
    Location,
    ManualClock,
    Unblocked,
    duplicate_blocked_description,
)
from contracts import EvalStatus, Evaluation, TriggeredBy


def blocked_eval(**fields: Any) -> Evaluation:
    """Nomad's mock.BlockedEval(): a blocked service eval for a fresh job."""
    fields.setdefault("id", str(uuid.uuid4()))
    fields.setdefault("job_id", str(uuid.uuid4()))
    fields.setdefault("status", EvalStatus.BLOCKED)
    fields.setdefault("triggered_by", TriggeredBy.QUEUED_ALLOCS)
    return Evaluation(**fields)


def ids(unblocked: list[Unblocked]) -> set[str]:
    return {u.eval.id for u in unblocked}


def test_block_same_job() -> None:
    blocked = BlockedEvals()
    e = blocked_eval()
    e2 = blocked_eval(job_id=e.job_id)
    assert blocked.block(e).outcome is BlockOutcome.BLOCKED
    assert blocked.block(e2).outcome is BlockOutcome.BLOCKED  # equal index: the newcomer wins
    assert blocked.stats() == BlockedStats(total_blocked=1, total_captured=1, total_duplicates=1)
    assert blocked.get(e.namespace, e.job_id) is e2
    assert blocked.take_duplicates() == [e]


def test_get_duplicates_keeps_newest_by_create_or_snapshot_index() -> None:
    blocked = BlockedEvals()
    e = blocked_eval(create_index=100)
    e2 = blocked_eval(job_id=e.job_id, create_index=101)
    e3 = blocked_eval(job_id=e.job_id, create_index=102)
    e4 = blocked_eval(job_id=e.job_id, create_index=100)
    blocked.block(e)
    blocked.block(e2)
    assert blocked.take_duplicates() == [e]
    blocked.block(e3)
    assert blocked.take_duplicates() == [e2]
    assert blocked.block(e4).outcome is BlockOutcome.DUPLICATE  # older: it is the one canceled
    assert blocked.take_duplicates(5) == [e4]
    assert blocked.stats().total_blocked == 1
    # A reblocked eval's SnapshotIndex counts as its age.
    e5 = blocked_eval(job_id=e.job_id, create_index=50, snapshot_index=200)
    assert blocked.block(e5).outcome is BlockOutcome.BLOCKED
    assert blocked.take_duplicates() == [e3]
    expected = 'existing blocked evaluation exists for job "web"'
    assert duplicate_blocked_description("web") == expected


def test_block_same_eval_twice_is_not_a_duplicate() -> None:
    blocked = BlockedEvals()
    e = blocked_eval()
    blocked.block(e)
    blocked.block(e)
    assert blocked.stats() == BlockedStats(total_blocked=1, total_captured=1)


def test_unblock_escaped() -> None:
    blocked = BlockedEvals()
    e = blocked_eval(escaped_computed_class=True)
    blocked.block(e)
    assert blocked.stats() == BlockedStats(total_blocked=1, total_escaped=1)
    out = blocked.unblock("v1:123", 1000)
    assert ids(out) == {e.id}
    assert blocked.stats() == BlockedStats()


def test_unblock_eligible() -> None:
    blocked = BlockedEvals()
    e = blocked_eval(class_eligibility={"v1:123": True})
    blocked.block(e)
    assert blocked.stats().total_blocked == 1
    out = blocked.unblock("v1:123", 1000)
    assert ids(out) == {e.id}
    # A new record, pending, ready for the broker; the original is untouched.
    assert out[0].eval.status is EvalStatus.PENDING and out[0].token == ""
    assert e.status is EvalStatus.BLOCKED
    assert blocked.stats() == BlockedStats()


def test_unblock_ineligible() -> None:
    blocked = BlockedEvals()
    e = blocked_eval(class_eligibility={"v1:123": False})
    blocked.block(e)
    assert blocked.unblock("v1:123", 1000) == []
    assert blocked.stats() == BlockedStats(total_blocked=1, total_captured=1)


def test_unblock_unknown() -> None:
    blocked = BlockedEvals()
    e = blocked_eval(class_eligibility={"v1:123": True, "v1:456": False})
    blocked.block(e)
    assert blocked.unblock("v1:456", 999) == []
    assert ids(blocked.unblock("v1:789", 1000)) == {e.id}  # never saw this class
    assert blocked.stats() == BlockedStats()


def test_unblock_mixes_escaped_and_captured() -> None:
    blocked = BlockedEvals()
    gpu_only = [blocked_eval(class_eligibility={"cpu": False, "gpu": True}) for _ in range(3)]
    anywhere = blocked_eval(class_eligibility={"cpu": True})
    escaped = blocked_eval(escaped_computed_class=True, class_eligibility={"cpu": False})
    for e in [*gpu_only, anywhere, escaped]:
        blocked.block(e)
    assert ids(blocked.unblock("cpu", 10)) == {anywhere.id, escaped.id}
    assert ids(blocked.unblock("gpu", 11)) == {e.id for e in gpu_only}
    assert len(blocked) == 0


def test_reblock_carries_the_token_to_the_broker() -> None:
    clock = ManualClock()
    broker = EvalBroker(clock)
    blocked = BlockedEvals()
    e = blocked_eval(
        snapshot_index=500, class_eligibility={"v1:123": True, "v1:456": False}, type="service"
    )
    broker.enqueue(e)
    delivery = broker.dequeue([e.type])
    assert delivery is not None

    assert blocked.reblock(e, delivery.token).outcome is BlockOutcome.BLOCKED
    assert blocked.stats().total_blocked == 1
    out = blocked.unblock("v1:123", 1000)
    assert out == [Unblocked(out[0].eval, delivery.token)]
    broker.enqueue_all(out)
    stats = broker.stats()
    assert (stats.total_ready, stats.total_unacked) == (0, 1)  # parked until the ack

    broker.ack(e.id, delivery.token)
    assert broker.stats().total_ready == 1
    assert broker.location(e.id) is Location.READY
    assert blocked.stats() == BlockedStats()


def test_block_immediate_unblock_escaped() -> None:
    blocked = BlockedEvals()
    blocked.unblock("v1:123", 1000)
    e = blocked_eval(escaped_computed_class=True, snapshot_index=900)
    result = blocked.block(e)
    assert result.outcome is BlockOutcome.UNBLOCKED
    assert result.enqueue is not None and result.enqueue.eval.id == e.id
    assert result.enqueue.eval.status is EvalStatus.PENDING
    assert blocked.stats() == BlockedStats()


def test_block_immediate_unblock_unseen_class_after() -> None:
    blocked = BlockedEvals()
    blocked.unblock("v1:123", 1000)
    e = blocked_eval(snapshot_index=900)
    assert blocked.block(e).outcome is BlockOutcome.UNBLOCKED
    assert blocked.stats() == BlockedStats()


def test_block_immediate_unblock_unseen_class_before() -> None:
    blocked = BlockedEvals()
    blocked.unblock("v1:123", 500)
    e = blocked_eval(snapshot_index=900)
    assert blocked.block(e).outcome is BlockOutcome.BLOCKED
    assert blocked.stats().total_blocked == 1


def test_block_immediate_unblock_seen_class() -> None:
    blocked = BlockedEvals()
    blocked.unblock("v1:123", 1000)
    e = blocked_eval(class_eligibility={"v1:123": True, "v1:456": False}, snapshot_index=900)
    assert blocked.block(e).outcome is BlockOutcome.UNBLOCKED
    assert blocked.stats() == BlockedStats()


def test_block_prior_unblocks_of_ineligible_classes() -> None:
    blocked = BlockedEvals()
    blocked.unblock("v1:123", 1000)
    blocked.unblock("v1:123", 1001)
    e = blocked_eval(class_eligibility={"v1:123": False, "v1:456": False}, snapshot_index=999)
    assert blocked.block(e).outcome is BlockOutcome.BLOCKED
    assert blocked.stats().total_blocked == 1


def test_prune_unblock_indexes() -> None:
    blocked = BlockedEvals()
    blocked.unblock("v1:123", 1000)
    blocked.prune_unblock_indexes(1001)
    assert blocked.block(blocked_eval(snapshot_index=900)).outcome is BlockOutcome.BLOCKED


def test_unblock_failed() -> None:
    blocked = BlockedEvals()
    e = blocked_eval(triggered_by=TriggeredBy.MAX_PLAN_ATTEMPTS, escaped_computed_class=True)
    e2 = blocked_eval(
        triggered_by=TriggeredBy.MAX_PLAN_ATTEMPTS,
        class_eligibility={"v1:123": True, "v1:456": False},
    )
    other = blocked_eval(class_eligibility={"v1:123": False})
    for ev in (e, e2, other):
        blocked.block(ev)
    assert ids(blocked.unblock_failed()) == {e.id, e2.id}
    assert blocked.stats() == BlockedStats(total_blocked=1, total_captured=1)
    assert blocked.unblock_failed() == []
    # The job can block again afterwards.
    assert blocked.block(e).outcome is BlockOutcome.BLOCKED
    assert blocked.stats() == BlockedStats(total_blocked=2, total_escaped=1, total_captured=1)


def test_untrack() -> None:
    blocked = BlockedEvals()
    e = blocked_eval(class_eligibility={"v1:123": False, "v1:456": False}, snapshot_index=1000)
    blocked.block(e)
    assert blocked.stats().total_blocked == 1
    assert blocked.untrack(e.namespace, e.job_id) is e
    assert blocked.stats() == BlockedStats()
    assert blocked.untrack(e.namespace, e.job_id) is None
    assert blocked.unblock("v1:789", 2000) == []


def test_unblock_node() -> None:
    blocked = BlockedEvals()
    e = blocked_eval(type="system", node_id="foo", snapshot_index=999)
    other = blocked_eval(type="system", node_id="bar", snapshot_index=999)
    blocked.block(e)
    blocked.block(other)
    assert blocked.stats() == BlockedStats(total_blocked=2, total_captured=2, total_by_node=2)
    assert ids(blocked.unblock_node("foo", 1000)) == {e.id}
    assert blocked.stats() == BlockedStats(total_blocked=1, total_captured=1, total_by_node=1)
    assert blocked.unblock_node("foo", 1001) == []
    assert blocked.unblock_node("", 1002) == []


def test_unblock_node_ignores_non_system_evals() -> None:
    blocked = BlockedEvals()
    e = blocked_eval(type="service", node_id="foo")
    blocked.block(e)
    assert blocked.unblock_node("foo", 1000) == []
    assert blocked.stats().total_by_node == 0


def test_system_eval_missed_node_unblock() -> None:
    blocked = BlockedEvals()
    blocked.unblock_node("foo", 1000)
    e = blocked_eval(type="system", node_id="foo", snapshot_index=999)
    assert blocked.block(e).outcome is BlockOutcome.UNBLOCKED


def test_system_untrack() -> None:
    blocked = BlockedEvals()
    e = blocked_eval(type="system", node_id="foo")
    blocked.block(e)
    assert blocked.untrack(e.namespace, e.job_id) is e
    assert blocked.stats() == BlockedStats()
    assert blocked.unblock_node("foo", 10) == []


def test_flush() -> None:
    blocked = BlockedEvals()
    blocked.block(blocked_eval(type="system", node_id="foo"))
    blocked.block(blocked_eval(escaped_computed_class=True))
    blocked.unblock("c", 1)
    blocked.block(blocked_eval(snapshot_index=5))
    blocked.flush()
    assert blocked.stats() == BlockedStats()
    assert blocked.block(blocked_eval()).outcome is BlockOutcome.BLOCKED  # indexes forgotten


# --------------------------------------------------------------------------- property

CLASSES = ["c1", "c2", "c3"]
JOBS = ["a", "b", "c", "d"]
ELIGIBILITY = st.dictionaries(st.sampled_from(CLASSES), st.booleans(), max_size=3)
BLOCK = st.tuples(
    st.just("block"),
    st.sampled_from(JOBS),
    ELIGIBILITY,
    st.booleans(),  # escaped
    st.sampled_from(["", "n1", "n2"]),  # node (system evals only)
    st.booleans(),  # max-plan-attempts
    st.integers(0, 40),  # snapshot index offset below "now"
)
BLOCKED_OPS = st.one_of(
    BLOCK,
    st.tuples(st.just("unblock"), st.sampled_from(CLASSES)),
    st.tuples(st.just("unblock_node"), st.sampled_from(["n1", "n2"])),
    st.tuples(st.just("unblock_failed")),
    st.tuples(st.just("untrack"), st.sampled_from(JOBS)),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(BLOCKED_OPS, min_size=10, max_size=60), st.randoms(use_true_random=False))
def test_property_each_blocked_eval_ends_in_exactly_one_place(
    ops: list[tuple[Any, ...]], rng: random.Random
) -> None:
    blocked = BlockedEvals()
    index = 100
    sent: dict[str, Evaluation] = {}
    released: list[str] = []
    untracked: list[str] = []
    for op in ops:
        index += 1
        if op[0] == "block":
            _, job, elig, escaped, node, max_plans, lag = op
            trigger = TriggeredBy.MAX_PLAN_ATTEMPTS if max_plans else TriggeredBy.QUEUED_ALLOCS
            ev = blocked_eval(
                id=f"b{index}",
                job_id=job,
                type="system" if node else rng.choice(["service", "batch"]),
                node_id=node,
                class_eligibility=elig,
                escaped_computed_class=escaped,
                triggered_by=trigger,
                create_index=index,
                snapshot_index=index - lag,
            )
            sent[ev.id] = ev
            result = blocked.block(ev)
            if result.outcome is BlockOutcome.UNBLOCKED:
                assert result.enqueue is not None
                released.append(result.enqueue.eval.id)
        elif op[0] == "unblock":
            out = blocked.unblock(op[1], index)
            for u in out:  # never an eval that ruled the class out, unless it escaped
                original = sent[u.eval.id]
                eligible = original.class_eligibility.get(op[1], True)
                assert original.escaped_computed_class or eligible
            released += [u.eval.id for u in out]
        elif op[0] == "unblock_node":
            out = blocked.unblock_node(op[1], index)
            assert all(sent[u.eval.id].node_id == op[1] for u in out)
            released += [u.eval.id for u in out]
        elif op[0] == "unblock_failed":
            out = blocked.unblock_failed()
            assert all(sent[u.eval.id].triggered_by is TriggeredBy.MAX_PLAN_ATTEMPTS for u in out)
            released += [u.eval.id for u in out]
        else:
            gone = blocked.untrack("default", op[1])
            if gone is not None:
                untracked.append(gone.id)
        # At most one blocked eval per job, and it is the one `get` reports.
        tracked = [blocked.get("default", job) for job in JOBS]
        assert len(blocked) == sum(1 for t in tracked if t is not None)
    duplicates = [e.id for e in blocked.take_duplicates()]
    still = [t.id for job in JOBS if (t := blocked.get("default", job)) is not None]
    places = released + untracked + duplicates + still
    assert sorted(places) == sorted(sent), "every blocked eval ends in exactly one place"
