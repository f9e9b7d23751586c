"""In place or destructive: Nomad's `tasksUpdated` (scheduler/util.go).

An allocation of an older job version is updated in place (the same allocation takes the new
job version) unless something its tasks were started with changed; then it is replaced
(destructive). Nomad's rules, for the fields drover models:

- the group: the number of tasks, the ephemeral disk, the affinities (the job's, the group's
  and its tasks', in that order) and the spreads (the job's and the group's);
- each task (matched by name): driver, user, config, env, the meta it sees (the job's meta
  under the group's under its own, as in its environment: a job or group meta change is
  destructive too), and its resources.

Nomad leaves constraints to the node check that follows (a changed constraint the node still
meets stays in place). drover adds what it has and Nomad has not: a dstack run's share
request, and the task's `resources.disk` (deprecated and unused in Nomad, counted by drover).
"""

from __future__ import annotations

from dataclasses import dataclass

from contracts import Job, Task, TaskGroup


@dataclass(frozen=True, slots=True)
class Difference:
    """What makes an update destructive (Nomad's `comparison`), for logs and tests."""

    label: str
    before: object
    after: object

    def __str__(self) -> str:
        return f"{self.label} changed; before: {self.before!r}, after: {self.after!r}"


def combined_task_meta(job: Job, group: TaskGroup, task: Task) -> dict[str, str]:
    """The meta a task sees (Nomad's CombinedTaskMeta): its own over its group's over the
    job's."""
    return {**job.meta, **group.meta, **task.meta}


def tasks_updated(old: Job | None, new: Job, group: str) -> Difference | None:
    """Why allocations of `group` made from `old` must be replaced under `new`; None when
    they can be updated in place. An unknown old version (or group) is destructive."""
    a = old.lookup_task_group(group) if old is not None else None
    b = new.lookup_task_group(group)
    if old is None or a is None or b is None:
        return Difference("task group", a, b)
    if len(a.tasks) != len(b.tasks):
        return Difference("number of tasks", len(a.tasks), len(b.tasks))
    if a.ephemeral_disk_mb != b.ephemeral_disk_mb:
        return Difference("ephemeral disk", a.ephemeral_disk_mb, b.ephemeral_disk_mb)
    affinities_a, affinities_b = _affinities(old, a), _affinities(new, b)
    if affinities_a != affinities_b:
        return Difference("affinities", affinities_a, affinities_b)
    spreads_a, spreads_b = old.spreads + a.spreads, new.spreads + b.spreads
    if spreads_a != spreads_b:
        return Difference("spreads", spreads_a, spreads_b)
    if a.share != b.share:
        return Difference("share", a.share, b.share)
    tasks_b = {t.name: t for t in b.tasks}
    for at in a.tasks:
        bt = tasks_b.get(at.name)
        if bt is None:
            return Difference("task deleted", at.name, None)
        difference = _task_updated(old, a, at, new, b, bt)
        if difference is not None:
            return difference
    return None


def _task_updated(
    job_a: Job, group_a: TaskGroup, a: Task, job_b: Job, group_b: TaskGroup, b: Task
) -> Difference | None:
    if a.driver != b.driver:
        return Difference("task driver", a.driver, b.driver)
    if a.user != b.user:
        return Difference("task user", a.user, b.user)
    if a.config != b.config:
        return Difference("task config", a.config, b.config)
    if a.env != b.env:
        return Difference("task env", a.env, b.env)
    meta_a = combined_task_meta(job_a, group_a, a)
    meta_b = combined_task_meta(job_b, group_b, b)
    if meta_a != meta_b:
        return Difference("task meta", meta_a, meta_b)
    ra, rb = a.resources, b.resources
    for label, before, after in (
        ("task cpu", ra.cpu, rb.cpu),
        ("task memory", ra.memory_mb, rb.memory_mb),
        ("task devices", ra.devices, rb.devices),
        ("task disk", ra.disk_mb, rb.disk_mb),
    ):
        if before != after:
            return Difference(label, before, after)
    if ra != rb:  # anything the resources gain later
        return Difference("task resources", ra, rb)
    return None


def _affinities(job: Job, group: TaskGroup) -> tuple[object, ...]:
    return (
        *job.affinities,
        *group.affinities,
        *(affinity for task in group.tasks for affinity in task.affinities),
    )
