"""Records rendered the way Nomad's HTTP API renders them.

Our codec's wire form is PascalCase already; what differs from Nomad's JSON is handled here:
durations (ours: float seconds in `...S` fields; Nomad: integer nanoseconds), the ephemeral
disk block, the `Drain` flag of nodes, the nested resource blocks of nodes and allocations,
and the list stubs. `job_to_nomad` output parses back with `contracts.jobspec.parse_json`, so
`job inspect` output can be edited and run again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from actors.api.core.deployment_shapes import deployment_status
from actors.api.core.task_states import task_resources, task_states
from contracts import Allocation, ClientStatus, Evaluation, Job, Node, to_wire
from contracts.deployment import Deployment
from contracts.node_commands import TaskEvent
from contracts.resources import AllocatedResources, NodeResources

NS_PER_S = 1_000_000_000
_DURATIONS = {
    "KillTimeoutS": "KillTimeout",
    "StaggerS": "Stagger",
    "MinHealthyTimeS": "MinHealthyTime",
    "HealthyDeadlineS": "HealthyDeadline",
    "ProgressDeadlineS": "ProgressDeadline",
    "IntervalS": "Interval",
    "DelayS": "Delay",
}


def _nomad_keys(value: Any) -> Any:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key in _DURATIONS and isinstance(item, int | float):
                out[_DURATIONS[key]] = round(item * NS_PER_S)
            elif key == "EphemeralDiskMB":
                out["EphemeralDisk"] = {"SizeMB": item}
            elif key == "Share" and item is None:
                continue  # a run's ranges (submitted as a task file): other groups have none
            elif key == "Periodic" and isinstance(item, dict):
                out[key] = periodic_to_nomad(item)
            elif key == "Parameterized":
                out["ParameterizedJob"] = item
            else:
                out[key] = _nomad_keys(item)
        return out
    if isinstance(value, list):
        return [_nomad_keys(v) for v in value]
    return value


def periodic_to_nomad(wire: dict[str, Any]) -> dict[str, Any]:
    """Nomad's PeriodicConfig: one spec in `Spec`, several in `Specs` (its `crons`)."""
    crons = list(wire["Crons"])
    return {
        "Enabled": wire["Enabled"],
        "Spec": crons[0] if len(crons) == 1 else "",
        "Specs": crons if len(crons) > 1 else None,
        "SpecType": "cron",
        "ProhibitOverlap": wire["ProhibitOverlap"],
        "TimeZone": wire["TimeZone"],
    }


def job_to_nomad(job: Job) -> dict[str, Any]:
    wire: dict[str, Any] = _nomad_keys(to_wire(job))
    return wire


def job_stub(job: Job, summary: dict[str, Any]) -> dict[str, Any]:
    """Nomad's JobListStub."""
    return {
        "ID": job.id,
        "ParentID": job.parent_id,
        "Name": job.name or job.id,
        "Namespace": job.namespace,
        "Datacenters": list(job.datacenters),
        "NodePool": job.node_pool,
        "Type": str(job.type),
        "Priority": job.priority,
        "Periodic": job.is_periodic,
        "ParameterizedJob": job.is_parameterized,
        "Stop": job.stop,
        "Status": str(job.status),
        "StatusDescription": job.status_description,
        "JobSummary": summary,
        "Version": job.version,
        "Stable": job.stable,
        "CreateIndex": job.create_index,
        "ModifyIndex": job.modify_index,
        "JobModifyIndex": job.job_modify_index,
        "SubmitTime": job.submit_time,
    }


def empty_children() -> dict[str, int]:
    return {"Pending": 0, "Running": 0, "Dead": 0}


def children_summary(parents: Iterable[Job], jobs: Iterable[Job]) -> dict[str, dict[str, int]]:
    """Nomad's JobChildrenSummary for each of `parents` that launches jobs (periodic or
    parameterized): its children among `jobs` counted by status, keyed by namespace/ID. One
    pass over `jobs`, and none when no parent launches any."""
    wanted = {(p.namespace, p.id) for p in parents if p.is_periodic or p.is_parameterized}
    counts: dict[str, dict[str, int]] = {}
    if not wanted:
        return counts
    for job in jobs:
        if job.parent_id and (job.namespace, job.parent_id) in wanted:
            bucket = counts.setdefault(f"{job.namespace}/{job.parent_id}", empty_children())
            bucket[str(job.status).capitalize()] += 1
    return counts


_SUMMARY_FIELDS = {
    ClientStatus.PENDING: "Starting",
    ClientStatus.RUNNING: "Running",
    ClientStatus.COMPLETE: "Complete",
    ClientStatus.FAILED: "Failed",
    ClientStatus.LOST: "Lost",
    ClientStatus.UNKNOWN: "Unknown",
}


def job_summary(
    job: Job,
    allocs: Iterable[Allocation],
    evals: Iterable[Evaluation],
    children: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Nomad's JobSummary: allocations per group and client status; `Queued` is what the
    latest blocked evaluation still waits to place; `Children` a periodic or parameterized
    job's launched jobs by status (children_summary)."""
    groups: dict[str, Counter[str]] = {tg.name: Counter() for tg in job.task_groups}
    for alloc in allocs:
        status = _SUMMARY_FIELDS.get(alloc.client_status)
        if status is not None:
            groups.setdefault(alloc.task_group, Counter())[status] += 1
    latest: Evaluation | None = None
    for ev in evals:
        if latest is None or ev.modify_index > latest.modify_index:
            latest = ev
    queued = dict(latest.queued_allocations) if latest is not None else {}
    summary = {
        name: {
            "Queued": queued.get(name, 0),
            **{field: counts.get(field, 0) for field in _SUMMARY_FIELDS.values()},
        }
        for name, counts in groups.items()
    }
    return {
        "JobID": job.id,
        "Namespace": job.namespace,
        "Summary": summary,
        "Children": children or empty_children(),
        "CreateIndex": job.create_index,
        "ModifyIndex": job.modify_index,
    }


def allocated_resources(
    resources: AllocatedResources, tasks: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Nomad's nested AllocatedResources: per task in `Tasks` (task_states.task_resources),
    the group's disk in `Shared`, and drover's `Flattened` sum over the tasks."""
    devices = [
        {"Vendor": d.vendor, "Type": d.type, "Name": d.name, "DeviceIDs": list(d.device_ids)}
        for d in resources.devices
    ]
    return {
        "Tasks": tasks or {},
        "Shared": {"DiskMB": resources.disk_mb},
        "Flattened": {
            "Cpu": {"CpuShares": resources.cpu},
            "Memory": {"MemoryMB": resources.memory_mb},
            "Devices": devices,
        },
    }


def alloc_stub(
    alloc: Allocation,
    *,
    resources: bool = False,
    job: Job | None = None,
    deployment: Deployment | None = None,
) -> dict[str, Any]:
    """Nomad's AllocListStub; `job` (the version it runs) gives its TaskStates, and
    `deployment` (the one it joined) its DeploymentStatus."""
    stub: dict[str, Any] = {
        "ID": alloc.id,
        "EvalID": alloc.eval_id,
        "Name": alloc.name,
        "Namespace": alloc.namespace,
        "NodeID": alloc.node_id,
        "NodeName": alloc.node_name,
        "JobID": alloc.job_id,
        "JobVersion": alloc.job_version,
        "TaskGroup": alloc.task_group,
        "DesiredStatus": str(alloc.desired_status),
        "DesiredDescription": alloc.desired_description,
        "DesiredTransition": {"Migrate": alloc.desired_transition.migrate or None},
        "ClientStatus": str(alloc.client_status),
        "ClientDescription": alloc.client_description,
        "PreviousAllocation": alloc.previous_allocation,
        "NextAllocation": alloc.next_allocation,
        "CreateIndex": alloc.create_index,
        "ModifyIndex": alloc.modify_index,
        "CreateTime": alloc.create_time,
        "ModifyTime": alloc.modify_time,
        "TaskStates": task_states(alloc, job),
        "DeploymentStatus": deployment_status(alloc, deployment),
        "PreemptedAllocations": list(alloc.preempted_allocations),
        "PreemptedByAllocation": alloc.preempted_by_allocation,
    }
    if resources:
        tasks = task_resources(alloc, job)
        stub["AllocatedResources"] = allocated_resources(alloc.allocated_resources, tasks)
    return stub


def alloc_full(
    alloc: Allocation,
    job: Job | None,
    deployment: Deployment | None = None,
    events: Sequence[TaskEvent] = (),
) -> dict[str, Any]:
    """Nomad's Allocation; `events`: the task events its agent recorded (task_states.py)."""
    full: dict[str, Any] = to_wire(alloc)
    full["DeploymentStatus"] = deployment_status(alloc, deployment)
    tasks = task_resources(alloc, job)
    full["AllocatedResources"] = allocated_resources(alloc.allocated_resources, tasks)
    full["TaskStates"] = task_states(alloc, job, events)
    full["Job"] = job_to_nomad(job) if job is not None else None
    return full


def evaluation(ev: Evaluation) -> dict[str, Any]:
    wire: dict[str, Any] = to_wire(ev)
    return wire


def node_resources(resources: NodeResources) -> dict[str, Any]:
    return {
        "Cpu": {"CpuShares": resources.cpu},
        "Memory": {"MemoryMB": resources.memory_mb},
        "Disk": {"DiskMB": resources.disk_mb},
        "Devices": [
            {
                "Vendor": d.vendor,
                "Type": d.type,
                "Name": d.name,
                "Attributes": dict(d.attributes),
                "Instances": [{"ID": i.id, "Healthy": i.healthy} for i in d.instances],
            }
            for d in resources.devices
        ],
    }


def _drivers(node: Node) -> dict[str, Any]:
    return {
        name: {"Detected": d.detected, "Healthy": d.healthy} for name, d in node.drivers.items()
    }


def node_stub(node: Node, *, resources: bool = False, os: bool = False) -> dict[str, Any]:
    """Nomad's NodeListStub."""
    stub: dict[str, Any] = {
        "ID": node.id,
        "Name": node.name,
        "Address": node.attributes.get("unique.network.ip-address", ""),
        "Datacenter": node.datacenter,
        "NodeClass": node.node_class,
        "NodePool": node.node_pool,
        "Version": "drover",
        "Drain": node.drain,
        "SchedulingEligibility": str(node.scheduling_eligibility),
        "Status": str(node.status),
        "StatusDescription": node.status_description,
        "Drivers": _drivers(node),
        "CreateIndex": node.create_index,
        "ModifyIndex": node.modify_index,
    }
    if resources:
        stub["NodeResources"] = node_resources(node.node_resources)
        stub["ReservedResources"] = to_wire(node.reserved_resources)
    if os:
        stub["Attributes"] = {"os.name": node.attributes.get("os.name", "")}
    return stub


def node_full(node: Node) -> dict[str, Any]:
    full: dict[str, Any] = to_wire(node)
    full["Drain"] = node.drain
    full["Drivers"] = _drivers(node)
    full["NodeResources"] = node_resources(node.node_resources)
    full["DrainStrategy"] = (
        {
            "DrainSpec": {
                "Deadline": int(node.drain_strategy.deadline_s * NS_PER_S),
                "IgnoreSystemJobs": node.drain_strategy.ignore_system_jobs,
            },
            "StartedAt": node.drain_strategy.started_at,
        }
        if node.drain_strategy is not None
        else None
    )
    return full
