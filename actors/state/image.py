"""A store's state as snapshot chunks, and a store rebuilt from them (contracts/snapshot.py).

Chunks are log entries at the snapshot's index whose changes hold records exactly as the
store holds them. Applying them with `StateStore.apply` would stamp them again (new create
indexes, a version bump per job), so a store restores them verbatim instead: records are
written as they are, and everything derived from them (the by-job and by-node indexes, node
usage, live counters, blocked evals and node holds) is rebuilt as the apply path builds it.

This module reads and writes the store's tables directly: it is the store's own restore
path, kept apart from the apply path (store.py) because it shares nothing with it but the
tables.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import TypeVar

from actors.state.reader import CONFIG_KEY
from actors.state.snapshot import StateSnapshot
from actors.state.store import StateStore
from contracts.allocation import Allocation
from contracts.deployment import Deployment
from contracts.evaluation import EvalStatus, Evaluation
from contracts.job import Job
from contracts.snapshot import SnapshotHeader
from contracts.state_log import (
    JobImage,
    LogEntry,
    RestoreJobs,
    StateChange,
    UpsertAllocRows,
    UpsertAllocs,
    UpsertDeployments,
    UpsertEvals,
    UpsertNodes,
    UpsertSchedulerConfig,
)

T = TypeVar("T")

# Records per chunk: a chunk is one Redis value and one decode; these keep each to a few MB.
NODES_PER_CHUNK = 2_000
JOBS_PER_CHUNK = 1_000
EVALS_PER_CHUNK = 10_000
ALLOCS_PER_CHUNK = 10_000

RESTORABLE = (
    UpsertNodes,
    RestoreJobs,
    UpsertEvals,
    UpsertAllocs,
    UpsertAllocRows,
    UpsertDeployments,
    UpsertSchedulerConfig,
)
DEPLOYMENTS_PER_CHUNK = 1_000


def _batches(items: Iterable[T], size: int) -> Iterator[tuple[T, ...]]:
    it = iter(items)
    while batch := tuple(islice(it, size)):
        yield batch


def image_changes(state: StateSnapshot) -> Iterator[StateChange]:
    """The chunks' changes of a point-in-time snapshot (nodes, jobs, evals, allocations)."""
    for nodes in _batches(state.nodes(), NODES_PER_CHUNK):
        yield UpsertNodes(nodes)
    images = (
        JobImage(
            job,
            _history(job, state.job_versions(job.namespace, job.id)),
            state.scaling_events(job.namespace, job.id),
        )
        for job in state.jobs()
    )
    for jobs in _batches(images, JOBS_PER_CHUNK):
        yield RestoreJobs(jobs)
    # Oldest first, so that the orders the store keeps (a job's evaluations and
    # allocations, a node's allocations) come out as the log made them; a node's holds
    # (earliest gang first) are ordered by Restore.
    evals = sorted(state.evals(), key=_create_index)
    for batch in _batches(evals, EVALS_PER_CHUNK):
        yield UpsertEvals(batch)
    allocs = [a for job in state.jobs() for a in state.allocs_by_job(job.namespace, job.id)]
    if len(allocs) != state.alloc_count():  # allocations of purged jobs
        listed = {a.id for a in allocs}
        allocs += [a for a in state.allocs() if a.id not in listed]
    allocs.sort(key=_create_index)
    for placed in _batches(allocs, ALLOCS_PER_CHUNK):
        yield UpsertAllocs(placed)
    for deployments in _batches(state.deployments(), DEPLOYMENTS_PER_CHUNK):
        yield UpsertDeployments(deployments)
    if state.table_index("scheduler_config"):
        yield UpsertSchedulerConfig(state.scheduler_config())


def _history(job: Job, versions: list[Job]) -> tuple[Job, ...]:
    """A job's versions as its image holds them: none when the only one is the job itself
    (a job registered once, most of them), which a restore takes for its history; written
    out, it was half of a snapshot's job chunks."""
    if len(versions) == 1 and versions[0] is job:
        return ()
    return tuple(versions)


def _create_index(record: Evaluation | Allocation | Deployment) -> int:
    return record.create_index


def image_entries(state: StateSnapshot, term: int) -> Iterator[LogEntry]:
    index = state.latest_index()
    for change in image_changes(state):
        yield LogEntry(index, term, change)


class Restore:
    """Rebuilds `store` from a snapshot: `begin` with its header, then `chunk` for each
    chunk's change (as a follower's decoder and reducer left it), then `end`. From `begin`
    on the store stands at the snapshot's index (a listener called between chunks sees it
    there); readers holding earlier snapshots of it keep them."""

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self._blocked: list[Evaluation] = []

    def begin(self, header: SnapshotHeader) -> None:
        store = self.store
        with store._lock:
            store.reset()
            store._table_index = dict(header.table_index)
            store._latest = header.index

    def chunk(self, change: StateChange) -> None:
        store = self.store
        with store._lock:
            if isinstance(change, UpsertNodes):
                for node in change.nodes:
                    store._nodes.set(node.id, node)
            elif isinstance(change, RestoreJobs):
                for image in change.jobs:
                    self._job(image)
            elif isinstance(change, UpsertEvals):
                for ev in change.evals:
                    self._eval(ev)
            elif isinstance(change, UpsertAllocs | UpsertAllocRows):
                for ev in change.evals:
                    self._eval(ev)
                allocs = change.allocs if isinstance(change, UpsertAllocs) else _expand(change)
                self._allocs(allocs)
            elif isinstance(change, UpsertSchedulerConfig):
                store._scheduler_config.set(CONFIG_KEY, change.config)
            elif isinstance(change, UpsertDeployments):
                for deployment in change.deployments:  # each job's oldest first
                    key = (deployment.namespace, deployment.job_id)
                    store._deployments.set(key, (*(store._deployments.get(key) or ()), deployment))
                    store._deployment_jobs.set(deployment.id, key)
            else:
                raise TypeError(f"not a snapshot chunk: {type(change).__name__}")

    def end(self) -> None:
        store = self.store
        with store._lock:
            # Blocked evals hold their instances in the order they were blocked in.
            for ev in sorted(self._blocked, key=lambda e: e.modify_index):
                store._blocked.setdefault((ev.namespace, ev.job_id), {})[ev.id] = None
                store._hold_table.add(ev)
            self._blocked = []
            store._dirty.clear()  # statuses are as recorded: nothing to recompute

    def _job(self, image: JobImage) -> None:
        store, job = self.store, image.job
        key = (job.namespace, job.id)
        store._jobs.set(key, job)
        store._versions.set(key, image.versions or (job,))
        if image.scaling:
            store._scaling.set(key, dict(image.scaling))

    def _eval(self, ev: Evaluation) -> None:
        store = self.store
        key = (ev.namespace, ev.job_id)
        store._evals.set(ev.id, ev)
        store._evals_by_job.add(key, ev.id)
        if not ev.terminal():
            store._live_evals[key] = store._live_evals.get(key, 0) + 1
        if ev.status is EvalStatus.BLOCKED:
            self._blocked.append(ev)

    def _allocs(self, allocs: Iterable[Allocation]) -> None:
        store = self.store
        table = store._allocs
        placed: list[Allocation] = []
        for alloc in allocs:
            table.set(alloc.id, alloc)
            placed.append(alloc)
        store._index_placed(placed)


def _expand(change: UpsertAllocRows) -> list[Allocation]:
    return [alloc for group in change.groups for alloc in group.expand()]


def restore(store: StateStore, header: SnapshotHeader, changes: Iterable[StateChange]) -> None:
    """Rebuild `store` from a snapshot's header and chunk changes (tests, tools)."""
    rebuild = Restore(store)
    rebuild.begin(header)
    for change in changes:
        rebuild.chunk(change)
    rebuild.end()
