"""Nomad's Canonicalize for a Job record: fill the defaults a record can still tell are unset.

The parsers already apply the defaults that depend on which fields were written (count from
scaling.min, update/reschedule/migrate merging); this pass covers the rest (a service group
without a migrate block gets Nomad's default one) and also makes jobs built
in code (tests, the API) look like parsed ones. It is idempotent.
"""

from __future__ import annotations

from contracts.copying import replaced
from contracts.job import (
    DEFAULT_MIGRATE,
    DEFAULT_NAMESPACE,
    DEFAULT_NODE_POOL,
    DEFAULT_PRIORITY,
    Job,
    JobType,
    TaskGroup,
    UpdateStrategy,
)
from contracts.jobspec.build import default_reschedule

DEFAULT_DATACENTERS = ("*",)


def canonicalize(job: Job) -> Job:
    """Name defaults to the ID, datacenters to "*", and groups get Nomad's group defaults."""
    groups = tuple(_group(tg, job) for tg in job.task_groups)
    return replaced(
        job,
        name=job.name or job.id,
        namespace=job.namespace or DEFAULT_NAMESPACE,
        node_pool=job.node_pool or DEFAULT_NODE_POOL,
        priority=job.priority or DEFAULT_PRIORITY,
        datacenters=job.datacenters or DEFAULT_DATACENTERS,
        task_groups=groups,
    )


def _group(tg: TaskGroup, job: Job) -> TaskGroup:
    scaling = tg.scaling
    if scaling is not None and scaling.min is None:
        scaling = replaced(scaling, min=tg.count)
    update: UpdateStrategy | None = tg.update if tg.update is not None else job.update
    reschedule = tg.reschedule_policy
    if reschedule is None:
        reschedule = default_reschedule(job.type)
    migrate = tg.migrate
    if migrate is None and job.type == JobType.SERVICE:
        migrate = DEFAULT_MIGRATE
    return replaced(
        tg, scaling=scaling, update=update, migrate=migrate, reschedule_policy=reschedule
    )
