"""What a scheduler needs from the outside world (Nomad's Planner interface).

The worker actor implements it over Redis streams; `InProcessPlanner` (leader core) implements
it directly against a state store for tests, benchmarks and dry-run plans.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeGuard, runtime_checkable

from contracts import Evaluation, Plan, PlanResult
from contracts.copying import replacer

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


@runtime_checkable
class RefreshingPlanner(Planner, Protocol):
    """A planner whose scheduler may be behind the committed state while it computes (a
    worker's replica keeps moving). Before submitting, the generic scheduler asks for a
    fresher state and moves placements off nodes that filled up meanwhile (see rebase.py),
    instead of sending placements the leader would reject."""

    def fresher_state(self, since_index: int) -> StateReader | None:
        """A state newer than `since_index`, or None if nothing was committed since."""
        ...


@runtime_checkable
class CompletingPlanner(Planner, Protocol):
    """A planner that can write the eval's final status together with a plan. Before each
    submission the scheduler hands it the status the eval ends with should that plan commit
    in full; the planner sends it along and, when it was committed, does not send the same
    status again through `update_eval`."""

    def complete_on_commit(self, evaluation: Evaluation) -> None: ...


# isinstance against a runtime-checkable Protocol checks each of its members every time (tens
# of microseconds, twice per evaluation); a planner's class answers the same every time.
_IMPLEMENTS: dict[tuple[type, type], bool] = {}


def _implements(planner: Planner, protocol: type) -> bool:
    key = (type(planner), protocol)
    known = _IMPLEMENTS.get(key)
    if known is None:
        known = _IMPLEMENTS[key] = isinstance(planner, protocol)
    return known


def refreshing(planner: Planner) -> TypeGuard[RefreshingPlanner]:
    return _implements(planner, RefreshingPlanner)


def completing(planner: Planner) -> TypeGuard[CompletingPlanner]:
    return _implements(planner, CompletingPlanner)


_with_modify_time = replacer(Evaluation, "modify_time")


def same_outcome(a: Evaluation, b: Evaluation) -> bool:
    """Two final statuses of one eval that differ at most in when they were written (a
    planner that sent the status with its completing plan drops the scheduler's repeat)."""
    return a == _with_modify_time(b, a.modify_time)


class EvalRecords:
    """What a delivery's planner keeps of the eval records a scheduler writes: evals it
    creates (sent with the next plan), the final status, and the status a completing plan
    carries. The worker's StreamPlanner and the leader's LeaderPlanner share it."""

    def __init__(self) -> None:
        self.evals: list[Evaluation] = []  # created/reblocked evals, sent with the next plan
        self.final: Evaluation | None = None
        # The final status to send with the next plan, and the one a plan committed.
        self.completes: Evaluation | None = None
        self.completed: Evaluation | None = None
        # The leader acked the delivery as it committed the completing plan.
        self.acked_by_leader = False

    def complete_on_commit(self, evaluation: Evaluation) -> None:
        self.completes = evaluation

    def update_eval(self, evaluation: Evaluation) -> None:
        if self.completed is not None and same_outcome(self.completed, evaluation):
            return  # committed with the last plan
        self.final = evaluation

    def create_eval(self, evaluation: Evaluation) -> None:
        self.evals.append(evaluation)

    def reblock_eval(self, evaluation: Evaluation) -> None:
        self.final = evaluation

    def take_for_plan(self) -> tuple[tuple[Evaluation, ...], Evaluation | None]:
        """The created evals and the completing status to send with a plan (taken)."""
        evals, completes = tuple(self.evals), self.completes
        self.evals.clear()
        self.completes = None
        return evals, completes

    def unsent(self) -> list[Evaluation]:
        """What is left to send once the scheduler is done: created evals, then the final
        status."""
        return [*self.evals, *([self.final] if self.final else [])]
