"""Two small leader decisions kept out of leader.py: the evals a plan's preemptions call for,
and the scheduler configuration's check-and-set."""

from __future__ import annotations

from collections.abc import Callable

from actors.state import StateReader
from contracts import Evaluation, PlanResult, TriggeredBy
from contracts.errors import ValidationError
from contracts.scheduler_config import SchedulerConfiguration
from contracts.state_log import StateChange, UpsertSchedulerConfig

EvalFactory = Callable[[str, str, str, TriggeredBy], Evaluation]


def preemption_evals(
    state: StateReader, result: PlanResult, new_eval: EvalFactory
) -> list[Evaluation]:
    """A follow-up eval for each job whose allocations the plan preempted (Nomad's plan
    applier makes them), so that they are placed again where there is room."""
    jobs = {
        (a.namespace, a.job_id)
        for allocs in result.node_update.values()
        for a in allocs
        if a.preempted_by_allocation
    }
    evals = []
    for namespace, job_id in sorted(jobs):
        job = state.job(namespace, job_id)
        if job is not None and not job.stop:
            evals.append(new_eval(namespace, job_id, job.type.value, TriggeredBy.PREEMPTION))
    return evals


def set_scheduler_config(
    state: StateReader, config: SchedulerConfiguration | None, enforce_index: int | None
) -> list[StateChange]:
    """Nomad's Operator.SchedulerSetConfiguration: nothing is written (and the reply says
    Updated: false) when `enforce_index` is not the current configuration's modify index."""
    if config is None:
        raise ValidationError("SchedulerConfig is required")
    if enforce_index is not None and enforce_index != state.scheduler_config().modify_index:
        return []
    return [UpsertSchedulerConfig(config)]
