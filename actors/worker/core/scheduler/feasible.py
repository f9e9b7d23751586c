"""Which nodes can run a task group at all (Nomad's FeasibilityWrapper and its checkers).

Checks are split into job-level (job constraints) and group-level (drivers, group and task
constraints, devices). Both are cached per computed node class: nodes of one class are
interchangeable for these checks, so the first node of a class decides for all of them,
unless a constraint targets a per-node unique value (the group is then "escaped").
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from actors.worker.core.scheduler.constraints import (
    check_constraint,
    is_escaped,
    resolve_device_target,
    resolve_node_target,
)
from contracts import Constraint, DeviceRequest, Job, Node, TaskGroup
from contracts.resources import NodeDeviceResource

DISTINCT_OPERANDS = frozenset({"distinct_hosts", "distinct_property"})


class Feasibility(Enum):
    ELIGIBLE = 1
    INELIGIBLE = 2


def in_any_datacenter(datacenter: str, patterns: Sequence[str]) -> bool:
    return any(p == datacenter or fnmatch.fnmatchcase(datacenter, p) for p in patterns)


def ready_nodes_in_pool(nodes: Iterable[Node], job: Job) -> tuple[list[Node], dict[str, int]]:
    """Nomad's readyNodesInDCsAndPool: the base node set and how many are ready per DC."""
    pool = job.node_pool
    any_pool = pool in ("", "all")
    out: list[Node] = []
    by_dc: dict[str, int] = {}
    dc_matches: dict[str, bool] = {}
    for node in nodes:
        if not node.ready():
            continue
        if not any_pool and node.node_pool != pool:
            continue
        dc_ok = dc_matches.get(node.datacenter)
        if dc_ok is None:
            dc_ok = dc_matches[node.datacenter] = in_any_datacenter(
                node.datacenter, job.datacenters
            )
        if not dc_ok:
            continue
        out.append(node)
        by_dc[node.datacenter] = by_dc.get(node.datacenter, 0) + 1
    return out, by_dc


@dataclass(slots=True)
class FilterMetrics:
    """Counts of nodes filtered and why, for AllocMetric."""

    nodes_filtered: int = 0
    class_filtered: dict[str, int] = field(default_factory=dict)
    constraint_filtered: dict[str, int] = field(default_factory=dict)

    def copy(self) -> FilterMetrics:
        return FilterMetrics(
            self.nodes_filtered, dict(self.class_filtered), dict(self.constraint_filtered)
        )

    def filtered(self, node: Node, reason: str) -> None:
        self.nodes_filtered += 1
        self.constraint_filtered[reason] = self.constraint_filtered.get(reason, 0) + 1
        if node.node_class:
            self.class_filtered[node.node_class] = self.class_filtered.get(node.node_class, 0) + 1


class EvalEligibility:
    """Per-evaluation cache of class feasibility, job level and per task group (Nomad's
    EvalEligibility). Its classes go into blocked evals so that only capacity in a class the
    eval could use wakes it up."""

    def __init__(self) -> None:
        self.job: dict[str, tuple[Feasibility, str]] = {}
        self.groups: dict[str, dict[str, tuple[Feasibility, str]]] = {}
        self.job_escaped = False
        self.group_escaped: dict[str, bool] = {}

    def has_escaped(self) -> bool:
        return self.job_escaped or any(self.group_escaped.values())

    def class_eligibility(self) -> dict[str, bool]:
        out: dict[str, bool] = {}
        for classes in self.groups.values():
            for cls, (feasibility, _) in classes.items():
                if feasibility is Feasibility.ELIGIBLE:
                    out[cls] = True
                else:
                    out.setdefault(cls, False)
        for cls, (feasibility, _) in self.job.items():
            if feasibility is Feasibility.INELIGIBLE:
                out[cls] = False
            else:
                out.setdefault(cls, True)
        return out


def _static_constraints(constraints: Iterable[Constraint]) -> tuple[Constraint, ...]:
    return tuple(c for c in constraints if c.operand not in DISTINCT_OPERANDS)


def group_constraints(tg: TaskGroup) -> tuple[Constraint, ...]:
    return tuple(tg.constraints) + tuple(c for task in tg.tasks for c in task.constraints)


class GroupFeasibility:
    """Decides node feasibility for one task group of one job, caching by computed class."""

    def __init__(self, job: Job, tg: TaskGroup, eligibility: EvalEligibility) -> None:
        self.job_constraints = _static_constraints(job.constraints)
        self.tg_constraints = _static_constraints(group_constraints(tg))
        self.drivers = frozenset(t.driver for t in tg.tasks if t.driver)
        self.devices = tuple(d for t in tg.tasks for d in t.resources.devices)
        self.tg_name = tg.name
        self.eligibility = eligibility
        self.job_escaped = any(_escapes(c) for c in self.job_constraints)
        self.tg_escaped = any(_escapes(c) for c in self.tg_constraints) or any(
            _escapes(c) for d in self.devices for c in d.constraints
        )
        eligibility.job_escaped = eligibility.job_escaped or self.job_escaped
        eligibility.group_escaped[tg.name] = self.tg_escaped
        self.tg_cache = eligibility.groups.setdefault(tg.name, {})

    def feasible_nodes(self, nodes: Sequence[Node], metrics: FilterMetrics) -> list[Node]:
        """Filter a node list; when nothing is escaped one verdict per class serves all its
        nodes, so this costs a dict lookup per node after the first of each class."""
        if self.job_escaped or self.tg_escaped:
            return [n for n in nodes if self.check(n, metrics)]
        verdicts: dict[str, str | None] = {}
        out = []
        for node in nodes:
            cls = node.computed_class
            if cls in verdicts:
                reason = verdicts[cls]
            else:
                reason = self._job_verdict(node, cls) or self._group_verdict(node, cls)
                if cls:
                    verdicts[cls] = reason
            if reason is None:
                out.append(node)
            else:
                metrics.filtered(node, reason)
        return out

    def check(self, node: Node, metrics: FilterMetrics) -> bool:
        cls = node.computed_class
        verdict = self._job_verdict(node, cls)
        if verdict is not None:
            metrics.filtered(node, verdict)
            return False
        verdict = self._group_verdict(node, cls)
        if verdict is not None:
            metrics.filtered(node, verdict)
            return False
        return True

    def _job_verdict(self, node: Node, cls: str) -> str | None:
        if not self.job_constraints:
            return None
        if not self.job_escaped and cls:
            cached = self.eligibility.job.get(cls)
            if cached is not None:
                return cached[1] if cached[0] is Feasibility.INELIGIBLE else None
        reason = _first_failing(self.job_constraints, node)
        if not self.job_escaped and cls:
            self.eligibility.job[cls] = (
                (Feasibility.INELIGIBLE, reason) if reason else (Feasibility.ELIGIBLE, "")
            )
        return reason

    def _group_verdict(self, node: Node, cls: str) -> str | None:
        if not self.tg_escaped and cls:
            cached = self.tg_cache.get(cls)
            if cached is not None:
                return cached[1] if cached[0] is Feasibility.INELIGIBLE else None
        reason = self._group_reason(node)
        if not self.tg_escaped and cls:
            self.tg_cache[cls] = (
                (Feasibility.INELIGIBLE, reason) if reason else (Feasibility.ELIGIBLE, "")
            )
        return reason

    def _group_reason(self, node: Node) -> str | None:
        for driver in self.drivers:
            if not _has_driver(node, driver):
                return "missing drivers"
        reason = _first_failing(self.tg_constraints, node)
        if reason:
            return reason
        if self.devices and not devices_feasible(node, self.devices):
            return "missing devices"
        return None


def _escapes(constraint: Constraint) -> bool:
    return is_escaped(constraint.l_target) or is_escaped(constraint.r_target)


def _has_driver(node: Node, driver: str) -> bool:
    info = node.drivers.get(driver)
    if info is not None:
        return info.detected and info.healthy
    return node.attributes.get(f"driver.{driver}", "").lower() in ("1", "true")


def _first_failing(constraints: Sequence[Constraint], node: Node) -> str | None:
    for c in constraints:
        lval, lfound = resolve_node_target(c.l_target, node)
        rval, rfound = resolve_node_target(c.r_target, node)
        if not check_constraint(c.operand, lval, rval, lfound, rfound):
            return str(c)  # Nomad's key: the bare `${attr.kernel.name} = linux`
    return None


def device_matches(device: NodeDeviceResource, request: DeviceRequest) -> bool:
    if not device.matches(request.name):
        return False
    for c in request.constraints:
        lval, lfound = resolve_device_target(c.l_target, device)
        rval, rfound = resolve_device_target(c.r_target, device)
        if not check_constraint(c.operand, lval, rval, lfound, rfound):
            return False
    return True


def devices_feasible(node: Node, requests: Sequence[DeviceRequest]) -> bool:
    """Enough healthy matching instances for every request, each group used at most once per
    request set (Nomad's DeviceChecker)."""
    available = {d.id: len(d.healthy_ids()) for d in node.node_resources.devices}
    for request in requests:
        for device in node.node_resources.devices:
            if available[device.id] >= request.count and device_matches(device, request):
                available[device.id] -= request.count
                break
        else:
            return False
    return True
