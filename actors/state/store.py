"""The replicated state machine: the leader applies log entries to it, and so does every replica.

Apply is deterministic (every time and id comes inside the entry) and idempotent (an entry at
or below the latest index is ignored). It never raises for a change that refers to missing
records: those parts are skipped, so the leader and replicas cannot diverge on an error.

Nomad semantics kept here (`nomad/state/state_store.go`):
- indexes: CreateIndex kept on update, ModifyIndex (and AllocModifyIndex / JobModifyIndex
  where Nomad sets them) stamped from the entry's index;
- job versions: UpsertJob writes version = current + 1 into a short history (6 rows, the
  newest stable one never dropped), or rewrites a row in place with `keep_version`;
- job status: recomputed from per-job counters on every job, alloc and eval write, and the
  current version's row always mirrors it (the #24957 fix);
- a plan's alloc update keeps the client-reported status unless it marks the alloc lost or
  unknown (the client owns that field);
- an eval that completes with no failed placements cancels its job's blocked evals.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from actors.state.chunked_cow import ChunkedCowMap
from actors.state.cow import CowMap, job_key_hash, stable_hash, str_hash
from actors.state.deployments import keep_deployment
from actors.state.holds import HoldTable
from actors.state.job_status import compute_job_status
from actors.state.job_status_refresh import JobStatusRefresh
from actors.state.multimap import CowMultiMap
from actors.state.reader import CONFIG_KEY, JobKey, TableReader
from actors.state.snapshot import TABLE_SLOTS, ScalingByGroup, StateSnapshot
from actors.state.stamping import (
    client_updated,
    registered_job,
    stamped_alloc,
    stamped_eval,
    stamped_job_eval,
    stamped_node,
)
from actors.state.usage import NodeUsage, UsageTable
from actors.state.versions import add_version, replace_version
from contracts.allocation import CLIENT_TERMINAL, Allocation
from contracts.deployment import Deployment
from contracts.evaluation import EvalStatus, Evaluation
from contracts.job import Job
from contracts.node import Node
from contracts.resources import AllocatedResources
from contracts.scaling import TRACKED_SCALING_EVENTS, ScalingEvent
from contracts.scheduler_config import SchedulerConfiguration
from contracts.state_log import (
    AllocClientUpdate,
    AppendScalingEvent,
    DeleteEvals,
    DeleteNodes,
    LogEntry,
    PurgeJob,
    StateChange,
    UpdateAllocsClientStatus,
    UpdateClientStatusRows,
    UpsertAllocRows,
    UpsertAllocs,
    UpsertDeployments,
    UpsertEvals,
    UpsertJob,
    UpsertNodes,
    UpsertSchedulerConfig,
)


class StateStore(JobStatusRefresh, TableReader):
    """The single-writer store. Reads on the live store are for the writer's own thread;
    anyone else reads a `snapshot()`."""

    __slots__ = (
        *TABLE_SLOTS,
        "_blocked",
        "_dirty",
        "_handlers",
        "_hold_table",
        "_live_allocs",
        "_live_evals",
        "_lock",
        "_shape",
        "_usage_table",
    )

    _jobs: ChunkedCowMap[JobKey, Job]
    _versions: ChunkedCowMap[JobKey, tuple[Job, ...]]
    _nodes: CowMap[str, Node]
    _allocs: ChunkedCowMap[str, Allocation]
    _evals: ChunkedCowMap[str, Evaluation]
    _usage: CowMap[str, NodeUsage]
    _scaling: ChunkedCowMap[JobKey, ScalingByGroup]
    _allocs_by_job: CowMultiMap[JobKey, str]
    _allocs_by_node: CowMultiMap[str, str]
    _evals_by_job: CowMultiMap[JobKey, str]
    _holds: CowMap[str, tuple[str, ...]]
    _deployments: ChunkedCowMap[JobKey, tuple[Deployment, ...]]
    _deployment_jobs: ChunkedCowMap[str, JobKey]
    _scheduler_config: CowMap[str, SchedulerConfiguration]
    _table_index: dict[str, int]

    def __init__(
        self,
        shards: int = 256,
        alloc_shards: int = 16384,
        node_shards: int = 1,
        job_shards: int = 4096,
    ) -> None:
        self._shape = {
            "shards": shards,
            "alloc_shards": alloc_shards,
            "node_shards": node_shards,
            "job_shards": job_shards,
        }
        self._latest = 0
        self._table_index = {}
        # Tables keyed by job (and evaluations, a few per job) grow with the cluster: with a
        # fixed few hundred shards, the shard that a write copies after a snapshot grew with
        # them (the leader snapshots every few evaluations: at ~60,000 jobs its copies
        # took twice the share of its turn they took at a few thousand). Thousands of
        # shards in chunks keep both the copy and the snapshot small (chunked_cow.py).
        self._jobs = ChunkedCowMap(job_shards, job_key_hash)
        self._versions = ChunkedCowMap(job_shards, job_key_hash)
        # Node-keyed tables hold thousands of keys, not millions: one shard, copied whole
        # (tens of microseconds) on the first write after a snapshot, makes every read a
        # plain dict lookup on the scheduler's and applier's hottest paths.
        self._nodes = CowMap(node_shards, str_hash)
        # Looked up several times per allocation by every store, never iterated for a
        # decision: the faster per-process hash (see cow.py). Thousands of shards, so that
        # a write copies little: kept in chunks, so that a snapshot copies little either.
        self._allocs = ChunkedCowMap(alloc_shards, hash)
        self._evals = ChunkedCowMap(job_shards, hash)
        self._usage_table = UsageTable(node_shards)
        self._usage = self._usage_table.table
        self._scaling = ChunkedCowMap(job_shards, job_key_hash)
        self._allocs_by_job = CowMultiMap(outer=ChunkedCowMap(job_shards, job_key_hash))
        self._allocs_by_node = CowMultiMap(shards, hash)
        self._evals_by_job = CowMultiMap(outer=ChunkedCowMap(job_shards, job_key_hash))
        self._hold_table = HoldTable(node_shards)
        self._holds = self._hold_table.table
        # A job's deployments, oldest first; a deployment's job.
        self._deployments = ChunkedCowMap(job_shards, job_key_hash)
        self._deployment_jobs = ChunkedCowMap(job_shards, stable_hash)
        self._scheduler_config = CowMap(1)  # one record, under CONFIG_KEY
        # Writer-only bookkeeping (never read through a snapshot).
        self._live_allocs: dict[JobKey, int] = {}
        self._live_evals: dict[JobKey, int] = {}
        self._blocked: dict[JobKey, dict[str, None]] = {}
        self._dirty: dict[JobKey, bool] = {}  # jobs whose status to recompute -> eval_delete
        self._lock = threading.RLock()
        self._handlers: dict[type[Any], Callable[[Any, int], None]] = {
            UpsertNodes: self._apply_upsert_nodes,
            DeleteNodes: self._apply_delete_nodes,
            UpsertJob: self._apply_upsert_job,
            PurgeJob: self._apply_purge_job,
            UpsertEvals: self._apply_upsert_evals,
            DeleteEvals: self._apply_delete_evals,
            UpsertAllocs: self._apply_upsert_allocs,
            UpdateAllocsClientStatus: self._apply_client_updates,
            AppendScalingEvent: self._apply_scaling_event,
            UpsertAllocRows: self._apply_alloc_rows,
            UpdateClientStatusRows: self._apply_client_rows,
            UpsertDeployments: self._apply_upsert_deployments,
            UpsertSchedulerConfig: self._apply_scheduler_config,
        }

    # ------------------------------------------------------------------------------------
    # Entry points

    def apply(self, entry: LogEntry) -> None:
        """Apply one entry; an entry at or below the latest index is ignored."""
        with self._lock:
            if entry.index <= self._latest:
                return
            handler = self._handlers.get(type(entry.change))
            if handler is None:
                raise TypeError(f"not a state change: {type(entry.change).__name__}")
            handler(entry.change, entry.index)
            self._refresh_job_statuses(entry.index)
            self._latest = entry.index

    def reset(self) -> None:
        """Empty the store in place, before a snapshot is restored into it (image.py):
        whoever holds the store sees the new state; earlier snapshots of it stay as they were."""
        with self._lock:
            lock = self._lock
            type(self).__init__(self, **self._shape)
            self._lock = lock

    def commit(self, change: StateChange, term: int = 0) -> int:
        """Apply `change` at the next index (the leader's path); returns that index."""
        with self._lock:
            index = self._latest + 1
            self.apply(LogEntry(index=index, term=term, change=self.stamped(change, index)))
            return index

    def snapshot(self) -> StateSnapshot:
        with self._lock:
            return StateSnapshot(
                latest=self._latest,
                table_index=dict(self._table_index),
                jobs=self._jobs.snapshot(),
                versions=self._versions.snapshot(),
                nodes=self._nodes.snapshot(),
                allocs=self._allocs.snapshot(),
                evals=self._evals.snapshot(),
                usage=self._usage.snapshot(),
                scaling=self._scaling.snapshot(),
                allocs_by_job=self._allocs_by_job.snapshot(),
                allocs_by_node=self._allocs_by_node.snapshot(),
                evals_by_job=self._evals_by_job.snapshot(),
                holds=self._holds.snapshot(),
                deployments=self._deployments.snapshot(),
                deployment_jobs=self._deployment_jobs.snapshot(),
                scheduler_config=self._scheduler_config.snapshot(),
            )

    # ------------------------------------------------------------------------------------
    # Deployments

    def _apply_upsert_deployments(self, change: UpsertDeployments, index: int) -> None:
        for deployment in change.deployments:
            key = (deployment.namespace, deployment.job_id)
            before = self._deployments.get(key) or ()
            kept = keep_deployment(before, deployment, index)
            self._deployments.set(key, kept)
            self._deployment_jobs.set(deployment.id, key)
            for dropped in {d.id for d in before} - {d.id for d in kept}:
                self._deployment_jobs.pop(dropped)
        self._touch("deployment", index)

    def _apply_scheduler_config(self, change: UpsertSchedulerConfig, index: int) -> None:
        old = self._scheduler_config.get(CONFIG_KEY)
        created = old.create_index if old is not None else index
        config = replace(change.config, create_index=created, modify_index=index)
        self._scheduler_config.set(CONFIG_KEY, config)
        self._touch("scheduler_config", index)

    # ------------------------------------------------------------------------------------
    # Nodes

    def _apply_upsert_nodes(self, change: UpsertNodes, index: int) -> None:
        for node in change.nodes:
            old = self._nodes.get(node.id)
            create = index if old is None else old.create_index
            self._nodes.set(node.id, stamped_node(node, create, index))
        self._touch("nodes", index)

    def _apply_delete_nodes(self, change: DeleteNodes, index: int) -> None:
        for node_id in change.node_ids:
            self._nodes.pop(node_id)
        self._touch("nodes", index)

    # ------------------------------------------------------------------------------------
    # Jobs

    def _apply_upsert_job(self, change: UpsertJob, index: int) -> None:
        job = change.job
        key = (job.namespace, job.id)
        existing = self._jobs.get(key)
        if change.keep_version:
            jmi = existing.job_modify_index if existing is not None else 0
        else:
            jmi = index
        for ev in change.evals:
            self._put_eval(ev, index, job_modify_index=jmi)
        if change.keep_version:
            if existing is not None:
                self._rewrite_version(existing, job, index)
        else:
            # The status reads the job's type, stop flag and template kind: stamping keeps them.
            status = compute_job_status(job, self._activity(key))
            if existing is None:
                new = registered_job(job, status, job.version, index, index, index)
            else:
                version, created = existing.version + 1, existing.create_index
                new = registered_job(job, status, version, created, index, index)
            self._jobs.set(key, new)
            self._versions.set(key, add_version(self._versions.get(key) or (), new))
            self._touch("jobs", index)
            self._touch("job_versions", index)
        for item in change.scaling_events:
            self._append_scaling(key, item.group, item.event, index)
        self._dirty.setdefault(key, False)

    def _rewrite_version(self, current: Job, job: Job, index: int) -> None:
        """keep_version: replace the row of job.version in place (the "set stable" API)."""
        key = (current.namespace, current.id)
        if job.version == current.version:
            new = replace(
                job,
                create_index=current.create_index,
                modify_index=index,
                job_modify_index=current.job_modify_index,
            )
            new = replace(new, status=compute_job_status(new, self._activity(key)))
            self._jobs.set(key, new)
            self._touch("jobs", index)
        else:
            row = self.job_version(current.namespace, current.id, job.version)
            if row is None:
                return
            new = replace(
                job,
                status=row.status,
                create_index=row.create_index,
                modify_index=index,
                job_modify_index=row.job_modify_index,
            )
        self._versions.set(key, replace_version(self._versions.get(key) or (), new))
        self._touch("job_versions", index)

    def _apply_purge_job(self, change: PurgeJob, index: int) -> None:
        key = (change.namespace, change.job_id)
        if self._jobs.pop(key) is not None:
            self._touch("jobs", index)
        if self._versions.pop(key) is not None:
            self._touch("job_versions", index)
        if self._scaling.pop(key) is not None:
            self._touch("scaling_events", index)
        for deployment in self._deployments.pop(key) or ():
            self._deployment_jobs.pop(deployment.id)
            self._touch("deployment", index)
        for ev in change.evals:
            self._put_eval(ev, index, job_modify_index=index)

    def _apply_scaling_event(self, change: AppendScalingEvent, index: int) -> None:
        self._append_scaling((change.namespace, change.job_id), change.group, change.event, index)

    def _append_scaling(self, key: JobKey, group: str, event: ScalingEvent, index: int) -> None:
        by_group = dict(self._scaling.get(key) or {})
        by_group[group] = (event, *by_group.get(group, ()))[:TRACKED_SCALING_EVENTS]
        self._scaling.set(key, by_group)
        self._touch("scaling_events", index)

    # ------------------------------------------------------------------------------------
    # Evaluations

    def _apply_upsert_evals(self, change: UpsertEvals, index: int) -> None:
        for ev in change.evals:
            self._put_eval(ev, index)

    def _put_eval(self, ev: Evaluation, index: int, job_modify_index: int | None = None) -> None:
        old = self._evals.get(ev.id)
        create = index if old is None else old.create_index
        if job_modify_index is None:
            new = stamped_eval(ev, create, index)
        else:
            new = stamped_job_eval(ev, create, index, job_modify_index)
        key = (new.namespace, new.job_id)
        if old is not None:
            self._forget_eval(old, keep_index=(old.namespace, old.job_id) == key)
        self._evals.set(new.id, new)
        self._evals_by_job.add(key, new.id)
        if not new.terminal():
            self._live_evals[key] = self._live_evals.get(key, 0) + 1
        if new.status is EvalStatus.BLOCKED:
            self._blocked.setdefault(key, {})[new.id] = None
            self._hold_table.add(new)
        self._dirty.setdefault(key, False)
        self._touch("evals", index)
        if new.status is EvalStatus.COMPLETE and not new.failed_tg_allocs:
            self._cancel_blocked(new, index)

    def _forget_eval(self, old: Evaluation, keep_index: bool = False) -> None:
        """Undo `old`'s counters, and its index entry unless the update keeps its job."""
        key = (old.namespace, old.job_id)
        if not old.terminal():
            _decrement(self._live_evals, key)
        if old.status is EvalStatus.BLOCKED:
            self._hold_table.remove(old)
            blocked = self._blocked.get(key)
            if blocked is not None:
                blocked.pop(old.id, None)
                if not blocked:
                    del self._blocked[key]
        if not keep_index:
            self._evals_by_job.discard(key, old.id)
            self._dirty.setdefault(key, False)

    def _cancel_blocked(self, done: Evaluation, index: int) -> None:
        key = (done.namespace, done.job_id)
        for eval_id in list(self._blocked.get(key, ())):
            blocked = self._evals[eval_id]
            canceled = replace(
                blocked,
                status=EvalStatus.CANCELED,
                status_description=f'evaluation "{done.id}" successful',
                modify_time=done.modify_time,
            )
            self._put_eval(canceled, index)

    def _apply_delete_evals(self, change: DeleteEvals, index: int) -> None:
        for eval_id in change.eval_ids:
            old = self._evals.get(eval_id)
            if old is not None:
                self._forget_eval(old)
                self._evals.pop(eval_id)
                self._dirty[(old.namespace, old.job_id)] = True
                self._touch("evals", index)
        for alloc_id in change.alloc_ids:
            alloc = self._allocs.get(alloc_id)
            if alloc is not None:
                self._unindex_alloc(alloc)
                self._allocs.pop(alloc_id)
                self._dirty[(alloc.namespace, alloc.job_id)] = True
                self._touch("allocs", index)

    # ------------------------------------------------------------------------------------
    # Allocations

    def stamped(self, change: StateChange, index: int) -> StateChange:
        """`change` as the writer commits it at `index`: allocations stamped (see
        stamp_allocs), anything else as is."""
        return self.stamp_allocs(change, index) if isinstance(change, UpsertAllocs) else change

    def stamp_allocs(self, change: UpsertAllocs, index: int) -> UpsertAllocs:
        """`change` with its records exactly as applying it at `index` will store them.

        The leader stamps a plan's allocations once, before the entry is written: every
        replica then finds them already stamped and stores them as they are, instead of
        copying each record again (one copy per allocation per follower)."""
        allocs = self._allocs
        stamped = tuple(
            stamped_alloc(alloc, allocs.get(alloc.id), index) for alloc in change.allocs
        )
        return UpsertAllocs(allocs=stamped, evals=change.evals)

    def _apply_upsert_allocs(self, change: UpsertAllocs, index: int) -> None:
        for ev in change.evals:
            self._put_eval(ev, index)
        allocs = self._allocs
        placed: list[Allocation] = []  # new records stored, not yet indexed
        for alloc in change.allocs:
            slot = allocs.slot(alloc.id)
            old = allocs.get_at(slot, alloc.id)
            new = stamped_alloc(alloc, old, index)
            if old is None:
                allocs.set_at(slot, new.id, new)
                placed.append(new)
                continue
            if placed:  # indexes follow the log's order
                self._index_placed(placed)
                placed = []
            self._write_alloc(old, new, slot)
        if placed:
            self._index_placed(placed)
        if change.allocs:
            self._touch("allocs", index)

    def _index_placed(self, placed: list[Allocation]) -> None:
        """Index new records (already stored) as `_write_alloc` would one by one, a plan's
        worth at a time: each node's and each job's member set is written once, and usage
        once per node and shape."""
        self._index_members(placed)
        # id(resources) -> (resources, node -> live allocations): a plan's placements of
        # one group share their resources record.
        shapes: dict[int, tuple[AllocatedResources, dict[str, int]]] = {}
        live: dict[JobKey, int] = {}
        usage = self._usage_table
        for alloc in placed:
            key = (alloc.namespace, alloc.job_id)
            self._dirty.setdefault(key, False)
            if alloc.terminal():
                continue
            live[key] = live.get(key, 0) + 1
            res = alloc.allocated_resources
            if res.devices:  # device instances are counted per allocation
                usage.add(alloc)
                continue
            shape = shapes.get(id(res))
            if shape is None:
                shape = shapes[id(res)] = (res, {})
            per_node = shape[1]
            per_node[alloc.node_id] = per_node.get(alloc.node_id, 0) + 1
        for res, per_node in shapes.values():
            usage.add_many(res, per_node)
        live_allocs = self._live_allocs
        for key, n in live.items():
            live_allocs[key] = live_allocs.get(key, 0) + n

    def _index_members(self, records: list[Allocation]) -> None:
        """Add new records to the by-node and by-job indexes, in order: each node's and
        each job's member set is written once."""
        by_node: dict[str, list[str]] = {}
        by_job: dict[JobKey, list[str]] = {}
        for alloc in records:
            node_ids = by_node.get(alloc.node_id)
            if node_ids is None:
                node_ids = by_node[alloc.node_id] = []
            node_ids.append(alloc.id)
            key = (alloc.namespace, alloc.job_id)
            job_ids = by_job.get(key)
            if job_ids is None:
                job_ids = by_job[key] = []
            job_ids.append(alloc.id)
        for node_id, ids in by_node.items():
            self._allocs_by_node.add_many(node_id, ids)
        for key, ids in by_job.items():
            self._allocs_by_job.add_many(key, ids)

    def _apply_alloc_rows(self, change: UpsertAllocRows, index: int) -> None:
        """The compact form (decode_entry's `compact`): this store builds every record."""
        self._apply_upsert_allocs(change.expanded(), index)

    def _apply_client_rows(self, change: UpdateClientStatusRows, index: int) -> None:
        self._apply_client_updates(change.expanded(), index)

    def _apply_client_updates(self, change: UpdateAllocsClientStatus, index: int) -> None:
        touched = False
        for update in change.updates:
            touched = self._apply_client_update(update, index) or touched
        if touched:
            self._touch("allocs", index)

    def _apply_client_update(self, update: AllocClientUpdate, index: int) -> bool:
        """One client report at `index`; False if its allocation is unknown."""
        allocs = self._allocs
        slot = allocs.slot(update.alloc_id)
        old = allocs.get_at(slot, update.alloc_id)
        if old is None:
            return False
        new = client_updated(
            old, update.client_status, update.client_description, index, update.modify_time
        )
        if update.client_status not in CLIENT_TERMINAL and old.client_status not in CLIENT_TERMINAL:
            # The common report (pending -> running): the allocation stays live where it
            # is, so usage, indexes and live counters are unchanged.
            allocs.set_at(slot, new.id, new)
            self._dirty.setdefault((new.namespace, new.job_id), False)
        else:
            self._write_alloc(old, new, slot)
        return True

    def _write_alloc(self, old: Allocation | None, new: Allocation, slot: int = -1) -> None:
        """Store `new` over `old`, keeping indexes, usage and job counters in step."""
        if slot < 0:
            slot = self._allocs.slot(new.id)
        self._allocs.set_at(slot, new.id, new)
        key = (new.namespace, new.job_id)
        new_live = not new.terminal()
        if old is None:
            self._allocs_by_node.add(new.node_id, new.id)
            self._allocs_by_job.add(key, new.id)
            if new_live:
                self._usage_table.add(new)
                self._live_allocs[key] = self._live_allocs.get(key, 0) + 1
        else:
            old_live = not old.terminal()
            old_key = (old.namespace, old.job_id)
            same_place = old.node_id == new.node_id and old_key == key
            if (
                old_live
                and new_live
                and same_place
                and old.allocated_resources == new.allocated_resources
            ):
                pass  # the common in-place update: usage and counters unchanged
            else:
                if not same_place:
                    self._allocs_by_node.discard(old.node_id, old.id)
                    self._allocs_by_job.discard(old_key, old.id)
                    self._allocs_by_node.add(new.node_id, new.id)
                    self._allocs_by_job.add(key, new.id)
                    self._dirty.setdefault(old_key, False)
                if old_live:
                    self._usage_table.remove(old)
                    _decrement(self._live_allocs, old_key)
                if new_live:
                    self._usage_table.add(new)
                    self._live_allocs[key] = self._live_allocs.get(key, 0) + 1
        self._dirty.setdefault(key, False)

    def _unindex_alloc(self, old: Allocation) -> None:
        key = (old.namespace, old.job_id)
        self._allocs_by_node.discard(old.node_id, old.id)
        self._allocs_by_job.discard(key, old.id)
        if not old.terminal():
            self._usage_table.remove(old)
            _decrement(self._live_allocs, key)

    # ------------------------------------------------------------------------------------

    def _touch(self, table: str, index: int) -> None:
        self._table_index[table] = index


def _decrement(counter: dict[JobKey, int], key: JobKey) -> None:
    n = counter.get(key, 0) - 1
    if n > 0:
        counter[key] = n
    else:
        counter.pop(key, None)
