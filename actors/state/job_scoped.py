"""A follower store for scheduler workers: allocation records are filed per job and settled
only when an evaluation of that job reads them.

Every worker applies every committed allocation and every client report, yet a scheduler
evaluating job J reads only J's allocations, plus node usage over all of them (see the
`state.` reads in actors/worker/core). So this store applies what the whole cluster needs at
once (node usage and the job's live-allocation counters, exactly as the eager store does) and
defers the rest per job, in log order:

- a new allocation (stamped by the leader with create_index == the entry's index) is counted
  in usage and its job's counters, and its record is queued under its job;
- a non-terminal client report (pending -> running, the bulk of the log) is queued under its
  allocation's job, with the index it was committed at.

Queued work of a job is applied, in order and at its original indexes, before anything else
touches that job's allocations (an update or stop of one of them, a terminal report, a GC
deletion), before a read of them (`snapshot_for_job`, `allocs_by_job` on the live store), and
in the background when the worker is idle (`settle_some`). Settled, the records equal what
the eager store holds; the tests replay the same log into both and compare.

A snapshot from `snapshot_for_job(J)` answers allocation reads for J only and raises
`UnsettledRead` for any other allocation read, so a scheduler change that starts reading
other jobs' allocations fails loudly instead of reading a stale table. `snapshot()` settles
everything first and is complete.
"""

from __future__ import annotations

from collections.abc import Iterator

from actors.state.job_status import JobActivity
from actors.state.reader import JobKey
from actors.state.store import StateSnapshot, StateStore, stamped_alloc
from contracts.allocation import CLIENT_TERMINAL, Allocation
from contracts.state_log import (
    AllocClientUpdate,
    DeleteEvals,
    UpdateAllocsClientStatus,
    UpsertAllocs,
)

# A queued item: a new allocation's record (index 0: its indexes are in the record), or a
# client report with the index it was committed at.
_Queued = tuple[Allocation | AllocClientUpdate, int]


class UnsettledRead(RuntimeError):
    """A job-scoped snapshot was asked for allocations it did not settle."""


class JobScopedSnapshot(StateSnapshot):
    """A snapshot whose allocation tables are complete for one job only (see module doc)."""

    __slots__ = ("_job",)

    def __init__(self, base: StateSnapshot, job: JobKey) -> None:
        for name in StateSnapshot.__slots__:
            setattr(self, name, getattr(base, name))
        self._job = job

    def allocs_by_job(self, namespace: str, job_id: str) -> list[Allocation]:
        if (namespace, job_id) != self._job:
            raise self._unsettled(f"allocations of job {namespace}/{job_id}")
        return StateSnapshot.allocs_by_job(self, namespace, job_id)

    def alloc(self, alloc_id: str) -> Allocation | None:
        raise self._unsettled(f"allocation {alloc_id}")

    def allocs(self) -> Iterator[Allocation]:
        raise self._unsettled("every allocation")

    def allocs_by_node(self, node_id: str) -> list[Allocation]:
        raise self._unsettled(f"allocations on node {node_id}")

    def alloc_count(self) -> int:
        raise self._unsettled("the allocation count")

    def _unsettled(self, what: str) -> UnsettledRead:
        namespace, job_id = self._job
        return UnsettledRead(
            f"this snapshot settled the allocations of job {namespace}/{job_id} only, "
            f"not {what}: take a full snapshot() instead"
        )


class JobScopedStore(StateStore):
    __slots__ = ("_queued", "_queued_allocs", "_queued_new")

    def __init__(self, shards: int = 256, alloc_shards: int = 16384, node_shards: int = 1) -> None:
        super().__init__(shards, alloc_shards, node_shards)
        self._queued: dict[JobKey, list[_Queued]] = {}  # oldest job first
        self._queued_allocs: dict[str, Allocation] = {}  # new allocations not yet filed
        self._queued_new: dict[JobKey, int] = {}  # per job: how many of those

    # -- reads ------------------------------------------------------------------------------

    def snapshot_for_job(self, namespace: str, job_id: str) -> JobScopedSnapshot:
        """A snapshot for scheduling one job: that job's queued work is applied first."""
        with self._lock:
            self.settle_job(namespace, job_id)
            return JobScopedSnapshot(StateStore.snapshot(self), (namespace, job_id))

    def snapshot(self) -> StateSnapshot:
        with self._lock:
            self.settle_all()
            return StateStore.snapshot(self)

    def allocs_by_job(self, namespace: str, job_id: str) -> list[Allocation]:
        self.settle_job(namespace, job_id)
        return StateStore.allocs_by_job(self, namespace, job_id)

    def alloc(self, alloc_id: str) -> Allocation | None:
        self.settle_all()
        return StateStore.alloc(self, alloc_id)

    def allocs(self) -> Iterator[Allocation]:
        self.settle_all()
        return StateStore.allocs(self)

    def allocs_by_node(self, node_id: str) -> list[Allocation]:
        self.settle_all()
        return StateStore.allocs_by_node(self, node_id)

    def alloc_count(self) -> int:
        self.settle_all()
        return StateStore.alloc_count(self)

    def queued_jobs(self) -> int:
        return len(self._queued)

    # -- settling ---------------------------------------------------------------------------

    def settle_job(self, namespace: str, job_id: str) -> None:
        self._settle((namespace, job_id))

    def settle_all(self) -> None:
        while self._queued:
            self._settle(next(iter(self._queued)))

    def settle_some(self, max_items: int) -> int:
        """Settle the oldest queued jobs, about `max_items` items in all (idle-time work).
        Returns how many items were settled."""
        done = 0
        with self._lock:
            while self._queued and done < max_items:
                key = next(iter(self._queued))
                done += len(self._queued[key])
                self._settle(key)
        return done

    def _settle(self, key: JobKey) -> None:
        items = self._queued.pop(key, None)
        if items is None:
            return
        self._queued_new.pop(key, None)
        queued_allocs = self._queued_allocs
        for item, index in items:
            if isinstance(item, Allocation):
                del queued_allocs[item.id]
                self._file_alloc(item)
            else:
                self._apply_client_update(item, index)

    def _file_alloc(self, alloc: Allocation) -> None:
        """Store a queued new allocation: its usage and counters were applied when queued."""
        self._allocs.set(alloc.id, alloc)
        self._allocs_by_node.add(alloc.node_id, alloc.id)
        self._allocs_by_job.add((alloc.namespace, alloc.job_id), alloc.id)

    # -- applying ---------------------------------------------------------------------------

    def _apply_upsert_allocs(self, change: UpsertAllocs, index: int) -> None:
        for ev in change.evals:
            self._put_eval(ev, index)
        allocs = self._allocs
        queued = self._queued
        queued_allocs = self._queued_allocs
        for alloc in change.allocs:
            key = (alloc.namespace, alloc.job_id)
            if (
                alloc.create_index == index
                and alloc.id not in queued_allocs
                and allocs.get(alloc.id) is None
            ):
                self._queue_new(key, stamped_alloc(alloc, None, index))
                continue
            # An update of an existing allocation: its job's queued work goes first.
            if key in queued:
                self._settle(key)
            old_queued = queued_allocs.get(alloc.id)
            if old_queued is not None:  # filed under another job (should not happen)
                self._settle((old_queued.namespace, old_queued.job_id))
            slot = allocs.slot(alloc.id)
            old = allocs.get_at(slot, alloc.id)
            self._write_alloc(old, stamped_alloc(alloc, old, index), slot)
        if change.allocs:
            self._touch("allocs", index)

    def _queue_new(self, key: JobKey, alloc: Allocation) -> None:
        if not alloc.terminal():
            self._usage_table.add(alloc)
            self._live_allocs[key] = self._live_allocs.get(key, 0) + 1
        self._queued_allocs[alloc.id] = alloc
        self._queued_new[key] = self._queued_new.get(key, 0) + 1
        self._enqueue(key, (alloc, 0))
        self._dirty.setdefault(key, False)

    def _enqueue(self, key: JobKey, item: _Queued) -> None:
        items = self._queued.get(key)
        if items is None:
            items = self._queued[key] = []
        items.append(item)

    def _apply_client_updates(self, change: UpdateAllocsClientStatus, index: int) -> None:
        touched = False
        queued = self._queued
        queued_allocs = self._queued_allocs
        allocs = self._allocs
        for update in change.updates:
            alloc = queued_allocs.get(update.alloc_id) or allocs.get(update.alloc_id)
            if alloc is None:
                continue  # unknown allocation: ignored, as by the eager store
            touched = True
            key = (alloc.namespace, alloc.job_id)
            if update.client_status in CLIENT_TERMINAL or alloc.client_status in CLIENT_TERMINAL:
                # It leaves (or re-enters) the live set: usage changes now, in order.
                if key in queued:
                    self._settle(key)
                self._apply_client_update(update, index)
                continue
            self._enqueue(key, (update, index))
        if touched:
            self._touch("allocs", index)

    def _apply_delete_evals(self, change: DeleteEvals, index: int) -> None:
        if change.alloc_ids:
            self.settle_all()  # garbage collection: rare, and any job's allocations may go
        super()._apply_delete_evals(change, index)

    def _activity(self, key: JobKey) -> JobActivity:
        activity = super()._activity(key)
        queued = self._queued_new.get(key, 0)
        if not queued:
            return activity
        return JobActivity(
            live_allocs=activity.live_allocs,
            total_allocs=activity.total_allocs + queued,
            live_evals=activity.live_evals,
            total_evals=activity.total_evals,
        )
