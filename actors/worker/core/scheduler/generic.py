"""The service and batch schedulers (Nomad's GenericScheduler)."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING

from actors.worker.core.scheduler.attempt_cache import AttemptCache
from actors.worker.core.scheduler.base import SchedulerBase, wall_clock_ns
from actors.worker.core.scheduler.context import EvalContext
from actors.worker.core.scheduler.feasible import (
    FilterMetrics,
    GroupFeasibility,
    in_any_datacenter,
)
from actors.worker.core.scheduler.phases import now_ns
from actors.worker.core.scheduler.planner import Planner, refreshing
from actors.worker.core.scheduler.preemptor import Preemptor, preempt_and_select
from actors.worker.core.scheduler.rebase import move_loads, plan_rebase
from actors.worker.core.scheduler.reconcile import (
    ALLOC_LOST,
    Placement,
    Reconciler,
    tainted_nodes,
)
from actors.worker.core.scheduler.share_stack import SharePolicy, ShareStack
from actors.worker.core.scheduler.stack import GroupStack
from contracts import (
    Allocation,
    ClientStatus,
    Job,
    Node,
    NodeStatus,
    RescheduleEvent,
    TaskGroup,
)
from contracts.evaluation import PlanAnnotations
from contracts.ids import new_uuid

if TYPE_CHECKING:
    from actors.state import StateReader

MAX_SERVICE_ATTEMPTS = 5
MAX_BATCH_ATTEMPTS = 2


def shuffle_seed(eval_id: str, index: int) -> int:
    """Deterministic per (evaluation, snapshot). A retry on unchanged nodes keeps the order
    it shuffled first (attempt_cache.py); one after the nodes changed reshuffles."""
    tail = eval_id.replace("-", "")[-16:] or "0"
    try:
        value = int(tail, 16)
    except ValueError:
        value = int.from_bytes(eval_id.encode()[-8:], "big")
    return (value ^ index) >> 2


class GenericScheduler(SchedulerBase):
    def __init__(
        self,
        state: StateReader,
        planner: Planner,
        *,
        batch: bool = False,
        algorithm: str = "binpack",
        now_ns: Callable[[], int] = wall_clock_ns,
        new_id: Callable[[], str] = new_uuid,
    ) -> None:
        super().__init__(state, planner, algorithm=algorithm, now_ns=now_ns, new_id=new_id)
        self.batch = batch
        self.max_attempts = MAX_BATCH_ATTEMPTS if batch else MAX_SERVICE_ATTEMPTS
        self.share_policy = SharePolicy()  # how runs' ranks and gangs are placed
        self.deployment_id = ""  # the deployment this evaluation's placements join
        job_type = "batch" if batch else "service"
        self.preemption = state.scheduler_config().preemption_config.enabled_for(job_type)
        self._attempt_cache: AttemptCache | None = None

    def _reuse_attempt(self, ctx: EvalContext, job: Job) -> None:
        """A retry on unchanged nodes and job keeps the previous attempt's node set, rings
        and class eligibility (see attempt_cache.py)."""
        key = AttemptCache.key_for(self.state, job)
        cache = self._attempt_cache
        if cache is not None and cache.key == key:
            ctx.eligibility = cache.eligibility
        else:
            self._attempt_cache = AttemptCache(key, ctx.eligibility)

    def _compute(self, ctx: EvalContext, job: Job | None) -> None:
        evaluation = self.eval
        assert evaluation is not None
        state = self.state
        if job is not None:
            self._reuse_attempt(ctx, job)
        allocs = state.allocs_by_job(evaluation.namespace, evaluation.job_id)
        namespace, job_id = evaluation.namespace, evaluation.job_id
        phases = self.phases
        started = now_ns() if phases is not None else 0
        tainted = tainted_nodes(allocs, state.node)
        self._mark_stopped_allocs_lost(ctx, allocs, tainted)
        result = Reconciler(
            job,
            allocs,
            tainted,
            batch=self.batch,
            job_version=lambda v: state.job_version(namespace, job_id, v),
            now_ns=self.now_ns(),
            inplace_ok=self._inplace_check(ctx, job),
            deployment=state.latest_deployment(namespace, job_id),
            deployment_of=state.deployment,
            new_id=self.new_id,
        ).compute()
        ctx.plan.deployments = [
            *result.deployment_updates,
            *([result.deployment] if result.deployment is not None else []),
        ]
        self.deployment_id = result.deployment_id
        ctx.plan.annotations = PlanAnnotations(
            {name: u.freeze() for name, u in result.desired_tg_updates.items()}
        )
        for stop in result.stop:
            ctx.stop(stop.alloc, self._stopped(stop.alloc, stop.description, stop.client_status))
        if job is None or job.stop:
            return
        for alloc in result.inplace:
            ctx.update_in_place(
                dataclasses.replace(
                    alloc,
                    eval_id=evaluation.id,
                    job_version=job.version,
                    job_modify_index=job.job_modify_index,
                    modify_time=self.now_ns(),
                    deployment_id=self.deployment_id or alloc.deployment_id,
                )
            )
        for name, updates in result.desired_tg_updates.items():
            # Migrations are placements too (Nomad counts every results.Place entry).
            self.queued[name] = updates.place + updates.migrate + updates.destructive_update
        if phases is not None:
            phases.attempt += 1
            phases.add(
                "reconcile",
                started,
                now_ns(),
                allocs=len(allocs),
                place=len(result.place),
                stop=len(result.stop),
                destructive=len(result.destructive),
                inplace=len(result.inplace),
            )
        if not result.place and not result.destructive:
            return
        cache = self._attempt_cache
        assert cache is not None
        seed = shuffle_seed(evaluation.id, state.latest_index())
        nodes, by_dc = cache.base_nodes(state, job, seed)
        stacks: dict[str, GroupStack] = {}
        share_stacks: dict[str, ShareStack] = {}
        gangs: dict[str, list[Placement]] = {}
        placing = now_ns() if phases is not None else 0
        # New placements that a rebase may take back and place again (see rebase.py).
        redoable: dict[str, tuple[Placement, GroupStack]] = {}
        # Destructive updates first: their stops free resources for what follows.
        for placement in itertools.chain(result.destructive, result.place):
            tg = placement.task_group
            if self._coalesce_failure(tg.name):
                # The group already failed: its later placements are not attempted, and the
                # rest of its new ones are counted without being made (placements.py).
                self._coalesce_failures(tg.name, result.place.drop_rest(tg.name))
                continue
            if tg.share is not None:
                # A run's ranks go on instance blocks (share.py); a gang's all at once, below.
                share_stack = share_stacks.get(tg.name)
                if share_stack is None:
                    share_stack = share_stacks[tg.name] = ShareStack(
                        ctx, job, tg, nodes, self.share_policy
                    )
                if tg.share.gang:
                    gangs.setdefault(tg.name, []).append(placement)
                else:
                    self._place(ctx, job, share_stack, placement)
                continue
            stack = stacks.get(tg.name)
            if stack is None:
                stack = stacks[tg.name] = GroupStack(
                    ctx, job, tg, nodes, by_dc, batch=self.batch, algorithm=self.algorithm
                )
                stack.phases = phases
                cache.restore(stack)
            placed = self._place(ctx, job, stack, placement)
            if placed is not None and placement.previous is None:
                redoable[placed.id] = (placement, stack)
        for name, placements in gangs.items():
            self._place_gang(ctx, job, share_stacks[name], placements, allocs)
        if redoable:
            self._rebase(ctx, job, redoable)
        for stack in stacks.values():
            cache.keep(stack)
        if phases is not None:
            # Ranking is the placement loop's time less the feasibility checks inside it.
            ended = now_ns()
            feasibility = sum(stack.feasibility_ns() for stack in stacks.values())
            for stack in stacks.values():
                stack.report_phases(placing, ended, feasibility)

    def _rebase(
        self, ctx: EvalContext, job: Job, redoable: dict[str, tuple[Placement, GroupStack]]
    ) -> None:
        """Move the plan onto the fresher state the planner has, if any (see rebase.py):
        placements on nodes that filled up meanwhile are taken back and placed again."""
        planner = self.planner
        if not refreshing(planner):
            return
        old = self.state
        fresh = planner.fresher_state(old.latest_index())
        if fresh is None:
            return
        started = now_ns()
        rebase = plan_rebase(ctx, old, fresh, redoable)
        if rebase is None:
            return
        move_loads(ctx, rebase, fresh)
        self.state = fresh
        ctx.plan.snapshot_index = fresh.latest_index()
        again = [alloc for node_id in rebase.full for alloc in ctx.take_back(node_id)]
        for alloc in again:
            placement, stack = redoable[alloc.id]
            if not self._coalesce_failure(placement.task_group.name):
                self._place(ctx, job, stack, placement)
        if again:
            self.rebases += 1
            self.rebased_nodes += len(rebase.full)
        if self.phases is not None:
            self.phases.add(
                "rebase",
                started,
                now_ns(),
                moved=len(rebase.moved),
                full=len(rebase.full),
                placed_again=len(again),
            )

    def _inplace_check(
        self, ctx: EvalContext, job: Job | None
    ) -> Callable[[Allocation, TaskGroup], bool] | None:
        """Nomad's allocUpdateFn node checks: an alloc is updated in place only if its node
        still exists, is in the job's datacenters and node pool, and passes the group's
        feasibility checks; otherwise the update is destructive."""
        if job is None:
            return None
        state = self.state
        any_pool = job.node_pool in ("", "all")
        checkers: dict[str, GroupFeasibility] = {}

        def check(alloc: Allocation, tg: TaskGroup) -> bool:
            node = state.node(alloc.node_id)
            if node is None or not in_any_datacenter(node.datacenter, job.datacenters):
                return False
            if not any_pool and node.node_pool != job.node_pool:
                return False
            checker = checkers.get(tg.name)
            if checker is None:
                checker = checkers[tg.name] = GroupFeasibility(job, tg, ctx.eligibility)
            return checker.check(node, FilterMetrics())

        return check

    def _mark_stopped_allocs_lost(
        self, ctx: EvalContext, allocs: list[Allocation], tainted: dict[str, Node | None]
    ) -> None:
        """Nomad's updateNonTerminalAllocsToLost: an alloc already told to stop or evict whose
        node is down or gone will never report back; mark it lost so it leaves the live set."""
        for alloc in allocs:
            if alloc.node_id not in tainted or not alloc.server_terminal():
                continue
            node = tainted[alloc.node_id]
            if node is not None and node.status is not NodeStatus.DOWN:
                continue
            if alloc.client_status in (ClientStatus.RUNNING, ClientStatus.PENDING):
                ctx.stop(alloc, self._stopped(alloc, ALLOC_LOST, ClientStatus.LOST))

    def _place_gang(
        self,
        ctx: EvalContext,
        job: Job,
        stack: ShareStack,
        placements: list[Placement],
        allocs: list[Allocation],
    ) -> None:
        """All of a gang's ranks on whole idle instances of one cluster fleet, or none of
        them (the evaluation is then blocked until instances free up, holding the ones it
        waits for). A gang is placed once and whole: a rank to replace (lost, migrating,
        updated) or ranks still live mean the run is broken or being torn down, and no part
        of it is placed again (the leader ends a run whose rank's node went away)."""
        tg = placements[0].task_group
        live = [a for a in allocs if a.task_group == tg.name and not a.terminal()]
        if live or any(p.previous is not None for p in placements):
            return
        options = stack.select_gang(len(placements))
        if options is None:
            self.failed_tg_allocs[tg.name] = stack.failure_metric()
            # The blocked evaluation holds the instances the gang waits for (share_stack.py).
            self.reserved_nodes = stack.reservation(len(placements))
            return
        for placement, option in zip(placements, options, strict=True):
            alloc = self._new_alloc(job, tg.name, placement.name, option, None)
            ctx.place(alloc, option.node)

    def _place(
        self, ctx: EvalContext, job: Job, stack: GroupStack | ShareStack, placement: Placement
    ) -> Allocation | None:
        previous = placement.previous
        stopped = None
        if previous is not None and placement.stop_previous:
            # Stop first so the replacement may reuse the resources; undone if nothing fits.
            stopped = self._stopped(previous, placement.stop_previous)
            ctx.stop(previous, stopped)
        penalty = _penalty_nodes(placement) if placement.reschedule else frozenset()
        option = stack.select(penalty)
        preemptor = None
        if option is None and self.preemption and isinstance(stack, GroupStack):
            preemptor = Preemptor(ctx, job, self.now_ns, self.node_allocs)
            option = preempt_and_select(preemptor, stack)
        if option is None:
            if stopped is not None and previous is not None:
                ctx.unstop(previous, stopped)
            self.failed_tg_allocs[placement.task_group.name] = stack.failure_metric()
            return None
        alloc = self._new_alloc(job, placement.task_group.name, placement.name, option, previous)
        if preemptor is not None and preemptor.evicted:
            alloc = preemptor.placed(alloc)
        if self.deployment_id:
            alloc = dataclasses.replace(alloc, deployment_id=self.deployment_id)
            if placement.canary:
                ctx.plan.canaries.append(alloc.id)
        if placement.reschedule and previous is not None:
            alloc = dataclasses.replace(
                alloc,
                reschedule_events=(
                    *previous.reschedule_events,
                    _reschedule_event(previous, self.now_ns()),
                ),
            )
        if stopped is not None:
            ctx.link_replacement(stopped, alloc.id)
        ctx.place(alloc, option.node)
        return alloc


def _penalty_nodes(placement: Placement) -> frozenset[str]:
    previous = placement.previous
    if previous is None:
        return frozenset()
    return frozenset({previous.node_id, *(e.prev_node_id for e in previous.reschedule_events)})


def _reschedule_event(previous: Allocation, now: int) -> RescheduleEvent:
    return RescheduleEvent(
        reschedule_time=now, prev_alloc_id=previous.id, prev_node_id=previous.node_id
    )
