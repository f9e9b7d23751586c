"""The leader's fenced commits through its own code path, on a real Redis: the delivery-token
and log-index checks of commit.lua as the leader meets them, and requests and plans that are
delivered again applied once. (The term check: test_service.py.)"""

from __future__ import annotations

from typing import Any

import pytest

from actors.leader.durable_log import DurableLog
from actors.leader.service import STALE_TOKEN
from contracts import Evaluation, Job, Resources, Task, TaskGroup
from contracts.messages import LeaderRequest, LeaderResponse, PlanResponse, RequestKind
from contracts.state_log import DeleteNodes, LogEntry, UpsertEvals


def job() -> Job:
    task = Task(name="t", driver="mock", resources=Resources(cpu=100, memory_mb=64))
    return Job(id="web", name="web", task_groups=(TaskGroup("g", 1, tasks=(task,)),))


def test_a_plan_with_a_superseded_token_is_refused_and_writes_nothing(
    harness: Any,
) -> None:
    service = harness.leader()
    (node,) = harness.nodes(service, 1)
    # The broker redelivered e1: its outstanding token is now t2; a worker still holds t1.
    harness.client.hset(harness.names.tokens_key, "e1", "t2")
    index, length = service.store.latest_index(), harness.log_length()

    harness.send(harness.plan("e1", {node: 2}, token="t1"))
    service.poll_once()
    (stale,) = harness.answers()
    assert isinstance(stale, PlanResponse) and stale.error == STALE_TOKEN
    assert harness.log_length() == length
    assert DurableLog(harness.client, harness.names).last_index() == index
    assert service.store.latest_index() == index
    assert service.stats.stale_plans == 1 and service.stats.placed == 0
    assert not service.store.allocs_by_job("default", "web")

    # The same plan under the outstanding token commits.
    harness.send(harness.plan("e1", {node: 2}, token="t2", attempt=2))
    service.poll_once()
    committed = harness.answers()[-1]
    assert isinstance(committed, PlanResponse) and not committed.error
    assert committed.result.alloc_index == index + 1 == harness.log_length()
    assert len(service.store.allocs_by_job("default", "web")) == 2


def test_an_eval_update_with_a_superseded_token_is_refused(harness: Any) -> None:
    """A worker's final eval status goes through the same fence as its plans."""
    service = harness.leader()
    harness.client.hset(harness.names.tokens_key, "e1", "t2")
    length = harness.log_length()
    update = LeaderRequest(
        RequestKind.UPDATE_EVALS,
        request_id="final",
        evals=(Evaluation(id="e1", job_id="web"),),
        fence_eval_id="e1",
        fence_token="t1",
    )
    response = service.handle(update)
    assert (response.ok, response.error) == (False, STALE_TOKEN)
    assert harness.log_length() == length and service.store.eval("e1") is None
    assert "final" not in service.applied  # refused, so a retry is decided afresh


def test_a_log_moved_underneath_the_leader_is_caught_up_and_the_plan_decided_again(
    harness: Any,
) -> None:
    service = harness.leader()
    (node,) = harness.nodes(service, 1)
    index = service.store.latest_index()
    # Another committer appends with the leader's own term (a bug the index check contains).
    other = DurableLog(harness.client, harness.names)
    other.term = service.stats.term
    theirs = LeaderRequest(
        RequestKind.UPDATE_EVALS, request_id="theirs", evals=(Evaluation(id="e0", job_id="x"),)
    )
    entry = LogEntry(index + 1, other.term, UpsertEvals(theirs.evals), request_id="theirs")
    assert other.commit(index, [entry], [None]).ok

    harness.send(harness.plan("e1", {node: 1}))
    service.poll_once()
    (answer,) = harness.answers()
    assert isinstance(answer, PlanResponse) and not answer.error
    assert answer.result.alloc_index == index + 2  # after the other entry, not over it
    assert [e.index for e in other.entries_after(index)] == [index + 1, index + 2]
    assert service.store.eval("e0") is not None  # the leader applied the other entry too
    assert len(service.store.allocs_by_job("default", "web")) == 1
    assert service.store.latest_index() == service.stats.index == index + 2
    assert service.stats.log_moved == 1

    # What it caught up with is remembered: that request, delivered here, is not reapplied.
    again = service.handle(theirs)
    assert (again.ok, again.index) == (True, index + 1)
    assert harness.log_length() == index + 2


def test_a_plan_decided_again_after_the_log_moved_is_checked_on_the_nodes_as_they_now_are(
    harness: Any,
) -> None:
    """The plan was checked against a store that lacked the appended entry (its node is gone
    in the log): committing it as decided would place an allocation on a deleted node."""
    service = harness.leader()
    (node,) = harness.nodes(service, 1)
    index = service.store.latest_index()
    other = DurableLog(harness.client, harness.names)
    other.term = service.stats.term
    gone = LogEntry(index + 1, other.term, DeleteNodes((node,)), request_id="theirs")
    assert other.commit(index, [gone], [None]).ok

    harness.send(harness.plan("e1", {node: 1}))
    service.poll_once()
    (answer,) = harness.answers()
    assert isinstance(answer, PlanResponse) and not answer.error
    assert [r.node_id for r in answer.result.rejected_nodes] == [node]
    assert not answer.result.alloc_index
    assert service.stats.log_moved == 1 and service.stats.partial_plans == 1
    assert service.stats.plans == 1  # decided twice, counted once
    assert service.store.node(node) is None
    assert not service.store.allocs_by_job("default", "web")
    assert harness.log_length() == index + 1  # nothing committed over the other entry


def test_a_request_delivered_again_is_applied_once_and_answered_alike(
    harness: Any,
) -> None:
    service = harness.leader()
    service.handle(LeaderRequest(RequestKind.REGISTER_JOB, request_id="reg", job=job()))
    stop = LeaderRequest(
        RequestKind.STOP_JOB, request_id="stop-1", reply_to=harness.replies, job_id="web"
    )
    harness.send(stop)
    service.poll_once()
    length = harness.log_length()
    harness.send(stop)  # at-least-once delivery: the same request again
    service.poll_once()
    first, second = harness.answers()
    assert isinstance(first, LeaderResponse) and isinstance(second, LeaderResponse)
    assert first.ok and second.ok and first.index == second.index == length
    assert harness.log_length() == length
    assert [v.version for v in service.store.job_versions("default", "web")] == [1, 0]


@pytest.mark.parametrize("new_leader", [False, True], ids=["same-leader", "after-restart"])
def test_a_plan_delivered_again_is_committed_once(harness: Any, new_leader: bool) -> None:
    """The same eval, token and attempt: applied once, the commit's index answered again (as
    a refresh index: the worker, if it still waits, re-reads the state that holds it)."""
    service = harness.leader()
    (node,) = harness.nodes(service, 1)
    harness.client.hset(harness.names.tokens_key, "e1", "t1")
    plan = harness.plan("e1", {node: 3}, token="t1")
    harness.send(plan)
    service.poll_once()
    length = harness.log_length()
    if new_leader:
        service = harness.leader()  # a new term, rebuilt from the log
    harness.send(plan)
    service.poll_once()
    first, second = harness.answers()
    assert isinstance(first, PlanResponse) and isinstance(second, PlanResponse)
    assert not first.error and not second.error
    assert first.result.alloc_index == length
    assert second.result.refresh_index == length and not second.result.rejected_nodes
    assert harness.log_length() == length
    assert len(service.store.allocs_by_job("default", "web")) == 3
