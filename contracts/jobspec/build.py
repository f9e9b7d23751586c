"""Normalized job dicts (only the fields the user set) -> `contracts.Job` records.

Defaults that depend on what was *set* are applied here, where that is still known, the way
Nomad's api Canonicalize does: count falls back to scaling.min, a group's `update` and
`reschedule` are the job's merged with the group's own fields, a partial reschedule block
is completed from the job type's default policy, a group's `migrate` is the job's merged with
the group's own fields (the rest Nomad's defaults; canonical.py gives a service group without
one the default), and a group without an ephemeral disk size gets Nomad's 300 MB.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from contracts.constraints import Affinity, Constraint, Spread, SpreadTarget
from contracts.job import (
    DEFAULT_BATCH_RESCHEDULE,
    DEFAULT_EPHEMERAL_DISK_MB,
    DEFAULT_SERVICE_RESCHEDULE,
    Job,
    JobType,
    MigrateStrategy,
    ReschedulePolicy,
    Task,
    TaskGroup,
    UpdateStrategy,
)
from contracts.jobspec.launch_blocks import build_parameterized, build_periodic
from contracts.jobspec.schema import SHORTHAND_LTARGET, SHORTHAND_RTARGET_AFFINITY
from contracts.launch import DispatchPayloadConfig
from contracts.resources import DeviceRequest, Resources
from contracts.scaling import ScalingPolicy

Norm = Mapping[str, Any]

# Nomad's NewDefaultReschedulePolicy for types other than service and batch: never reschedule.
NO_RESCHEDULE = ReschedulePolicy(attempts=0, interval_s=0.0, delay_s=0.0, unlimited=False)

_UPDATE_FIELDS = {
    "max_parallel": "max_parallel",
    "stagger": "stagger_s",
    "min_healthy_time": "min_healthy_time_s",
    "healthy_deadline": "healthy_deadline_s",
    "auto_revert": "auto_revert",
    "canary": "canary",
    "auto_promote": "auto_promote",
    "progress_deadline": "progress_deadline_s",
    "health_check": "health_check",
}
_MIGRATE_FIELDS = {
    "max_parallel": "max_parallel",
    "health_check": "health_check",
    "min_healthy_time": "min_healthy_time_s",
    "healthy_deadline": "healthy_deadline_s",
}
_RESCHEDULE_FIELDS = {
    "attempts": "attempts",
    "interval": "interval_s",
    "delay": "delay_s",
    "unlimited": "unlimited",
}
_RESOURCE_FIELDS = {"cpu": "cpu", "memory": "memory_mb", "disk": "disk_mb"}


def default_reschedule(job_type: JobType) -> ReschedulePolicy | None:
    """Nomad gives system jobs no reschedule policy at all."""
    if job_type == JobType.SERVICE:
        return DEFAULT_SERVICE_RESCHEDULE
    if job_type == JobType.BATCH:
        return DEFAULT_BATCH_RESCHEDULE
    if job_type == JobType.SYSTEM:
        return None
    return NO_RESCHEDULE


def _pick(n: Norm, names: Mapping[str, str]) -> dict[str, Any]:
    return {attr: n[key] for key, attr in names.items() if key in n}


def build_job(n: Norm) -> Job:
    job_type = JobType(n.get("type", JobType.SERVICE.value))
    job_update: Norm | None = n.get("update")
    job_reschedule: Norm | None = n.get("reschedule")
    job_migrate: Norm | None = n.get("migrate")
    groups = tuple(
        build_group(g, job_type, job_update, job_reschedule, job_migrate)
        for g in n.get("group", ())
    )
    fields: dict[str, Any] = {
        k: n[k]
        for k in ("name", "namespace", "priority", "all_at_once", "node_pool", "stop")
        if k in n
    }
    return Job(
        id=n.get("id", ""),
        type=job_type,
        datacenters=tuple(n.get("datacenters", ())),
        constraints=_constraints(n.get("constraint", ())),
        affinities=_affinities(n.get("affinity", ())),
        spreads=_spreads(n.get("spread", ())),
        task_groups=groups,
        update=None if job_update is None else UpdateStrategy(**_pick(job_update, _UPDATE_FIELDS)),
        meta=dict(n.get("meta", {})),
        periodic=build_periodic(n.get("periodic")),
        parameterized=build_parameterized(n.get("parameterized")),
        **fields,
    )


def build_group(
    n: Norm,
    job_type: JobType,
    job_update: Norm | None,
    job_reschedule: Norm | None,
    job_migrate: Norm | None = None,
) -> TaskGroup:
    scaling = _scaling(n["scaling"]) if "scaling" in n else None
    count = n.get("count")
    if count is None:
        count = scaling.min if scaling is not None and scaling.min is not None else 1
    update = {**(job_update or {}), **n.get("update", {})}
    has_update = "update" in n or bool(job_update)  # an empty job update is not inherited
    reschedule = {**(job_reschedule or {}), **n.get("reschedule", {})}
    has_reschedule = job_reschedule is not None or "reschedule" in n
    migrate = {**(job_migrate or {}), **n.get("migrate", {})}
    has_migrate = job_migrate is not None or "migrate" in n
    base = default_reschedule(job_type) or NO_RESCHEDULE
    return TaskGroup(
        name=n.get("name", ""),
        count=count,
        constraints=_constraints(n.get("constraint", ())),
        affinities=_affinities(n.get("affinity", ())),
        spreads=_spreads(n.get("spread", ())),
        scaling=scaling,
        tasks=tuple(_task(t) for t in n.get("task", ())),
        meta=dict(n.get("meta", {})),
        update=UpdateStrategy(**_pick(update, _UPDATE_FIELDS)) if has_update else None,
        migrate=MigrateStrategy(**_pick(migrate, _MIGRATE_FIELDS)) if has_migrate else None,
        reschedule_policy=(
            replace(base, **_pick(reschedule, _RESCHEDULE_FIELDS))
            if has_reschedule
            else default_reschedule(job_type)
        ),
        ephemeral_disk_mb=n.get("ephemeral_disk", {}).get("size", DEFAULT_EPHEMERAL_DISK_MB),
    )


def _scaling(n: Norm) -> ScalingPolicy:
    fields = {k: n[k] for k in ("min", "max", "enabled", "type", "policy") if k in n}
    return ScalingPolicy(**fields)


def _task(n: Norm) -> Task:
    fields = {k: n[k] for k in ("driver", "user") if k in n}
    if "kill_timeout" in n:
        fields["kill_timeout_s"] = n["kill_timeout"]
    if "dispatch_payload" in n:
        fields["dispatch_payload"] = DispatchPayloadConfig(n["dispatch_payload"].get("file", ""))
    return Task(
        name=n.get("name", ""),
        config=dict(n.get("config", {})),
        env=dict(n.get("env", {})),
        meta=dict(n.get("meta", {})),
        resources=_resources(n.get("resources", {})),
        constraints=_constraints(n.get("constraint", ())),
        affinities=_affinities(n.get("affinity", ())),
        **fields,
    )


def _resources(n: Norm) -> Resources:
    devices = tuple(
        DeviceRequest(
            name=d.get("name", ""),
            count=d.get("count", 1),
            constraints=_constraints(d.get("constraint", ())),
            affinities=_affinities(d.get("affinity", ())),
        )
        for d in n.get("device", ())
    )
    return Resources(devices=devices, **_pick(n, _RESOURCE_FIELDS))


def _targets(n: Norm, rtarget_shorthands: Iterable[str]) -> tuple[str, str, str]:
    """attribute/value/operator plus jobspec2's shorthands (`regexp = "..."`, ...)."""
    ltarget, rtarget, operand = n.get("attribute", ""), n.get("value", ""), n.get("operator", "")
    for key in rtarget_shorthands:
        if n.get(key):
            operand, rtarget = key, n[key]
    if n.get("distinct_hosts"):
        operand = "distinct_hosts"
    for key in SHORTHAND_LTARGET:
        if n.get(key):
            operand, ltarget = key, n[key]
    return ltarget, rtarget, operand or "="


def _constraints(items: Iterable[Norm]) -> tuple[Constraint, ...]:
    # jobspec2 has no set_contains_any shorthand for constraints; accept it as affinities do.
    return tuple(Constraint(*_targets(n, SHORTHAND_RTARGET_AFFINITY)) for n in items)


def _affinities(items: Iterable[Norm]) -> tuple[Affinity, ...]:
    out = []
    for n in items:
        ltarget, rtarget, operand = _targets(n, SHORTHAND_RTARGET_AFFINITY)
        out.append(Affinity(ltarget, rtarget, operand, n.get("weight", 50)))
    return tuple(out)


def _spreads(items: Iterable[Norm]) -> tuple[Spread, ...]:
    return tuple(
        Spread(
            attribute=n.get("attribute", ""),
            weight=n.get("weight", 50),
            spread_target=tuple(
                SpreadTarget(value=t.get("value", ""), percent=t.get("percent", 0))
                for t in n.get("target", ())
            ),
        )
        for n in items
    )
