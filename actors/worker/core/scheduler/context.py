"""Per-evaluation scheduling context: the plan being built and the *proposed* view of nodes.

Proposed = committed state (the worker's snapshot) + this plan's stops and placements. The
context never copies the snapshot: it reads node usage lazily and keeps small deltas, so an
evaluation costs what it touches, not what the cluster holds.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import TYPE_CHECKING

from actors.worker.core.scheduler.constraints import resolve_node_target
from actors.worker.core.scheduler.feasible import EvalEligibility
from contracts import Allocation, Job, Node, Plan
from contracts.deployment import Deployment
from contracts.evaluation import PlanAnnotations

if TYPE_CHECKING:
    from actors.state import StateReader


class NodeLoad:
    """Mutable proposed usage of one node during one evaluation.

    Created for every node the stack looks at, so construction is kept cheap: the device set
    is the snapshot's frozenset until this plan claims or frees a device on the node.
    """

    __slots__ = ("cpu", "devices", "disk_mb", "memory_mb")

    def __init__(self, cpu: int, memory_mb: int, disk_mb: int, devices: frozenset[str]) -> None:
        self.cpu = cpu
        self.memory_mb = memory_mb
        self.disk_mb = disk_mb
        self.devices: frozenset[str] | set[str] = devices

    @property
    def device_ids(self) -> frozenset[str] | set[str]:
        return self.devices

    def claim_devices(self, ids: tuple[str, ...]) -> None:
        if isinstance(self.devices, frozenset):
            self.devices = set(self.devices)
        self.devices.update(ids)

    def free_devices(self, ids: tuple[str, ...]) -> None:
        if isinstance(self.devices, frozenset):
            self.devices = set(self.devices)
        self.devices.difference_update(ids)


class PlanBuilder:
    """Accumulates a plan's stops and placements per node."""

    def __init__(self, eval_id: str, eval_token: str, job: Job | None, snapshot_index: int) -> None:
        self.eval_id = eval_id
        self.eval_token = eval_token
        self.job = job
        self.snapshot_index = snapshot_index
        self.node_update: dict[str, list[Allocation]] = defaultdict(list)
        self.node_allocation: dict[str, list[Allocation]] = defaultdict(list)
        self.annotations: PlanAnnotations | None = None
        self.deployments: list[Deployment] = []  # created or cancelled by this plan
        self.canaries: list[str] = []  # placements that are canaries

    def is_no_op(self) -> bool:
        return not self.node_update and not self.node_allocation and not self.deployments

    def build(self, namespace: str, job_id: str, priority: int) -> Plan:
        job = self.job
        return Plan(
            eval_id=self.eval_id,
            eval_token=self.eval_token,
            priority=priority,
            namespace=namespace,
            job_id=job_id,
            job_version=job.version if job else 0,
            all_at_once=job.all_at_once if job else False,
            snapshot_index=self.snapshot_index,
            node_update={k: tuple(v) for k, v in self.node_update.items()},
            node_allocation={k: tuple(v) for k, v in self.node_allocation.items()},
            annotations=self.annotations,
            deployments=tuple(self.deployments),
            canaries=tuple(self.canaries),
        )


class PropertySet:
    """Counts of a job's (or one group's) proposed allocations per value of a node property.
    Shared by distinct_property and spread, as in Nomad."""

    def __init__(self, ctx: EvalContext, attribute: str, task_group: str | None) -> None:
        self.attribute = attribute
        self.task_group = task_group
        self.counts: dict[str, int] = defaultdict(int)
        state = ctx.state
        for tg, on_node in ctx.group_allocs_on_node.items():
            if task_group is not None and tg != task_group:
                continue
            for node_id, n in on_node.items():
                node = state.node(node_id) if n > 0 else None
                if node is None:
                    continue
                value, found = resolve_node_target(attribute, node)
                if found and value is not None:
                    self.counts[value] += n

    def value_of(self, node: Node) -> str | None:
        value, found = resolve_node_target(self.attribute, node)
        return value if found else None

    def used(self, node: Node) -> tuple[str | None, int]:
        value = self.value_of(node)
        return value, (self.counts.get(value, 0) if value is not None else 0)

    def placed(self, node: Node, task_group: str) -> None:
        self._count(node, task_group, 1)

    def stopped(self, node: Node, task_group: str) -> None:
        self._count(node, task_group, -1)

    def _count(self, node: Node, task_group: str, delta: int) -> None:
        if self.task_group is not None and self.task_group != task_group:
            return
        value = self.value_of(node)
        if value is not None:
            self.counts[value] += delta


class EvalContext:
    def __init__(self, state: StateReader, plan: PlanBuilder, job: Job | None) -> None:
        self.state = state
        self.plan = plan
        self.job = job
        self.eligibility = EvalEligibility()
        self.loads: dict[str, NodeLoad] = {}
        self.usage_lookup = state.node_usage_lookup()
        # Stops that free room bump `free_generation` and record it per node, so stacks can
        # drop their "exhausted" marks for exactly those nodes.
        self.free_generation = 0
        self.freed_at: dict[str, int] = {}
        # The generation at which every node may have freed room (a rebase onto a fresher
        # state): stacks then drop all their marks.
        self.all_freed_at = 0
        # task group -> node id -> proposed allocations of this job's group there.
        self.group_allocs_on_node: dict[str, dict[str, int]] = defaultdict(dict)
        # node id -> proposed allocations of this job there, all groups.
        self.job_allocs_per_node: dict[str, int] = defaultdict(int)
        self.property_sets: list[PropertySet] = []
        if job is not None:
            for alloc in state.allocs_by_job(job.namespace, job.id):
                if not alloc.terminal():
                    self._count(alloc.task_group, alloc.node_id, 1)

    def _count(self, task_group: str, node_id: str, delta: int) -> None:
        on_node = self.group_allocs_on_node[task_group]
        on_node[node_id] = on_node.get(node_id, 0) + delta
        self.job_allocs_per_node[node_id] += delta

    def load(self, node_id: str) -> NodeLoad:
        load = self.loads.get(node_id)
        if load is None:
            usage = self.state.node_usage(node_id)
            load = NodeLoad(usage.cpu, usage.memory_mb, usage.disk_mb, usage.device_ids)
            self.loads[node_id] = load
        return load

    def property_set(self, attribute: str, task_group: str | None) -> PropertySet:
        for pset in self.property_sets:
            if pset.attribute == attribute and pset.task_group == task_group:
                return pset
        pset = PropertySet(self, attribute, task_group)
        self.property_sets.append(pset)
        return pset

    def stop(self, alloc: Allocation, stopped: Allocation) -> None:
        """Record a stop (or eviction) of `alloc`; `stopped` is its new record."""
        self.plan.node_update[alloc.node_id].append(stopped)
        if not alloc.terminal():
            self._release(alloc)

    def _release(self, alloc: Allocation) -> None:
        """Take a live allocation's resources and counts off its node's proposed load (a
        stop, or a placement taken back); stacks forget that the node was full."""
        self.free_generation += 1
        self.freed_at[alloc.node_id] = self.free_generation
        self._track_property_sets(alloc, -1)
        load = self.load(alloc.node_id)
        res = alloc.allocated_resources
        load.cpu -= res.cpu
        load.memory_mb -= res.memory_mb
        load.disk_mb -= res.disk_mb
        for device in res.devices:
            load.free_devices(device.device_ids)
        self._count(alloc.task_group, alloc.node_id, -1)

    def unstop(self, alloc: Allocation, stopped: Allocation) -> None:
        """Undo `stop` when the replacement it made room for could not be placed."""
        updates = self.plan.node_update[alloc.node_id]
        updates.remove(stopped)
        if not updates:
            del self.plan.node_update[alloc.node_id]
        if alloc.terminal():
            return
        load = self.load(alloc.node_id)
        res = alloc.allocated_resources
        load.cpu += res.cpu
        load.memory_mb += res.memory_mb
        load.disk_mb += res.disk_mb
        for device in res.devices:
            load.claim_devices(device.device_ids)
        self._count(alloc.task_group, alloc.node_id, 1)
        self._track_property_sets(alloc, 1)

    def _track_property_sets(self, alloc: Allocation, delta: int) -> None:
        """Stops free, and undone stops retake, property values (distinct_property, spread)."""
        if not self.property_sets:
            return
        node = self.state.node(alloc.node_id)
        if node is None:
            return
        for pset in self.property_sets:
            if delta > 0:
                pset.placed(node, alloc.task_group)
            else:
                pset.stopped(node, alloc.task_group)

    def relabel(self, stopped: Allocation, **changes: object) -> None:
        """Change fields of a stop already in the plan (the record `stop` was given)."""
        updates = self.plan.node_update[stopped.node_id]
        position = next(i for i, a in enumerate(updates) if a.id == stopped.id)
        updates[position] = dataclasses.replace(updates[position], **changes)  # type: ignore[arg-type]

    def link_replacement(self, stopped: Allocation, replacement_id: str) -> None:
        """Point a stopped allocation at the one that replaces it (NextAllocation)."""
        updates = self.plan.node_update[stopped.node_id]
        position = updates.index(stopped)
        updates[position] = dataclasses.replace(stopped, next_allocation=replacement_id)

    def place(self, alloc: Allocation, node: Node | None = None) -> None:
        """Record a new placement (the load was already charged by the stack's fit check)."""
        self.plan.node_allocation[alloc.node_id].append(alloc)
        self._count(alloc.task_group, alloc.node_id, 1)
        if node is not None:
            for pset in self.property_sets:
                pset.placed(node, alloc.task_group)

    def update_in_place(self, alloc: Allocation) -> None:
        self.plan.node_allocation[alloc.node_id].append(alloc)

    def take_back(self, node_id: str) -> list[Allocation]:
        """Remove the placements this plan made on `node_id` (new ones only: the caller
        checked) and release what they charged to its load; returns them."""
        placed = self.plan.node_allocation.pop(node_id, [])
        for alloc in placed:
            self._release(alloc)
        return placed

    def rebase(self, state: StateReader) -> None:
        """Read committed state from `state` (newer than the one this context began on)
        from now on; loads already proposed must have been moved by the caller. Any node
        may have room again there, so stacks forget which ones they found full."""
        self.state = state
        self.usage_lookup = state.node_usage_lookup()
        self.free_generation += 1
        self.all_freed_at = self.free_generation
