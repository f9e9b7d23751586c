"""What the service, batch and system schedulers share: the retry loop around plan
submission, blocked evaluations, and the final status of the evaluation (Nomad's
generic_sched.go Process / retryMax / setStatus)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from actors.worker.core.scheduler.context import EvalContext, PlanBuilder
from actors.worker.core.scheduler.phases import PhaseLog
from actors.worker.core.scheduler.planner import Planner, completing
from actors.worker.core.scheduler.select import RankedOption
from contracts import (
    AllocatedResources,
    Allocation,
    AllocMetric,
    ClientStatus,
    DesiredStatus,
    EvalStatus,
    Evaluation,
    Job,
    Plan,
    PlanResult,
    TriggeredBy,
)
from contracts.copying import replaced, replacer
from contracts.evaluation import PlanAnnotations
from contracts.ids import new_uuid
from contracts.share import NO_CAPACITY_FAIL, NO_CAPACITY_META

if TYPE_CHECKING:
    from actors.state import StateReader

_placement_of = replacer(
    Allocation,
    "id",
    "name",
    "node_id",
    "node_name",
    "allocated_resources",
    "previous_allocation",
    "create_time",
    "modify_time",
)

BLOCKED_EVAL_FAILED_PLACEMENTS = "created to place remaining allocations"
BLOCKED_EVAL_MAX_PLANS = "created due to placement conflicts"

# Triggers the schedulers handle; `scheduled` belongs to the core (GC) scheduler.
HANDLED_TRIGGERS = frozenset(t for t in TriggeredBy if t is not TriggeredBy.SCHEDULED)


class SchedulerError(Exception):
    pass


def wall_clock_ns() -> int:
    return time.time_ns()


class SchedulerBase:
    """Subclasses implement `_compute(ctx, job)` which fills the plan in `ctx`."""

    max_attempts = 5

    def __init__(
        self,
        state: StateReader,
        planner: Planner,
        *,
        algorithm: str = "binpack",
        now_ns: Callable[[], int] = wall_clock_ns,
        new_id: Callable[[], str] = new_uuid,
    ) -> None:
        self.state = state
        self.planner = planner
        self.algorithm = algorithm
        self.now_ns = now_ns
        self.new_id = new_id
        self.eval: Evaluation | None = None
        self.blocked: Evaluation | None = None
        self.failed_tg_allocs: dict[str, AllocMetric] = {}
        self.reserved_nodes: tuple[str, ...] = ()  # a blocked gang's hold (share_stack.py)
        self.queued: dict[str, int] = {}
        self.plan_result: PlanResult | None = None
        self.annotations: PlanAnnotations | None = None
        self.ctx: EvalContext | None = None
        self.attempts = 0
        # Plans moved onto a fresher state before submission, and the nodes taken back.
        self.rebases = 0
        self.rebased_nodes = 0
        self.phases: PhaseLog | None = None  # set by an observer (tracing) to record phases
        self._prototypes: dict[tuple[str, str, int, str, str], Allocation] = {}
        # Every job's allocations on a node, for preemption (preemptor.py); None: the state's.
        self.node_allocs: Callable[[str], list[Allocation]] | None = None
        self._shared_resources: dict[tuple[int, int, int], AllocatedResources] = {}

    # -- the loop -----------------------------------------------------------------------------

    def process(self, evaluation: Evaluation) -> None:
        self.eval = evaluation
        self.blocked = None
        if evaluation.triggered_by not in HANDLED_TRIGGERS:
            self._set_status(
                EvalStatus.FAILED,
                f"scheduler cannot handle '{evaluation.triggered_by}' evaluation reason",
            )
            return
        attempts = 0
        while True:
            self.attempts += 1
            done = self._process_once()
            if done:
                break
            attempts = 0 if self._progress_made() else attempts + 1
            if attempts >= self.max_attempts:
                self._create_blocked_eval(plan_failure=True)
                self._set_status(
                    EvalStatus.FAILED, f"maximum attempts reached ({self.max_attempts})"
                )
                return
        if evaluation.status is EvalStatus.BLOCKED and self.failed_tg_allocs:
            assert self.ctx is not None
            eligibility = self.ctx.eligibility
            self.planner.reblock_eval(
                dataclasses.replace(
                    evaluation,
                    escaped_computed_class=eligibility.has_escaped(),
                    class_eligibility=eligibility.class_eligibility(),
                    failed_tg_allocs=dict(self.failed_tg_allocs),
                    reserved_nodes=self.reserved_nodes,
                    snapshot_index=self.state.latest_index(),
                )
            )
            return
        self._set_status(EvalStatus.COMPLETE, "")

    def _process_once(self) -> bool:
        evaluation = self.eval
        assert evaluation is not None
        job = self.state.job(evaluation.namespace, evaluation.job_id)
        self.queued = {}
        self.failed_tg_allocs = {}
        self.reserved_nodes = ()
        self.plan_result = None
        plan = PlanBuilder(evaluation.id, "", job, self.state.latest_index())
        ctx = self.ctx = EvalContext(self.state, plan, job)
        self._compute(ctx, job)
        self.annotations = plan.annotations
        if (
            evaluation.status is not EvalStatus.BLOCKED
            and self.failed_tg_allocs
            and self.blocked is None
            # A run that asked not to wait for capacity (`retry: false`) fails instead.
            and not (job is not None and job.meta.get(NO_CAPACITY_META) == NO_CAPACITY_FAIL)
        ):
            self._create_blocked_eval(plan_failure=False)
        if plan.is_no_op():
            return True
        priority = job.priority if job else evaluation.priority
        submitted = plan.build(evaluation.namespace, evaluation.job_id, priority)
        if evaluation.status is not EvalStatus.BLOCKED and completing(self.planner):
            # After a full commit `process` ends with exactly this status (a blocked eval
            # may be reblocked instead, so it keeps the separate update).
            self.planner.complete_on_commit(
                self._status_eval(EvalStatus.COMPLETE, "", committed_queued(self.queued, submitted))
            )
        result, new_state = self.planner.submit_plan(submitted)
        self.plan_result = result
        self._adjust_queued(result)
        if new_state is not None:
            self.state = new_state
            return False
        full, expected, actual = result.full_commit(submitted)
        if not full:
            raise SchedulerError(
                f"missing state refresh after partial commit ({actual} of {expected} placed)"
            )
        return True

    def _compute(self, ctx: EvalContext, job: Job | None) -> None:
        raise NotImplementedError

    def _progress_made(self) -> bool:
        result = self.plan_result
        return result is not None and bool(result.node_update or result.node_allocation)

    def _adjust_queued(self, result: PlanResult) -> None:
        self.queued = committed_queued(self.queued, result)

    # -- evaluations --------------------------------------------------------------------------

    def _create_blocked_eval(self, plan_failure: bool) -> None:
        evaluation = self.eval
        assert evaluation is not None and self.ctx is not None
        eligibility = self.ctx.eligibility
        escaped = eligibility.has_escaped()
        now = self.now_ns()
        self.blocked = Evaluation(
            id=self.new_id(),
            namespace=evaluation.namespace,
            priority=evaluation.priority,
            type=evaluation.type,
            triggered_by=TriggeredBy.MAX_PLAN_ATTEMPTS
            if plan_failure
            else TriggeredBy.QUEUED_ALLOCS,
            job_id=evaluation.job_id,
            job_modify_index=evaluation.job_modify_index,
            node_id=evaluation.node_id if evaluation.type == "system" else "",
            status=EvalStatus.BLOCKED,
            status_description=BLOCKED_EVAL_MAX_PLANS
            if plan_failure
            else BLOCKED_EVAL_FAILED_PLACEMENTS,
            previous_eval=evaluation.id,
            failed_tg_allocs=dict(self.failed_tg_allocs),
            class_eligibility={} if escaped else eligibility.class_eligibility(),
            escaped_computed_class=escaped,
            reserved_nodes=self.reserved_nodes,
            snapshot_index=self.state.latest_index(),
            create_time=now,
            modify_time=now,
        )
        self.planner.create_eval(self.blocked)

    def _set_status(self, status: EvalStatus, description: str) -> None:
        self.planner.update_eval(self._status_eval(status, description, self.queued))

    def _status_eval(
        self, status: EvalStatus, description: str, queued: dict[str, int]
    ) -> Evaluation:
        evaluation = self.eval
        assert evaluation is not None
        return replaced(
            evaluation,
            status=status,
            status_description=description,
            blocked_eval=self.blocked.id if self.blocked else evaluation.blocked_eval,
            failed_tg_allocs=dict(self.failed_tg_allocs),
            queued_allocations=dict(queued),
            plan_annotations=self.annotations,
            snapshot_index=self.state.latest_index(),
            modify_time=self.now_ns(),
        )

    def _coalesce_failures(self, task_group: str, n: int) -> None:
        """Count `n` more placements of a failed group as coalesced failures at once."""
        metric = self.failed_tg_allocs.get(task_group)
        if metric is not None and n > 0:
            self.failed_tg_allocs[task_group] = dataclasses.replace(
                metric, coalesced_failures=metric.coalesced_failures + n
            )

    def _coalesce_failure(self, task_group: str) -> bool:
        """If the group already failed a placement in this pass, count another one against
        that failure (Nomad's CoalescedFailures) and say so; the caller records a first one."""
        if task_group not in self.failed_tg_allocs:
            return False
        self._coalesce_failures(task_group, 1)
        return True

    # -- allocations --------------------------------------------------------------------------

    def _new_alloc(
        self,
        job: Job,
        task_group: str,
        name: str,
        option: RankedOption,
        previous: Allocation | None,
    ) -> Allocation:
        """A placement: a copy of the group's prototype with the per-placement fields set
        (building each 26-field record from scratch costs several times more)."""
        evaluation = self.eval
        assert evaluation is not None
        key = (job.namespace, job.id, job.job_modify_index, task_group, evaluation.id)
        proto = self._prototypes.get(key)
        if proto is None:
            proto = self._prototypes[key] = Allocation(
                id="",
                namespace=job.namespace,
                eval_id=evaluation.id,
                job_id=job.id,
                job_version=job.version,
                job_modify_index=job.job_modify_index,
                task_group=task_group,
                desired_status=DesiredStatus.RUN,
                client_status=ClientStatus.PENDING,
            )
        if option.devices:
            resources = AllocatedResources(
                option.cpu, option.memory_mb, option.disk_mb, option.devices
            )
        else:
            shape = (option.cpu, option.memory_mb, option.disk_mb)
            resources = self._shared_resources.get(shape) or self._shared_resources.setdefault(
                shape, AllocatedResources(*shape)
            )
        now = self.now_ns()
        return _placement_of(
            proto,
            self.new_id(),
            name,
            option.node.id,
            option.node.name,
            resources,
            previous.id if previous else "",
            now,
            now,
        )

    def _stopped(
        self,
        alloc: Allocation,
        description: str,
        client_status: ClientStatus | None = None,
        next_alloc: str = "",
    ) -> Allocation:
        changes: dict[str, object] = {
            "desired_status": DesiredStatus.STOP,
            "desired_description": description,
            "modify_time": self.now_ns(),
        }
        if client_status is not None:
            changes["client_status"] = client_status
        if next_alloc:
            changes["next_allocation"] = next_alloc
        return dataclasses.replace(alloc, **changes)  # type: ignore[arg-type]


def committed_queued(queued: dict[str, int], committed: Plan | PlanResult) -> dict[str, int]:
    """Queued placements per group once `committed`'s allocations are placed."""
    out = dict(queued)
    for allocs in committed.node_allocation.values():
        for alloc in allocs:
            # In-place updates are not queued placements; only fresh ones (create_index 0).
            if alloc.create_index == 0 and alloc.task_group in out:
                out[alloc.task_group] = max(0, out[alloc.task_group] - 1)
    return out
