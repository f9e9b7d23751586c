"""Making room by preemption for one placement (the rules are in preemption.py).

The scheduler asks a `Preemptor` when a placement fits nowhere (or, for a system job, not on
its node): it finds the cheapest eviction among the group's feasible nodes, evicts the
victims in the plan (their resources leave the node's proposed load), and once the new
allocation has its ID, records on both sides who preempted whom (Nomad's
PreemptedAllocations / PreemptedByAllocation, "Preempted by alloc ID ...").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence

from actors.state import StateReader
from actors.worker.core.scheduler.context import EvalContext
from actors.worker.core.scheduler.feasible import FilterMetrics
from actors.worker.core.scheduler.preemption import (
    PRIORITY_DELTA,
    Candidate,
    Eviction,
    best_eviction,
    eviction_on,
)
from actors.worker.core.scheduler.select import RankedOption
from actors.worker.core.scheduler.stack import GroupStack
from contracts import Allocation, DesiredStatus, Job, Node

PREEMPTED_BY = "Preempted by alloc ID {}"


def preempt_and_select(
    preemptor: Preemptor, stack: GroupStack, node: Node | None = None
) -> RankedOption | None:
    """Evict the cheapest victims for one more of the group (on `node`, or wherever) and
    charge the placement there; None (nothing evicted) if no eviction makes room."""
    eviction = preemptor.find(stack, node)
    if eviction is None:
        return None
    target = preemptor.state.node(eviction.node_id)
    preemptor.evict(eviction)
    option = stack.select_on(target) if target is not None else None
    if option is None:
        preemptor.undo()
    return option


class Preemptor:
    def __init__(
        self,
        ctx: EvalContext,
        job: Job,
        now_ns: Callable[[], int],
        node_allocs: Callable[[str], list[Allocation]] | None = None,
    ) -> None:
        """node_allocs: every job's allocations on a node (a worker's job-scoped snapshot
        holds only the evaluated job's, so the worker passes a full view)."""
        self.ctx = ctx
        self.job = job
        self.state: StateReader = ctx.state
        self.now_ns = now_ns
        self.node_allocs = node_allocs or self.state.allocs_by_node
        self._priorities: dict[tuple[str, str], int | None] = {}
        # Evictions made for the placement in progress: (victim, its evicted record).
        self.evicted: list[tuple[Allocation, Allocation]] = []

    def find(self, stack: GroupStack, node: Node | None = None) -> Eviction | None:
        """The cheapest eviction that makes room for one more of `stack`'s group: on `node`,
        or over the group's feasible nodes. Device asks are never preempted for."""
        if stack.device_requests:
            return None
        if node is not None:
            missing = self._missing(stack, node.id)
            if missing is None:
                return None
            return eviction_on(node.id, missing, self._candidates(node.id))
        return best_eviction(
            self._feasible(stack),
            lambda node_id: self._missing(stack, node_id),
            self._candidates,
        )

    def evict(self, eviction: Eviction) -> None:
        """Take the victims off their node in the plan (undone by `undo`)."""
        now = self.now_ns()
        for victim in eviction.victims:
            record = dataclasses.replace(
                victim,
                desired_status=DesiredStatus.EVICT,
                desired_description=PREEMPTED_BY.format(""),
                modify_time=now,
            )
            self.ctx.stop(victim, record)
            self.evicted.append((victim, record))

    def undo(self) -> None:
        for victim, record in reversed(self.evicted):
            self.ctx.unstop(victim, record)
        self.evicted = []

    def placed(self, alloc: Allocation) -> Allocation:
        """`alloc` took the evicted allocations' room: both sides name each other."""
        victims = [victim.id for victim, _ in self.evicted]
        for _, record in self.evicted:
            self.ctx.relabel(
                record,
                desired_description=PREEMPTED_BY.format(alloc.id),
                preempted_by_allocation=alloc.id,
            )
        self.evicted = []
        return dataclasses.replace(alloc, preempted_allocations=tuple(victims))

    # -- what a node lacks, and what on it may go --------------------------------------------

    def _feasible(self, stack: GroupStack) -> Iterator[str]:
        """The group's feasible nodes: its ring's, which the failed walk completed, checked
        again only if it has none yet."""
        ring = stack.ring
        if ring is not None and ring.complete:
            yield from (entry[0].id for entry in ring.entries)
            return
        metrics = FilterMetrics()
        for node in stack.base_nodes:
            if stack.feasibility.check(node, metrics):
                yield node.id

    def _missing(self, stack: GroupStack, node_id: str) -> tuple[int, int, int] | None:
        node = self.state.node(node_id)
        if node is None:
            return None
        res, reserved = node.node_resources, node.reserved_resources
        cap = (
            res.cpu - reserved.cpu,
            res.memory_mb - reserved.memory_mb,
            res.disk_mb - reserved.disk_mb,
        )
        ask = (stack.ask_cpu, stack.ask_mem, stack.ask_disk)
        if any(a > c for a, c in zip(ask, cap, strict=True)):
            return None  # too small even empty
        load = self.ctx.load(node_id)
        used = (load.cpu, load.memory_mb, load.disk_mb)
        return tuple(u + a - c for u, a, c in zip(used, ask, cap, strict=True))  # type: ignore[return-value]

    def _candidates(self, node_id: str) -> Sequence[Candidate]:
        stopping = {a.id for a in self.ctx.plan.node_update.get(node_id, ())}
        ceiling = self.job.priority - PRIORITY_DELTA
        out = []
        for alloc in self._live_on(node_id):
            if alloc.id in stopping:
                continue
            if alloc.job_id == self.job.id and alloc.namespace == self.job.namespace:
                continue
            priority = self._priority(alloc)
            if priority is not None and priority <= ceiling:
                out.append(Candidate(alloc, priority))
        return out

    def _live_on(self, node_id: str) -> Iterable[Allocation]:
        return (a for a in self.node_allocs(node_id) if not a.terminal())

    def _priority(self, alloc: Allocation) -> int | None:
        key = (alloc.namespace, alloc.job_id)
        if key not in self._priorities:
            job = self.state.job(*key)
            self._priorities[key] = job.priority if job is not None else None
        return self._priorities[key]
