"""Choose the scheduler for an evaluation's type, as Nomad's BuiltinSchedulers map does."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from actors.worker.core.scheduler.base import SchedulerBase, wall_clock_ns
from actors.worker.core.scheduler.generic import GenericScheduler
from actors.worker.core.scheduler.planner import Planner
from actors.worker.core.scheduler.system import SystemScheduler
from contracts.ids import new_uuid

if TYPE_CHECKING:
    from actors.state import StateReader

SCHEDULER_TYPES = ("service", "batch", "system", "sysbatch")


def new_scheduler(
    eval_type: str,
    state: StateReader,
    planner: Planner,
    *,
    algorithm: str | None = None,
    now_ns: Callable[[], int] = wall_clock_ns,
    new_id: Callable[[], str] = new_uuid,
) -> SchedulerBase:
    # The scheduler configuration's algorithm unless the caller names one.
    algorithm = algorithm or state.scheduler_config().scheduler_algorithm.value
    if eval_type == "service":
        return GenericScheduler(
            state, planner, batch=False, algorithm=algorithm, now_ns=now_ns, new_id=new_id
        )
    if eval_type == "batch":
        return GenericScheduler(
            state, planner, batch=True, algorithm=algorithm, now_ns=now_ns, new_id=new_id
        )
    if eval_type == "system":
        return SystemScheduler(state, planner, algorithm=algorithm, now_ns=now_ns, new_id=new_id)
    if eval_type == "sysbatch":
        return SystemScheduler(
            state, planner, sysbatch=True, algorithm=algorithm, now_ns=now_ns, new_id=new_id
        )
    raise ValueError(
        f"unknown scheduler type {eval_type!r}; expected one of {', '.join(SCHEDULER_TYPES)}"
    )
