"""Children of periodic and parameterized jobs (Nomad's Job.Dispatch and periodic dispatcher).

A template is never scheduled; the leader derives children from it and registers each as an
ordinary job (with `parent_id`): a dispatch (`dispatch`) on request, a periodic launch
(`launch_periodic`) when a cron spec comes due. `Children` is the leader's index of who
launched whom, so that an idempotency token or an overlap check reads a parent's children
without scanning every job; it is built from the state once after a (re)load and kept by the
decisions, and an entry whose job is gone (purged, or a commit that failed) is skipped.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from actors.leader.core.job_lifecycle import JobWrite, register_job
from actors.state import StateReader
from contracts.cron import NS_PER_S
from contracts.errors import NotFoundError, ValidationError
from contracts.evaluation import TriggeredBy
from contracts.job import Job, JobStatus
from contracts.launch import (
    DISPATCH_LAUNCH_SUFFIX,
    DISPATCH_PAYLOAD_SIZE_LIMIT,
    PERIODIC_LAUNCH_SUFFIX,
    DispatchPayload,
)
from contracts.state_log import UpsertEvals, UpsertJob

NewId = Callable[[], str]
# The most bytes of an idempotency token or ID prefix template, so that neither makes a
# child's ID (or the index) unbounded.
MAX_TOKEN_CHARS = 256


@dataclass(frozen=True, slots=True)
class LaunchWrite:
    """A child's registration (`write.change` None: an idempotent dispatch found its child),
    the child's ID, and that existing child's create/modify indexes."""

    write: JobWrite
    child_id: str
    existing: Job | None = None


class Children:
    """parent -> child IDs, and dispatch idempotency tokens -> child ID (one namespace each)."""

    def __init__(self) -> None:
        self._by_parent: dict[tuple[str, str], set[str]] = {}
        self._by_token: dict[tuple[str, str, str], str] = {}

    def rebuild(self, jobs: Iterable[Job]) -> None:
        self._by_parent.clear()
        self._by_token.clear()
        for job in jobs:
            self.track(job)

    def track(self, job: Job) -> None:
        if not job.parent_id:
            return
        self._by_parent.setdefault((job.namespace, job.parent_id), set()).add(job.id)
        if job.dispatch_idempotency_token:
            key = (job.namespace, job.parent_id, job.dispatch_idempotency_token)
            self._by_token[key] = job.id

    def of(self, state: StateReader, namespace: str, parent_id: str) -> list[Job]:
        """The parent's children still in the state (forgetting those that are not)."""
        ids = self._by_parent.get((namespace, parent_id), set())
        found = []
        for child_id in sorted(ids):
            child = state.job(namespace, child_id)
            if child is None or child.parent_id != parent_id:
                ids.discard(child_id)
            else:
                found.append(child)
        return found

    def with_token(
        self, state: StateReader, namespace: str, parent_id: str, token: str
    ) -> Job | None:
        child_id = self._by_token.get((namespace, parent_id, token))
        child = state.job(namespace, child_id) if child_id is not None else None
        if child is None or child.dispatch_idempotency_token != token:
            self._by_token.pop((namespace, parent_id, token), None)
            return None
        return child


def dispatch(
    state: StateReader,
    children: Children,
    namespace: str,
    job_id: str,
    *,
    meta: Mapping[str, str],
    payload: str,
    idempotency_token: str = "",
    id_prefix_template: str = "",
    now_ns: int,
    new_id: NewId,
) -> LaunchWrite:
    """Nomad's Job.Dispatch: validate against the template's `parameterized` block, return
    the child an earlier dispatch with the same idempotency token made, or register a new
    child (an eval unless the child is periodic)."""
    if not job_id:
        raise ValidationError("missing parameterized job ID")
    parent = state.job(namespace, job_id)
    if parent is None:
        raise NotFoundError("parameterized job not found")
    if not parent.is_parameterized or parent.parameterized is None:
        raise ValidationError(f'Specified job "{job_id}" is not a parameterized job')
    if parent.stop:
        raise ValidationError(f'Specified job "{job_id}" is stopped')
    _check_dispatch(parent, meta, payload, idempotency_token, id_prefix_template)
    if idempotency_token:
        existing = children.with_token(state, namespace, job_id, idempotency_token)
        if existing is not None:
            return LaunchWrite(JobWrite(None), existing.id, existing)
    child_id = dispatched_id(job_id, id_prefix_template, now_ns, new_id)
    child = parent.replace(
        id=child_id,
        name=child_id,
        parent_id=job_id,
        dispatched=True,
        dispatch_idempotency_token=idempotency_token,
        meta={**parent.meta, **meta},
        payload=payload,
        stable=False,
    )
    write = register_job(state, child, now_ns=now_ns, new_id=new_id)
    children.track(child)
    return LaunchWrite(write, child_id)


def _check_dispatch(
    parent: Job, meta: Mapping[str, str], payload: str, token: str, template: str
) -> None:
    config = parent.parameterized
    assert config is not None
    for name, value in (("idempotency_token", token), ("IdPrefixTemplate", template)):
        if len(value) > MAX_TOKEN_CHARS:
            raise ValidationError(f"{name} is {len(value)} characters; at most {MAX_TOKEN_CHARS}")
    if "/" in template or " " in template:
        raise ValidationError(f"IdPrefixTemplate {template!r} must not contain '/' or spaces")
    try:
        size = len(base64.b64decode(payload, validate=True))
    except (binascii.Error, ValueError):
        raise ValidationError(f"Payload: not valid base64: {payload[:40]!r}") from None
    if config.payload is DispatchPayload.REQUIRED and size == 0:
        raise ValidationError("Payload is not provided but required by parameterized job")
    if config.payload is DispatchPayload.FORBIDDEN and size > 0:
        raise ValidationError("Payload provided but forbidden by parameterized job")
    if size > DISPATCH_PAYLOAD_SIZE_LIMIT:
        raise ValidationError(
            f"Payload exceeds maximum size; {size} > {DISPATCH_PAYLOAD_SIZE_LIMIT}"
        )
    allowed = set(config.meta_required) | set(config.meta_optional)
    unpermitted = sorted(k for k in meta if k not in allowed)
    if unpermitted:
        raise ValidationError(f"Dispatch request included unpermitted metadata keys: {unpermitted}")
    missing = sorted(k for k in config.meta_required if k not in meta)
    if missing:
        raise ValidationError(f"Dispatch did not provide required meta keys: {missing}")


def launched_at(
    state: StateReader, children: Children, namespace: str, parent_id: str, index: int
) -> Job | None:
    """The child a launch committed at `index` made (to answer a request applied before)."""
    return next(
        (c for c in children.of(state, namespace, parent_id) if c.create_index == index), None
    )


def dispatched_id(parent_id: str, template: str, now_ns: int, new_id: NewId) -> str:
    """`<parent>/dispatch-[<template>-]<unix seconds>-<8 hex>`, as Nomad names them."""
    prefix = f"{template}-" if template else ""
    return f"{parent_id}{DISPATCH_LAUNCH_SUFFIX}{prefix}{now_ns // NS_PER_S}-{new_id()[:8]}"


def periodic_child_id(parent_id: str, launch_ns: int) -> str:
    return f"{parent_id}{PERIODIC_LAUNCH_SUFFIX}{launch_ns // NS_PER_S}"


def launch_time_ns(parent_id: str, child_id: str) -> int | None:
    """When a periodic child was launched, read off its ID (None: not a periodic child)."""
    prefix = f"{parent_id}{PERIODIC_LAUNCH_SUFFIX}"
    if not child_id.startswith(prefix) or not child_id[len(prefix) :].isdigit():
        return None
    return int(child_id[len(prefix) :]) * NS_PER_S


def last_launch_ns(state: StateReader, children: Children, parent: Job) -> int | None:
    found = children.of(state, parent.namespace, parent.id)
    launched = [t for c in found if (t := launch_time_ns(parent.id, c.id)) is not None]
    return max(launched) if launched else None


def running_children(state: StateReader, children: Children, parent: Job) -> bool:
    """Nomad's RunningChildren: a child that is not dead (live allocations or evals)."""
    return any(
        c.status is not JobStatus.DEAD for c in children.of(state, parent.namespace, parent.id)
    )


def launch_periodic(
    state: StateReader,
    children: Children,
    parent: Job,
    launch_ns: int,
    *,
    now_ns: int,
    new_id: NewId,
) -> LaunchWrite:
    """Register the child for the launch at `launch_ns` (Nomad's deriveJob: no `periodic`
    block, named by its ID) with a `periodic-job` eval (none if the child is itself a
    parameterized template)."""
    child_id = periodic_child_id(parent.id, launch_ns)
    child = parent.replace(
        id=child_id, name=child_id, parent_id=parent.id, periodic=None, stable=False
    )
    write = register_job(state, child, now_ns=now_ns, new_id=new_id)
    if write.eval is not None and isinstance(write.change, UpsertJob | UpsertEvals):
        ev = dataclasses.replace(write.eval, triggered_by=TriggeredBy.PERIODIC_JOB)
        write = dataclasses.replace(
            write, change=dataclasses.replace(write.change, evals=(ev,)), eval=ev
        )
    children.track(child)
    return LaunchWrite(write, child_id)
