"""The `periodic` and `parameterized` blocks: built from a normalized job dict, and checked
as Nomad's PeriodicConfig.Validate and ParameterizedJobConfig.Validate do."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contracts.cron import CronSpecError, check_spec, zone
from contracts.job import Job, JobType
from contracts.launch import DispatchPayload, ParameterizedConfig, PeriodicConfig

_LAUNCHER_TYPES = (JobType.BATCH, JobType.SYSBATCH)


def build_periodic(n: Mapping[str, Any] | None) -> PeriodicConfig | None:
    if n is None:
        return None
    crons = tuple(n.get("crons", ()))
    if n.get("cron"):
        crons = (n["cron"], *crons)
    return PeriodicConfig(
        crons=crons,
        prohibit_overlap=bool(n.get("prohibit_overlap", False)),
        time_zone=n.get("time_zone") or "UTC",
        enabled=bool(n.get("enabled", True)),
    )


def build_parameterized(n: Mapping[str, Any] | None) -> ParameterizedConfig | None:
    if n is None:
        return None
    return ParameterizedConfig(
        payload=DispatchPayload(n.get("payload") or DispatchPayload.OPTIONAL.value),
        meta_required=tuple(n.get("meta_required", ())),
        meta_optional=tuple(n.get("meta_optional", ())),
    )


def launch_problems(job: Job, where: str) -> list[str]:
    out: list[str] = []
    if job.periodic is not None:
        if job.type not in _LAUNCHER_TYPES:
            out.append(f'{where}: periodic can only be used with "batch" or "sysbatch" jobs')
        if not job.periodic.crons:
            out.append(f"{where} > periodic: a cron spec is required (cron or crons)")
        for spec in job.periodic.crons:
            try:
                check_spec(spec)
            except CronSpecError as exc:
                out.append(f"{where} > periodic: {exc}")
        try:
            zone(job.periodic.time_zone)
        except CronSpecError as exc:
            out.append(f"{where} > periodic: {exc}")
    if job.parameterized is not None:
        if job.type not in _LAUNCHER_TYPES:
            out.append(f'{where}: parameterized can only be used with "batch" or "sysbatch" jobs')
        shared = sorted(set(job.parameterized.meta_required) & set(job.parameterized.meta_optional))
        if shared:
            out.append(
                f"{where} > parameterized: meta keys {shared} are both required and optional"
            )
    return out
