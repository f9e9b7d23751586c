"""Evaluate a plan against the latest state and commit what fits (the leader's apply step)."""

from __future__ import annotations

import dataclasses

from actors.leader.core.deployment_plan import plan_deployments
from actors.leader.core.plan_eval import evaluate_plan
from actors.state import StateStore
from contracts import Plan, PlanResult
from contracts.state_log import UpsertAllocs, UpsertDeployments


class PlanApplier:
    """Single writer of plan results. `term` fences commits to the current leadership."""

    def __init__(self, store: StateStore, term: int = 0) -> None:
        self.store = store
        self.term = term

    def apply(self, plan: Plan, now_ns: int = 0) -> PlanResult:
        result = evaluate_plan(self.store, plan)
        deployments = plan_deployments(self.store, plan, result, now_ns)
        if deployments:
            self.store.commit(UpsertDeployments(tuple(deployments)), term=self.term)
        if result.is_no_op():
            return result
        allocs = [a for allocs in result.node_update.values() for a in allocs]
        allocs += [a for allocs in result.node_allocation.values() for a in allocs]
        index = self.store.commit(UpsertAllocs(allocs=tuple(allocs)), term=self.term)
        refresh = max(result.refresh_index, index) if result.refresh_index else 0
        return dataclasses.replace(result, alloc_index=index, refresh_index=refresh)
