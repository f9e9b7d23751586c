"""`POST /v1/job/:id/plan`: what the scheduler would do with a job, committing nothing.

As Nomad's Job.Plan: the job is registered against a view of the state (an overlay over the
API's snapshot: no copy of the state), its eval runs through the real scheduler with a
planner that evaluates plans against that view but never writes, and the answer lists the
desired changes per group, the placements that would fail (with their metrics) and the
evals that would be created (a blocked eval when something cannot be placed).
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from actors.leader.core.job_lifecycle import register_job
from actors.leader.core.plan_eval import evaluate_plan
from actors.state import StateReader
from actors.worker.core.scheduler import new_scheduler
from contracts import Allocation, Evaluation, Job, Plan, PlanResult
from contracts.evaluation import AllocMetric, DesiredUpdates
from contracts.state_log import UpsertJob


class _JobOverlay:
    """A StateReader that sees `job` as the job's current version."""

    def __init__(self, base: StateReader, job: Job) -> None:
        self._base = base
        self._job = job

    def job(self, namespace: str, job_id: str) -> Job | None:
        if (namespace, job_id) == (self._job.namespace, self._job.id):
            return self._job
        return self._base.job(namespace, job_id)

    def job_version(self, namespace: str, job_id: str, version: int) -> Job | None:
        if (namespace, job_id, version) == (self._job.namespace, self._job.id, self._job.version):
            return self._job
        return self._base.job_version(namespace, job_id, version)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._base, name)


class _DryRunPlanner:
    """InProcessPlanner(commit=False) minus its refresh: that one re-snapshots its store,
    which would drop the overlay's job; here a partially rejected plan retries on the view."""

    def __init__(self, state: StateReader) -> None:
        self.state = state
        self.plans: list[Plan] = []
        self.evals: list[Evaluation] = []
        self.created: list[Evaluation] = []

    def submit_plan(self, plan: Plan) -> tuple[PlanResult, StateReader | None]:
        self.plans.append(plan)
        return evaluate_plan(self.state, plan), None

    def update_eval(self, evaluation: Evaluation) -> None:
        self.evals.append(evaluation)

    def create_eval(self, evaluation: Evaluation) -> None:
        self.created.append(evaluation)

    def reblock_eval(self, evaluation: Evaluation) -> None:
        self.created.append(evaluation)


@dataclass(slots=True)
class DryRun:
    job_modify_index: int  # of the job as it is now (0: new job); for `job run -check-index`
    desired_updates: dict[str, DesiredUpdates] = field(default_factory=dict)
    failed_tg_allocs: dict[str, AllocMetric] = field(default_factory=dict)
    created_evals: list[Evaluation] = field(default_factory=list)
    placed: int = 0
    stopped: int = 0
    diff_type: str = "None"  # Added, Edited or None, as Nomad's JobDiff.Type
    warnings: tuple[str, ...] = ()
    # The allocations placements would evict (their eviction records), as Nomad's
    # PlanAnnotations.PreemptedAllocs; each group's count is in its desired updates.
    preempted: list[Allocation] = field(default_factory=list)


def plan_job(
    state: StateReader,
    job: Job,
    *,
    preserve_counts: bool = False,
    now_ns: Callable[[], int] = time.time_ns,
) -> DryRun:
    ids = (f"dry-run-{n}" for n in itertools.count())
    existing = state.job(job.namespace, job.id)
    write = register_job(
        state, job, now_ns=now_ns(), new_id=lambda: next(ids), preserve_counts=preserve_counts
    )
    planned = existing if existing is not None else job
    if isinstance(write.change, UpsertJob):
        version = existing.version + 1 if existing is not None else 0
        planned = dataclasses.replace(
            write.change.job, version=version, job_modify_index=state.latest_index() + 1
        )
    diff = "Added" if existing is None else ("Edited" if planned is not existing else "None")
    view = _JobOverlay(state, planned)
    planner = _DryRunPlanner(view)
    assert write.eval is not None
    evaluation = dataclasses.replace(write.eval, job_modify_index=planned.job_modify_index)
    scheduler = new_scheduler(
        evaluation.type, view, planner, now_ns=now_ns, new_id=lambda: next(ids)
    )
    scheduler.process(evaluation)
    final = planner.evals[-1] if planner.evals else evaluation
    # The last attempt's annotations, whether its plan was submitted or was a no-op.
    annotations = scheduler.annotations
    desired = dict(annotations.desired_tg_updates) if annotations else {}
    preempted = _preemptions(planner.plans, desired)
    return DryRun(
        job_modify_index=existing.job_modify_index if existing is not None else 0,
        desired_updates=desired,
        failed_tg_allocs=dict(final.failed_tg_allocs or scheduler.failed_tg_allocs),
        created_evals=planner.created,
        placed=sum(len(a) for p in planner.plans for a in p.node_allocation.values()),
        stopped=sum(len(a) for p in planner.plans for a in p.node_update.values()),
        diff_type=diff,
        warnings=write.warnings,
        preempted=preempted,
    )


def _preemptions(plans: list[Plan], desired: dict[str, DesiredUpdates]) -> list[Allocation]:
    """The allocations the plans' placements evict, counted into each placing group's
    `preemptions` (`desired` is updated), as Nomad's computePlacements annotates a plan."""
    evicted: list[Allocation] = []
    for plan in plans:
        stopped = {a.id: a for allocs in plan.node_update.values() for a in allocs}
        for allocs in plan.node_allocation.values():
            for alloc in allocs:
                victims = [stopped[i] for i in alloc.preempted_allocations if i in stopped]
                if not victims:
                    continue
                evicted += victims
                group = desired.get(alloc.task_group, DesiredUpdates())
                desired[alloc.task_group] = dataclasses.replace(
                    group, preemptions=group.preemptions + len(victims)
                )
    return evicted
