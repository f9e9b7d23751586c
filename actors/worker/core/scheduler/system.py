"""The system and sysbatch schedulers: one allocation per task group on every eligible node
(Nomad's SystemScheduler with reconcile_node.go, reduced to what drover models).

Nodes ruled out by constraints are skipped silently; a feasible node without room is a
placement failure and blocks the evaluation until capacity appears.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING

from actors.worker.core.scheduler.base import SchedulerBase, wall_clock_ns
from actors.worker.core.scheduler.context import EvalContext
from actors.worker.core.scheduler.feasible import in_any_datacenter
from actors.worker.core.scheduler.node_set import READY_NODES
from actors.worker.core.scheduler.planner import Planner
from actors.worker.core.scheduler.preemptor import Preemptor, preempt_and_select
from actors.worker.core.scheduler.reconcile import (
    ALLOC_LOST,
    ALLOC_NODE_TAINTED,
    ALLOC_NOT_NEEDED,
    ALLOC_UPDATING,
    GroupUpdates,
    _same_version,
)
from actors.worker.core.scheduler.stack import GroupStack
from actors.worker.core.scheduler.tasks_updated import tasks_updated
from contracts import Allocation, ClientStatus, Job, NodeStatus
from contracts.allocation import alloc_name
from contracts.evaluation import PlanAnnotations
from contracts.ids import new_uuid

if TYPE_CHECKING:
    from actors.state import StateReader


class SystemScheduler(SchedulerBase):
    def __init__(
        self,
        state: StateReader,
        planner: Planner,
        *,
        sysbatch: bool = False,
        algorithm: str = "binpack",
        now_ns: Callable[[], int] = wall_clock_ns,
        new_id: Callable[[], str] = new_uuid,
    ) -> None:
        super().__init__(state, planner, algorithm=algorithm, now_ns=now_ns, new_id=new_id)
        self.sysbatch = sysbatch
        self.max_attempts = 2 if sysbatch else 5
        job_type = "sysbatch" if sysbatch else "system"
        self.preemption = state.scheduler_config().preemption_config.enabled_for(job_type)

    def _compute(self, ctx: EvalContext, job: Job | None) -> None:
        evaluation = self.eval
        assert evaluation is not None
        state = self.state
        allocs = [
            a
            for a in state.allocs_by_job(evaluation.namespace, evaluation.job_id)
            if not a.server_terminal()
        ]
        updates: dict[str, GroupUpdates] = defaultdict(GroupUpdates)
        try:
            if job is None or job.stop:
                for alloc in allocs:
                    if not alloc.client_terminal():
                        self._stop(ctx, alloc, ALLOC_NOT_NEEDED, updates)
                return
            self._compute_job(ctx, job, allocs, updates)
        finally:
            ctx.plan.annotations = PlanAnnotations({k: v.freeze() for k, v in updates.items()})

    def _compute_job(
        self, ctx: EvalContext, job: Job, allocs: list[Allocation], updates: dict[str, GroupUpdates]
    ) -> None:
        state = self.state
        ready_nodes = READY_NODES.get(state, job)  # shared with every eval on these nodes
        nodes, by_dc = ready_nodes.nodes, ready_nodes.by_dc
        ready = {n.id for n in nodes}
        groups = {tg.name for tg in job.task_groups}
        live: dict[tuple[str, str], list[Allocation]] = defaultdict(list)
        for alloc in allocs:
            if alloc.task_group not in groups:
                if not alloc.client_terminal():
                    self._stop(ctx, alloc, ALLOC_NOT_NEEDED, updates)
                continue
            if alloc.desired_transition.migrate and not alloc.client_terminal():
                # Marked by the drainer (at the end of a drain, or forced) or `alloc stop`:
                # Nomad's diffSystemAllocsForNode migrates it; unmarked, an allocation on a
                # draining node stays (the drainer leaves system work to the end).
                self._stop(ctx, alloc, ALLOC_NODE_TAINTED, updates)
                continue
            if alloc.node_id not in ready and not alloc.client_terminal():
                node = state.node(alloc.node_id)
                if node is None or node.status in (NodeStatus.DOWN, NodeStatus.DISCONNECTED):
                    self._stop(ctx, alloc, ALLOC_LOST, updates, ClientStatus.LOST)
                    continue
                if node.drain_strategy is not None:
                    live[(alloc.task_group, alloc.node_id)].append(alloc)
                    continue
                if not in_any_datacenter(node.datacenter, job.datacenters):
                    self._stop(ctx, alloc, ALLOC_NOT_NEEDED, updates)
                    continue
            live[(alloc.task_group, alloc.node_id)].append(alloc)

        for tg in job.task_groups:
            stack = GroupStack(
                ctx, job, tg, nodes, by_dc, batch=self.sysbatch, algorithm=self.algorithm
            )
            tg_updates = updates[tg.name]
            name = alloc_name(job.id, tg.name, 0)
            old_job = None
            for node in nodes:
                existing = live.get((tg.name, node.id), [])
                keep = [a for a in existing if self._counts(a)]
                for extra in keep[1:]:
                    self._stop(ctx, extra, ALLOC_NOT_NEEDED, updates)
                if keep:
                    alloc = keep[0]
                    if stack.infeasible(node):
                        self._stop(ctx, alloc, ALLOC_NOT_NEEDED, updates)
                    elif alloc.client_terminal() or _same_version(alloc, job):
                        tg_updates.ignore += 1
                    else:
                        old_job = state.job_version(job.namespace, job.id, alloc.job_version)
                        if tasks_updated(old_job, job, tg.name):
                            self._replace(ctx, job, stack, alloc, name, tg_updates)
                        else:
                            ctx.update_in_place(
                                dataclasses.replace(
                                    alloc,
                                    eval_id=self.eval.id if self.eval else alloc.eval_id,
                                    job_version=job.version,
                                    job_modify_index=job.job_modify_index,
                                )
                            )
                            tg_updates.in_place_update += 1
                    continue
                if stack.infeasible(node):
                    continue
                self.queued[tg.name] = self.queued.get(tg.name, 0) + 1
                tg_updates.place += 1
                self._place_on(ctx, job, stack, node.id, name, None)

    def _counts(self, alloc: Allocation) -> bool:
        """Whether an existing allocation occupies its node's slot for the group."""
        if not alloc.client_terminal():
            return True
        # sysbatch work that finished is done; a system allocation that ended is replaced.
        return self.sysbatch and alloc.client_status is ClientStatus.COMPLETE

    def _stop(
        self,
        ctx: EvalContext,
        alloc: Allocation,
        description: str,
        updates: dict[str, GroupUpdates],
        client_status: ClientStatus | None = None,
    ) -> None:
        ctx.stop(alloc, self._stopped(alloc, description, client_status))
        updates[alloc.task_group].stop += 1

    def _replace(
        self,
        ctx: EvalContext,
        job: Job,
        stack: GroupStack,
        alloc: Allocation,
        name: str,
        updates: GroupUpdates,
    ) -> None:
        stopped = self._stopped(alloc, ALLOC_UPDATING)
        ctx.stop(alloc, stopped)
        updates.destructive_update += 1
        self.queued[alloc.task_group] = self.queued.get(alloc.task_group, 0) + 1
        placed = self._place_on(ctx, job, stack, alloc.node_id, name, alloc)
        if placed is None:
            ctx.unstop(alloc, stopped)
        else:
            ctx.link_replacement(stopped, placed.id)

    def _place_on(
        self,
        ctx: EvalContext,
        job: Job,
        stack: GroupStack,
        node_id: str,
        name: str,
        previous: Allocation | None,
    ) -> Allocation | None:
        tg_name = stack.tg.name
        node = self.state.node(node_id)
        option = stack.select_on(node) if node is not None else None
        preemptor = None
        if option is None and node is not None and self.preemption:
            preemptor = Preemptor(ctx, job, self.now_ns, self.node_allocs)
            option = preempt_and_select(preemptor, stack, node)
        if option is None:
            if not self._coalesce_failure(tg_name):
                self.failed_tg_allocs[tg_name] = stack.failure_metric()
            return None
        alloc = self._new_alloc(job, tg_name, name, option, previous)
        if preemptor is not None and preemptor.evicted:
            alloc = preemptor.placed(alloc)
        ctx.place(alloc, option.node)
        return alloc
