"""Semantic checks on a (canonicalized) Job, after Nomad's Job/TaskGroup/Task Validate.

Every problem is collected, each naming its place as a block chain
(`job "web" > group "api" > task "srv": ...`) and the offending value, and one
ValidationError carries them all.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from contracts.constraints import AFFINITY_OPERATORS, CONSTRAINT_OPERATORS, Affinity, Constraint
from contracts.constraints import Spread as SpreadRule
from contracts.errors import ValidationError
from contracts.job import (
    MAX_PRIORITY,
    MIGRATE_HEALTH_CHECKS,
    MIN_PRIORITY,
    Job,
    JobType,
    Task,
    TaskGroup,
)
from contracts.job import MigrateStrategy as Migrate
from contracts.job import ReschedulePolicy as Reschedule
from contracts.job import UpdateStrategy as Update
from contracts.jobspec.launch_blocks import launch_problems
from contracts.jobspec.limits import DEFAULT_LIMITS, JobLimits, limit_problems
from contracts.launch import dispatch_file_escapes

MIN_CPU = 1
MIN_MEMORY_MB = 10  # Nomad's Resources.MinResources floor
_SYSTEM_TYPES = (JobType.SYSTEM, JobType.SYSBATCH)
_NO_RTARGET = frozenset({"is_set", "is_not_set"})
_NO_LTARGET = frozenset({"distinct_hosts"})
_NEEDS_RTARGET = frozenset(
    {"=", "==", "is", "!=", "not", "<", "<=", ">", ">=", "regexp", "version", "semver"}
    | {"set_contains", "set_contains_all", "set_contains_any"}
)


def validate(job: Job, limits: JobLimits = DEFAULT_LIMITS) -> None:
    """Raise one ValidationError listing every problem; return None when the job is sound
    and within the server's `limits`."""
    problems = limit_problems(job, limits) + job_problems(job)
    if problems:
        raise ValidationError(problems)


def job_problems(job: Job) -> list[str]:
    where = f'job "{job.id}"'
    out: list[str] = []
    _job_fields(job, where, out)
    out += launch_problems(job, where)
    _placement(job, job.constraints, job.affinities, job.spreads, where, out)
    if job.update is not None:
        _update(job.update, where, out)
    if not job.task_groups:
        out.append(f"{where}: has no task groups")
    for name, n in Counter(tg.name for tg in job.task_groups).items():
        if n > 1:
            out.append(f'{where}: group "{name}" is defined {n} times')
    for tg in job.task_groups:
        _group(job, tg, f'{where} > group "{tg.name}"', out)
    return out


def _job_fields(job: Job, where: str, out: list[str]) -> None:
    if not job.id:
        out.append(f"{where}: ID is required")
    elif " " in job.id:
        out.append(f"{where}: ID must not contain spaces")
    if "\x00" in job.id or "\x00" in job.name:
        out.append(f"{where}: ID and name must not contain a null character")
    if job.type not in tuple(JobType):
        choices = ", ".join(t.value for t in JobType)
        out.append(f'{where}: type "{job.type}" is not one of {choices}')
    if not MIN_PRIORITY <= job.priority <= MAX_PRIORITY:
        out.append(
            f"{where}: priority {job.priority} is out of range {MIN_PRIORITY}..{MAX_PRIORITY}"
        )
    if not job.namespace:
        out.append(f"{where}: namespace is required")
    if not job.datacenters:
        out.append(f"{where}: datacenters must name at least one datacenter")
    if any(not dc for dc in job.datacenters):
        out.append(f"{where}: datacenters must not contain an empty name")


def _group(job: Job, tg: TaskGroup, where: str, out: list[str]) -> None:
    if not tg.name:
        out.append(f"{where}: name is required")
    if tg.count < 0:
        out.append(f"{where}: count {tg.count} must not be negative")

    if tg.ephemeral_disk_mb < 0:
        out.append(f"{where}: ephemeral_disk.size {tg.ephemeral_disk_mb} must not be negative")
    _scaling(job, tg, where, out)
    _placement(job, tg.constraints, tg.affinities, tg.spreads, where, out)
    if tg.update is not None:
        _update(tg.update, where, out)
    if tg.migrate is not None:
        _migrate(job, tg.migrate, where, out)
    if tg.reschedule_policy is not None:
        _reschedule(tg.reschedule_policy, where, out)
    if not tg.tasks:
        out.append(f"{where}: has no tasks")
    for name, n in Counter(t.name for t in tg.tasks).items():
        if n > 1:
            out.append(f'{where}: task "{name}" is defined {n} times')
    for task in tg.tasks:
        _task(job, task, f'{where} > task "{task.name}"', out)


def _scaling(job: Job, tg: TaskGroup, where: str, out: list[str]) -> None:
    policy = tg.scaling
    if policy is None:
        return
    if job.type == JobType.SYSTEM:
        out.append(f"{where}: system jobs may not have a scaling block")
    if policy.type != "horizontal":
        out.append(f'{where}: scaling type "{policy.type}" must be "horizontal" for a group')
    low = tg.count if policy.min is None else policy.min
    if policy.max < 0:
        out.append(f"{where}: scaling max {policy.max} must not be negative")
    if low < 0:
        out.append(f"{where}: scaling min {low} must not be negative")
    if low > policy.max:
        out.append(f"{where}: scaling min {low} is above max {policy.max}")
    if tg.count > policy.max:
        out.append(f"{where}: count {tg.count} is above scaling max {policy.max}")
    if tg.count < low:
        out.append(f"{where}: count {tg.count} is below scaling min {low}")
    if policy.policy:
        # Imported here: contracts.autoscaling reads durations with contracts.jobspec's
        # helpers, so importing it with this module would be circular.
        from contracts.autoscaling import parse_group_policy

        try:
            parse_group_policy(
                policy.policy,
                min=low,
                max=policy.max,
                where=where,
                enabled=policy.enabled,
                job=job.id,
                group=tg.name,
                namespace=job.namespace,
            )
        except ValidationError as exc:
            out.extend(exc.problems)


def _task(job: Job, task: Task, where: str, out: list[str]) -> None:
    if not task.name:
        out.append(f"{where}: name is required")
    if not task.driver:
        out.append(f"{where}: driver is required")
    if task.kill_timeout_s < 0:
        out.append(f"{where}: kill_timeout {task.kill_timeout_s}s must not be negative")
    payload = task.dispatch_payload
    if payload is not None and dispatch_file_escapes(payload.file):
        out.append(
            f'{where}: dispatch_payload file "{payload.file}" escapes the allocation directory'
        )
    res = task.resources
    if res.cpu < MIN_CPU:
        out.append(f"{where}: resources.cpu {res.cpu} must be at least {MIN_CPU} MHz")
    if res.memory_mb < MIN_MEMORY_MB:
        out.append(f"{where}: resources.memory {res.memory_mb} must be at least {MIN_MEMORY_MB} MB")
    if res.disk_mb < 0:
        out.append(f"{where}: resources.disk {res.disk_mb} must not be negative")
    for dev in res.devices:
        here = f'{where}: resources.device "{dev.name}"'
        if not dev.name:
            out.append(f"{here}: name is required")
        if dev.count < 1:
            out.append(f"{here}: count {dev.count} must be at least 1")
        _constraints(dev.constraints, f'{where} > device "{dev.name}"', out)
        _affinities(dev.affinities, f'{where} > device "{dev.name}"', out)
    _placement(job, task.constraints, task.affinities, (), where, out)


def _placement(
    job: Job,
    constraints: Iterable[Constraint],
    affinities: tuple[Affinity, ...],
    spreads: tuple[SpreadRule, ...],
    where: str,
    out: list[str],
) -> None:
    _constraints(constraints, where, out)
    _affinities(affinities, where, out)
    _spreads(spreads, where, out)
    if job.type in _SYSTEM_TYPES:
        if affinities:
            out.append(f"{where}: {job.type} jobs may not have an affinity block")
        if spreads:
            out.append(f"{where}: {job.type} jobs may not have a spread block")


def _targets(op: str, ltarget: str, rtarget: str, here: str, out: list[str]) -> None:
    if op not in _NO_LTARGET and not ltarget:
        out.append(f'{here}: operator "{op}" needs an attribute')
    if op in _NEEDS_RTARGET and not rtarget:
        out.append(f'{here}: operator "{op}" needs a value')
    if op in _NO_RTARGET and rtarget:
        out.append(f'{here}: operator "{op}" takes no value, got "{rtarget}"')
    if op == "regexp" and rtarget:
        try:
            re.compile(rtarget)
        except re.error as exc:
            out.append(f'{here}: regexp "{rtarget}" does not compile: {exc}')


def _constraints(items: Iterable[Constraint], where: str, out: list[str]) -> None:
    for i, c in enumerate(items):
        here = f"{where}: constraint[{i}]"
        if c.operand not in CONSTRAINT_OPERATORS:
            out.append(f'{here}: unknown operator "{c.operand}"')
            continue
        _targets(c.operand, c.l_target, c.r_target, here, out)
        limit = c.r_target
        if c.operand == "distinct_property" and limit and (not limit.isdigit() or int(limit) < 1):
            out.append(f'{here}: distinct_property limit "{limit}" must be 1 or more')


def _affinities(items: Iterable[Affinity], where: str, out: list[str]) -> None:
    for i, a in enumerate(items):
        here = f"{where}: affinity[{i}]"
        if a.operand not in AFFINITY_OPERATORS:
            out.append(f'{here}: unknown operator "{a.operand}"')
        else:
            _targets(a.operand, a.l_target, a.r_target, here, out)
        if a.weight == 0:
            out.append(f"{here}: weight must not be zero")
        elif not -100 <= a.weight <= 100:
            out.append(f"{here}: weight {a.weight} is out of range -100..100")


def _spreads(items: Iterable[SpreadRule], where: str, out: list[str]) -> None:
    for i, s in enumerate(items):
        here = f"{where}: spread[{i}]"
        if not s.attribute:
            out.append(f"{here}: attribute is required")
        if not 0 < s.weight <= 100:
            out.append(f"{here}: weight {s.weight} is out of range 1..100")
        total = 0
        for value, n in Counter(t.value for t in s.spread_target).items():
            if n > 1:
                out.append(f'{here}: target "{value}" is defined {n} times')
        for t in s.spread_target:
            if not 0 <= t.percent <= 100:
                out.append(f'{here}: target "{t.value}" percent {t.percent} is out of 0..100')
            total += t.percent
        if total > 100:
            out.append(f"{here}: target percentages add up to {total}, more than 100")


def _update(u: Update, where: str, out: list[str]) -> None:
    for name, value in (("max_parallel", u.max_parallel), ("canary", u.canary)):
        if value < 0:
            out.append(f"{where}: update.{name} {value} must not be negative")
    durations = (
        ("stagger", u.stagger_s),
        ("min_healthy_time", u.min_healthy_time_s),
        ("healthy_deadline", u.healthy_deadline_s),
    )
    for name, seconds in durations:
        if seconds < 0:
            out.append(f"{where}: update.{name} {seconds}s must not be negative")
    if u.max_parallel > 0 and u.min_healthy_time_s >= u.healthy_deadline_s:
        out.append(
            f"{where}: update.min_healthy_time {u.min_healthy_time_s}s must be less than "
            f"healthy_deadline {u.healthy_deadline_s}s"
        )


def _migrate(job: Job, m: Migrate, where: str, out: list[str]) -> None:
    """Nomad's TaskGroup.Validate (only service jobs may have one) and MigrateStrategy's."""
    if job.type != JobType.SERVICE:
        if job.type in tuple(JobType):  # an unknown type is reported once, for the job
            out.append(f'{where}: job type "{job.type}" does not allow a migrate block')
        return
    if m.max_parallel < 0:
        out.append(f"{where}: migrate.max_parallel {m.max_parallel} must not be negative")
    if m.health_check not in MIGRATE_HEALTH_CHECKS:
        choices = ", ".join(MIGRATE_HEALTH_CHECKS)
        out.append(f'{where}: migrate.health_check "{m.health_check}" is not one of {choices}')
    durations = (
        ("min_healthy_time", m.min_healthy_time_s),
        ("healthy_deadline", m.healthy_deadline_s),
    )
    for name, seconds in durations:
        if seconds < 0:
            out.append(f"{where}: migrate.{name} {seconds}s must not be negative")
    if m.min_healthy_time_s > m.healthy_deadline_s:
        out.append(
            f"{where}: migrate.min_healthy_time {m.min_healthy_time_s}s must be less than "
            f"healthy_deadline {m.healthy_deadline_s}s"
        )


def _reschedule(r: Reschedule, where: str, out: list[str]) -> None:
    if r.attempts < 0:
        out.append(f"{where}: reschedule.attempts {r.attempts} must not be negative")
    for name, seconds in (("interval", r.interval_s), ("delay", r.delay_s)):
        if seconds < 0:
            out.append(f"{where}: reschedule.{name} {seconds}s must not be negative")
    if r.attempts > 0 and not r.unlimited and r.interval_s <= 0:
        out.append(f"{where}: reschedule.interval must be set when attempts is {r.attempts}")
