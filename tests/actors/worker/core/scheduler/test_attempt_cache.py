"""A retry after a partial commit keeps the previous attempt's node set and rings while the
nodes and the job are unchanged, and rebuilds them when the nodes changed."""

from __future__ import annotations

from typing import Any

import pytest

from actors.leader.core.inprocess_planner import InProcessPlanner
from actors.state import StateReader, StateStore
from actors.worker.core.scheduler import node_set
from contracts import EvalStatus, Plan, PlanResult
from contracts.state_log import UpsertAllocs, UpsertNodes


class CollidingPlanner(InProcessPlanner):
    """Before the first plan is applied, another job's plan fills one of its nodes (the
    collision of two workers), so the leader rejects that node and the scheduler retries.
    With `change_nodes`, a node is also updated in between (the nodes table moves)."""

    def __init__(self, store: StateStore, filler: Any, change_nodes: bool = False) -> None:
        super().__init__(store)
        self.filler = filler
        self.change_nodes = change_nodes
        self.collided_on: str | None = None

    def submit_plan(self, plan: Plan) -> tuple[PlanResult, StateReader | None]:
        if self.collided_on is None:
            self.collided_on = next(iter(plan.node_allocation))
            self.store.commit(UpsertAllocs((self.filler(self.collided_on),)))
            if self.change_nodes:
                spare = self.store.node("node-9")
                assert spare is not None
                self.store.commit(UpsertNodes((spare,)))
        return super().submit_plan(plan)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times the base node set was computed."""
    calls: list[int] = []
    real = node_set.ready_nodes_in_pool

    def counting(*args: Any) -> Any:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(node_set, "ready_nodes_in_pool", counting)
    return calls


@pytest.mark.parametrize("change_nodes", [False, True])
def test_retry_reuses_the_node_set_unless_nodes_changed(
    h: Any, build: Any, counted: list[int], change_nodes: bool
) -> None:
    h.nodes(10, cpu=2000)
    job, ev = h.register(build.job("web", build.group(count=6, cpu=600)))
    other, _ = h.register(build.job("other", build.group(count=1, cpu=2000)))
    planner = CollidingPlanner(
        h.store, lambda node_id: build.alloc(other, node_id, 0), change_nodes=change_nodes
    )

    h.process(ev, planner)

    assert len(planner.plans) == 2  # partially rejected, then retried
    assert planner.results[0].rejected_nodes
    assert len(counted) == (2 if change_nodes else 1)
    live = h.live_allocs(job)
    assert len(live) == 6
    assert planner.collided_on not in {a.node_id for a in live}  # the full node was avoided
    build.assert_eval(planner, EvalStatus.COMPLETE)
