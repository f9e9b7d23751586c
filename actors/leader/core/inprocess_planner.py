"""A Planner that applies plans straight to a state store, with no actors in between.

Used by the scheduler tests (as Nomad's scheduler Harness), by `bench.core`, and for dry-run
plans (`commit=False`: evaluate only, never write).
"""

from __future__ import annotations

from actors.leader.core.plan_apply import PlanApplier
from actors.leader.core.plan_eval import evaluate_plan
from actors.state import StateReader, StateStore
from contracts import EvalStatus, Evaluation, Plan, PlanResult
from contracts.state_log import UpsertEvals


class InProcessPlanner:
    def __init__(self, store: StateStore, *, commit: bool = True) -> None:
        self.store = store
        self.applier = PlanApplier(store)
        self.commit = commit
        self.plans: list[Plan] = []
        self.results: list[PlanResult] = []
        self.evals: list[Evaluation] = []  # every status update, in order
        self.created_evals: list[Evaluation] = []
        self.reblocked: list[Evaluation] = []

    def submit_plan(self, plan: Plan) -> tuple[PlanResult, StateReader | None]:
        self.plans.append(plan)
        result = self.applier.apply(plan) if self.commit else evaluate_plan(self.store, plan)
        self.results.append(result)
        return result, (self.store.snapshot() if result.refresh_index else None)

    def update_eval(self, evaluation: Evaluation) -> None:
        self.evals.append(evaluation)
        self._write(evaluation)

    def create_eval(self, evaluation: Evaluation) -> None:
        self.created_evals.append(evaluation)
        self._write(evaluation)

    def reblock_eval(self, evaluation: Evaluation) -> None:
        self.reblocked.append(evaluation)
        self._write(evaluation)

    def _write(self, evaluation: Evaluation) -> None:
        if self.commit:
            self.store.commit(UpsertEvals((evaluation,)))

    def last_eval_status(self) -> EvalStatus | None:
        return self.evals[-1].status if self.evals else None
