"""Evaluate a plan against the latest state and commit what fits (the leader's apply step)."""

from __future__ import annotations

import dataclasses

from actors.leader.core.plan_eval import evaluate_plan
from actors.state import StateStore
from contracts import Plan, PlanResult
from contracts.state_log import UpsertAllocs


class PlanApplier:
    """Single writer of plan results. `term` fences commits to the current leadership."""

    def __init__(self, store: StateStore, term: int = 0) -> None:
        self.store = store
        self.term = term

    def apply(self, plan: Plan) -> PlanResult:
        result = evaluate_plan(self.store, plan)
        if result.is_no_op():
            return result
        allocs = [a for allocs in result.node_update.values() for a in allocs]
        allocs += [a for allocs in result.node_allocation.values() for a in allocs]
        index = self.store.commit(UpsertAllocs(allocs=tuple(allocs)), term=self.term)
        refresh = max(result.refresh_index, index) if result.refresh_index else 0
        return dataclasses.replace(result, alloc_index=index, refresh_index=refresh)
