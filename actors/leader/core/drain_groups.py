"""What Nomad's drainer decides for one job (nomad/drainer/watch_jobs.go: handleJob and
handleTaskGroup), as pure functions of its allocations, its groups' `migrate` blocks and now.

For each group of a service job: `healthy` counts the group's live allocations that have
their health (below), `drainable` those on draining nodes not yet marked for migration, and
`healthy - (count - max_parallel)` of the drainable ones are marked now (Nomad's numToDrain):
at most max_parallel of the group are on their way at once, and the next goes only once the
group's replacements are healthy. Batch work is never marked (it runs until the drain's
deadline); system jobs are left to the end of the drain (drainer.py).

Health, as drover can know it (Nomad's client sets `DeploymentStatus.Healthy` by the migrate
block outside a deployment): an allocation has its health once it has been running for the
block's `min_healthy_time` (the running report's time is its `modify_time`, as the API's task
states read it), or once `healthy_deadline` has passed since it was placed without that (then
unhealthy, which Nomad counts too, so a replacement that never comes up does not hold the
drain for good). drover's tasks have no service checks, so "checks" and "task_states" are
the same rule.

Where drover differs on purpose: an allocation already marked for migration is not counted
healthy. Nomad counts it until the scheduler stops it, so a batch marked but not yet stopped
lets a second batch go when the watcher runs again in between (more than max_parallel on
their way); here it is in flight from the moment it is marked.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from contracts import Allocation, ClientStatus, Job, JobType, TaskGroup
from contracts.job import DEFAULT_MIGRATE, MigrateStrategy
from contracts.share import is_run

NS_PER_S = 1_000_000_000


def _ns(seconds: float) -> int:
    return int(seconds * NS_PER_S)


def has_health(alloc: Allocation, migrate: MigrateStrategy, now_ns: int) -> bool:
    """Nomad's `DeploymentStatus.HasHealth()` for a live allocation: healthy (running for
    min_healthy_time) or unhealthy (past healthy_deadline without being so)."""
    running_since = alloc.modify_time
    if alloc.client_status is ClientStatus.RUNNING and now_ns >= running_since + _ns(
        migrate.min_healthy_time_s
    ):
        return True
    return now_ns >= alloc.create_time + _ns(migrate.healthy_deadline_s)


def health_due(alloc: Allocation, migrate: MigrateStrategy) -> int:
    """When a live allocation without its health will have it, as things stand: running for
    min_healthy_time, or at its healthy_deadline."""
    deadline = alloc.create_time + _ns(migrate.healthy_deadline_s)
    if alloc.client_status is ClientStatus.RUNNING:
        return min(alloc.modify_time + _ns(migrate.min_healthy_time_s), deadline)
    return deadline


@dataclass(frozen=True, slots=True)
class GroupDrain:
    """handleTaskGroup's answer: what to mark now, and what is left."""

    drain: tuple[Allocation, ...] = ()
    healthy: int = 0
    # Allocations on draining nodes not yet finished on their client (marked, stopped by the
    # scheduler or not): Nomad's `!done`.
    remaining: bool = False
    # Drainable allocations left unmarked by this batch: the drainer looks again later.
    waiting: bool = False
    # When one of the group's allocations without health will have it (the next batch may
    # go then); None when nothing waits or nothing will change by itself.
    recheck_at: int | None = None


def handle_task_group(
    tg: TaskGroup,
    allocs: Iterable[Allocation],
    *,
    batch: bool,
    on_draining_node: Callable[[str], bool],
    now_ns: int,
) -> GroupDrain:
    """Nomad's handleTaskGroup for the group's allocations (any node)."""
    migrate = tg.migrate or DEFAULT_MIGRATE
    healthy = 0
    remaining = False
    drainable: list[Allocation] = []
    health_times: list[int] = []
    for alloc in allocs:
        marked = alloc.desired_transition.migrate
        if not batch and not marked and not alloc.terminal():
            if has_health(alloc, migrate, now_ns):
                healthy += 1
            else:
                health_times.append(health_due(alloc, migrate))
        if alloc.client_terminal() or not on_draining_node(alloc.node_id):
            continue
        remaining = True
        if not batch and not marked and not alloc.server_terminal():
            drainable.append(alloc)
    if batch:
        return GroupDrain(remaining=remaining)
    threshold = tg.count - migrate.max_parallel
    count = min(len(drainable), healthy - threshold)
    drainable.sort(key=lambda a: (a.index, a.id))
    drain = tuple(drainable[:count]) if count > 0 else ()
    waiting = len(drain) < len(drainable)
    future = [at for at in health_times if at > now_ns]
    return GroupDrain(
        drain=drain,
        healthy=healthy,
        remaining=remaining,
        waiting=waiting,
        recheck_at=min(future) if waiting and future else None,
    )


@dataclass(frozen=True, slots=True)
class JobDrain:
    """handleJob's answer for a job: the allocations to mark now, whether any of its
    allocations on draining nodes still wait for a later batch, and when to look again."""

    drain: tuple[Allocation, ...] = ()
    waiting: bool = False
    recheck_at: int | None = None


def paced(job: Job) -> bool:
    """Jobs whose allocations the drainer marks batch by batch: services. Batch work (and a
    run's ranks) waits for the deadline; system jobs are left to the end of the drain."""
    return job.type == JobType.SERVICE and not is_run(job) and not job.stop


def handle_job(
    job: Job,
    allocs: Sequence[Allocation],
    *,
    on_draining_node: Callable[[str], bool],
    now_ns: int,
) -> JobDrain:
    """Nomad's handleJob: every group of a service job, each by its own migrate block."""
    if not paced(job):
        return JobDrain()
    by_group: dict[str, list[Allocation]] = defaultdict(list)
    for alloc in allocs:
        by_group[alloc.task_group].append(alloc)
    drain: list[Allocation] = []
    waiting = False
    times: list[int] = []
    for tg in job.task_groups:
        group = handle_task_group(
            tg,
            by_group.get(tg.name, ()),
            batch=False,
            on_draining_node=on_draining_node,
            now_ns=now_ns,
        )
        drain += group.drain
        waiting = waiting or group.waiting
        if group.recheck_at is not None:
            times.append(group.recheck_at)
    return JobDrain(tuple(drain), waiting, min(times) if times else None)
