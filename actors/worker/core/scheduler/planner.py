"""What a scheduler needs from the outside world (Nomad's Planner interface).

The worker actor implements it over Redis streams; `InProcessPlanner` (leader core) implements
it directly against a state store for tests, benchmarks and dry-run plans.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from contracts import Evaluation, Plan, PlanResult

if TYPE_CHECKING:
    from actors.state import StateReader


class Planner(Protocol):
    def submit_plan(self, plan: Plan) -> tuple[PlanResult, StateReader | None]:
        """Submit a plan; returns the result and, if part of it was rejected, a state
        refreshed to at least the result's refresh index."""
        ...

    def update_eval(self, evaluation: Evaluation) -> None: ...

    def create_eval(self, evaluation: Evaluation) -> None: ...

    def reblock_eval(self, evaluation: Evaluation) -> None: ...
