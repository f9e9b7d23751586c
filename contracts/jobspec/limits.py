"""The server's limits on a job (`drover agent -job-max-count ...`, as Nomad's server options
bound job sources and priorities): every problem names the place, the field, the value and
the limit, so a client is told exactly what to change.

The limits keep what an accepted job can cost bounded: a group's count (each allocation is a
record the cluster keeps), the number of groups and of tasks in a group (each evaluated on
every node), the job's size on the wire and the bytes of its metadata (copied into every
allocation's environment)."""

from __future__ import annotations

from dataclasses import dataclass

from contracts.fast_init import install_fast_inits
from contracts.job import Job


@dataclass(frozen=True, slots=True)
class JobLimits:
    max_count: int = 1_000_000  # allocations one group may ask for
    max_groups: int = 1_000
    max_tasks: int = 1_000  # in one group
    max_meta_bytes: int = 64 * 1024  # keys and values of every meta block of the job
    max_job_bytes: int = 4 * 1024 * 1024  # the job's JSON as submitted

    def __post_init__(self) -> None:
        for name in ("max_count", "max_groups", "max_tasks", "max_meta_bytes", "max_job_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected a number >= 1, got {getattr(self, name)}")


DEFAULT_LIMITS = JobLimits()


def _meta_bytes(meta: dict[str, str]) -> int:
    return sum(len(k.encode()) + len(str(v).encode()) for k, v in meta.items())


def limit_problems(job: Job, limits: JobLimits = DEFAULT_LIMITS) -> list[str]:
    where = f'job "{job.id}"'
    out: list[str] = []
    if len(job.task_groups) > limits.max_groups:
        out.append(
            f"{where}: {len(job.task_groups)} task groups, above the limit of {limits.max_groups}"
        )
    meta = _meta_bytes(job.meta)
    for tg in job.task_groups[: limits.max_groups]:
        here = f'{where} > group "{tg.name}"'
        if tg.count > limits.max_count:
            out.append(f"{here}: count {tg.count} is above the limit of {limits.max_count}")
        if len(tg.tasks) > limits.max_tasks:
            out.append(f"{here}: {len(tg.tasks)} tasks, above the limit of {limits.max_tasks}")
        meta += _meta_bytes(tg.meta) + sum(_meta_bytes(t.meta) for t in tg.tasks)
    if meta > limits.max_meta_bytes:
        out.append(
            f"{where}: meta of {meta} bytes (job, groups and tasks), above the limit of"
            f" {limits.max_meta_bytes}"
        )
    return out


def size_problem(size: int, limits: JobLimits = DEFAULT_LIMITS) -> str | None:
    if size > limits.max_job_bytes:
        return f"Job: {size} bytes, above the limit of {limits.max_job_bytes}"
    return None


install_fast_inits(__name__)
