"""The scaling policies the autoscaler knows: job groups' `scaling` blocks, read from the
state, and the policies of files (`-autoscaler-policy-dir`, `scaling policy apply`).

Job policies follow the state log: `apply_job` is called with the job an entry changed (or
None once purged) and looks at that job's groups only, so the work per log entry is bounded
by one job. A group's policy is parsed again only when its scaling block changed; one that
does not parse (job registration already refuses those, so only an older log can hold one)
is kept with its error and never evaluated. A group with a scaling block but no `policy`
is only scaled by hand: listed, not evaluated.

IDs are stable per target, shaped like Nomad's UUID policy IDs: the same as the API's
(`/v1/scaling/policies`), so an ID read there names the same policy here.

Cluster policies (files) with a fleet target are evaluated too (fleet_target.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from contracts.autoscaling import (
    ClusterPolicy,
    Policy,
    TargetSpec,
    parse_cluster_policy_file,
    parse_group_policy,
)
from contracts.errors import ValidationError
from contracts.job import Job, TaskGroup
from contracts.jobspec import hcl

POLICY_ID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "drover:scaling-policy")
NO_POLICY = "no policy block: the group is scaled by hand only"

GroupKey = tuple[str, str, str]


def group_policy_id(namespace: str, job_id: str, group: str) -> str:
    """A job group's policy ID: stable per (namespace, job, group), a UUID like Nomad's."""
    return str(uuid.uuid5(POLICY_ID_NAMESPACE, f"{namespace}/{job_id}/{group}"))


def file_policy_id(path: str, name: str) -> str:
    return str(uuid.uuid5(POLICY_ID_NAMESPACE, f"file:{path}:{name}"))


@dataclass(frozen=True, slots=True)
class PolicyEntry:
    """One known policy. `policy` is None when it is not evaluated: `error` or `note` says
    why."""

    id: str
    origin: Literal["job", "file"]
    type: str  # "horizontal" | "cluster"
    target: TargetSpec
    min: int
    max: int
    enabled: bool
    policy: Policy | None = None
    raw: Mapping[str, Any] = field(default_factory=dict)  # the policy document as written
    error: str = ""
    note: str = ""
    path: str = ""  # the file of a file policy
    name: str = ""  # its scaling "name"
    create_index: int = 0
    modify_index: int = 0

    @property
    def runnable(self) -> bool:
        """Evaluated by the autoscaler: parsed, enabled, and a target it can act on."""
        return self.policy is not None and self.enabled and not self.error

    @property
    def group_key(self) -> GroupKey:
        t = self.target
        return (t.namespace, t.job, t.group)


@dataclass(frozen=True, slots=True)
class RegistryChange:
    added: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.updated or self.removed)


def named_group(query: str) -> tuple[str, str] | None:
    """(group, job) an expanded query names (`taskgroup_<op>_<metric>/<group>/<job>`)."""
    parts = query.split("/")
    if len(parts) == 3 and parts[1] and parts[2]:
        return parts[1], parts[2]
    return None


def raw_policies(text: str) -> dict[str, dict[str, Any]]:
    """Each `scaling "name"` block's `policy` as written (a parsed file), as Nomad's API
    shows a policy's map."""
    out: dict[str, dict[str, Any]] = {}
    for block in hcl.load(text).blocks.get("scaling", []):
        policy = block.body.blocks.get("policy", [])
        if len(block.labels) == 1 and len(policy) == 1:
            out[block.labels[0]] = hcl.to_plain(policy[0].body)
    return out


class PolicyRegistry:
    def __init__(self) -> None:
        self._entries: dict[str, PolicyEntry] = {}
        self._by_job: dict[tuple[str, str], tuple[str, ...]] = {}
        self._by_file: dict[str, tuple[str, ...]] = {}

    # -- reads -----------------------------------------------------------------------------------

    def get(self, policy_id: str) -> PolicyEntry | None:
        return self._entries.get(policy_id)

    def entries(self) -> Iterator[PolicyEntry]:
        return iter(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def file_paths(self) -> set[str]:
        return set(self._by_file)

    def for_group(self, namespace: str, job_id: str, group: str) -> list[PolicyEntry]:
        """Every policy targeting a job group: its own, and any file policy naming it."""
        key = (namespace, job_id, group)
        return [
            e
            for e in self._entries.values()
            if e.runnable and e.target.kind == "job-group" and e.group_key == key
        ]

    def job_keys(self) -> list[tuple[str, str]]:
        """The (namespace, job id) of every job with policies here."""
        return list(self._by_job)

    def tracked_groups(self) -> set[GroupKey]:
        """The groups some evaluated policy reads metrics of: its target's, and those its
        checks name (`taskgroup_avg_cpu/<group>/<job>`, in the target's namespace)."""
        groups: set[GroupKey] = set()
        for entry in self._entries.values():
            if not entry.runnable or entry.policy is None:
                continue
            if entry.target.kind == "job-group":
                groups.add(entry.group_key)
            for check in entry.policy.checks:
                named = named_group(check.query)
                if named is not None:
                    groups.add((entry.target.namespace, named[1], named[0]))
        return groups

    # -- job policies ----------------------------------------------------------------------------

    def apply_job(self, namespace: str, job_id: str, job: Job | None, index: int) -> RegistryChange:
        """Bring the policies of one job in line with its latest version (None: purged)."""
        key = (namespace, job_id)
        before = self._by_job.get(key, ())
        now: dict[str, PolicyEntry] = {}
        if job is not None:
            for tg in job.task_groups:
                if tg.scaling is not None:
                    entry = self._group_entry(job, tg, index)
                    now[entry.id] = entry
        return self._replace(before, now, lambda ids: self._set_job(key, ids))

    def _set_job(self, key: tuple[str, str], ids: tuple[str, ...]) -> None:
        if ids:
            self._by_job[key] = ids
        else:
            self._by_job.pop(key, None)

    def _group_entry(self, job: Job, tg: TaskGroup, index: int) -> PolicyEntry:
        scaling = tg.scaling
        assert scaling is not None
        low = tg.count if scaling.min is None else scaling.min
        policy_id = group_policy_id(job.namespace, job.id, tg.name)
        old = self._entries.get(policy_id)
        if (
            old is not None
            and old.raw == scaling.policy
            and (old.min, old.max, old.enabled) == (low, scaling.max, scaling.enabled)
        ):
            return old  # unchanged: not parsed again (a scale changes the job, not this)
        target = TargetSpec(kind="job-group", job=job.id, group=tg.name, namespace=job.namespace)
        entry = PolicyEntry(
            id=policy_id,
            origin="job",
            type=scaling.type,
            target=target,
            min=low,
            max=scaling.max,
            enabled=scaling.enabled,
            raw=dict(scaling.policy),
            create_index=old.create_index if old is not None else index,
            modify_index=index,
        )
        if not scaling.policy:
            return replace(entry, note=NO_POLICY)
        try:
            policy = parse_group_policy(
                scaling.policy,
                min=low,
                max=scaling.max,
                where=f'job "{job.id}" > group "{tg.name}"',
                enabled=scaling.enabled,
                job=job.id,
                group=tg.name,
                namespace=job.namespace,
            )
        except ValidationError as exc:
            return replace(entry, error="; ".join(exc.problems))
        return replace(entry, policy=policy)

    # -- file policies ---------------------------------------------------------------------------

    def apply_file(self, path: str, text: str, index: int = 0) -> RegistryChange:
        """Load (or reload) one policy file. A file that does not parse replaces its
        policies with one entry carrying the problems."""
        before = self._by_file.get(path, ())
        now: dict[str, PolicyEntry] = {}
        try:
            parsed = parse_cluster_policy_file(text, path)
        except ValidationError as exc:
            entry = PolicyEntry(
                id=file_policy_id(path, ""),
                origin="file",
                type="cluster",
                target=TargetSpec(kind="fleet"),
                min=0,
                max=0,
                enabled=False,
                error="; ".join(exc.problems),
                path=path,
                create_index=index,
                modify_index=index,
            )
            now[entry.id] = entry
        else:
            raws = raw_policies(text)
            for cluster_policy in parsed:
                entry = self._file_entry(cluster_policy, index, raws.get(cluster_policy.name))
                now[entry.id] = entry
        return self._replace(before, now, lambda ids: self._set_file(path, ids))

    def remove_file(self, path: str) -> RegistryChange:
        return self._replace(self._by_file.get(path, ()), {}, lambda ids: self._set_file(path, ids))

    def _set_file(self, path: str, ids: tuple[str, ...]) -> None:
        if ids:
            self._by_file[path] = ids
        else:
            self._by_file.pop(path, None)

    def _file_entry(
        self, cp: ClusterPolicy, index: int, raw: Mapping[str, Any] | None = None
    ) -> PolicyEntry:
        policy = cp.policy
        policy_id = file_policy_id(cp.path, cp.name)
        old = self._entries.get(policy_id)
        entry = PolicyEntry(
            id=policy_id,
            origin="file",
            type=cp.type,
            target=policy.target,
            min=policy.min,
            max=policy.max,
            enabled=policy.enabled,
            policy=policy,
            raw=dict(raw or {}),
            path=cp.path,
            name=cp.name,
            create_index=old.create_index if old is not None else index,
            modify_index=index,
        )
        return entry

    # -- shared ----------------------------------------------------------------------------------

    def _replace(
        self,
        before: tuple[str, ...],
        now: dict[str, PolicyEntry],
        record: Callable[[tuple[str, ...]], None],
    ) -> RegistryChange:
        added, updated = [], []
        for policy_id, entry in now.items():
            old = self._entries.get(policy_id)
            if old is None:
                added.append(policy_id)
            elif old is not entry:
                updated.append(policy_id)
            self._entries[policy_id] = entry
        removed = [p for p in before if p not in now]
        for policy_id in removed:
            del self._entries[policy_id]
        record(tuple(now))
        return RegistryChange(tuple(added), tuple(updated), tuple(removed))
