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

from collections import Counter
from collections.abc import Iterable, Iterator
from itertools import repeat
from operator import itemgetter
from typing import Any

from actors.state.job_status import JobActivity
from actors.state.reader import JobKey
from actors.state.snapshot import StateSnapshot
from actors.state.stamping import stamped_alloc
from actors.state.store import StateStore
from contracts.alloc_batch import ROW_CREATE_INDEX, ROW_ID, ROW_NODE_ID, AllocRows
from contracts.allocation import CLIENT_TERMINAL, Allocation
from contracts.state_log import (
    AllocClientUpdate,
    ClientUpdateRows,
    DeleteEvals,
    UpdateAllocsClientStatus,
    UpdateClientStatusRows,
    UpsertAllocRows,
    UpsertAllocs,
)

# A queued item, with the index it was committed at: a new allocation's record (index 0:
# its indexes are in the record), a group of new allocations not yet built (AllocRows), a
# client report, or a run of reports of one job (ClientUpdateRows).
_Queued = tuple[Allocation | AllocRows | AllocClientUpdate | ClientUpdateRows, int]
_id_of = itemgetter(ROW_ID)
_node_id_of = itemgetter(ROW_NODE_ID)
_create_index_of = itemgetter(ROW_CREATE_INDEX)


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

    def __init__(self, **shape: int) -> None:
        """`shape`: StateStore's shard counts."""
        super().__init__(**shape)
        self._queued: dict[JobKey, list[_Queued]] = {}  # oldest job first
        # New allocations not yet filed: their record, or their group's prototype (which
        # has everything a client report asks about: the job, the statuses).
        self._queued_allocs: dict[str, Allocation] = {}
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

    def unfiled_allocations(self) -> int:
        """New allocations applied (usage counted) whose records are not filed yet."""
        return len(self._queued_allocs)

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
            if isinstance(item, ClientUpdateRows):
                for update in item.expand():
                    self._apply_client_update(update, index)
            elif isinstance(item, AllocRows):
                self._file_rows(item, index)
            elif isinstance(item, Allocation):
                del queued_allocs[item.id]
                self._file_alloc(item)
            else:
                self._apply_client_update(item, index)

    def _file_rows(self, group: AllocRows, index: int) -> None:
        """Store a queued group's records; one index write per node and one for the job."""
        queued_allocs, allocs = self._queued_allocs, self._allocs
        records = [stamped_alloc(alloc, None, index) for alloc in group.expand()]
        for alloc in records:
            del queued_allocs[alloc.id]
            allocs.set(alloc.id, alloc)
        self._index_members(records)

    def _file_alloc(self, alloc: Allocation) -> None:
        """Store a queued new allocation: its usage and counters were applied when queued."""
        self._allocs.set(alloc.id, alloc)
        self._allocs_by_node.add(alloc.node_id, alloc.id)
        self._allocs_by_job.add((alloc.namespace, alloc.job_id), alloc.id)

    # -- applying: allocations --------------------------------------------------------------

    def _apply_upsert_allocs(self, change: UpsertAllocs, index: int) -> None:
        for ev in change.evals:
            self._put_eval(ev, index)
        for alloc in change.allocs:
            self._upsert_alloc(alloc, index)
        if change.allocs:
            self._touch("allocs", index)

    def _apply_alloc_rows(self, change: UpsertAllocRows, index: int) -> None:
        """The compact form: a group's new allocations are queued as one item, their usage
        counted per node, and their records built when the job settles."""
        for ev in change.evals:
            self._put_eval(ev, index)
        touched = False
        seen: set[str] = set()  # IDs of this entry so far (see _queue_rows)
        for group in change.groups:
            rows = group.rows
            if not rows:
                continue
            touched = True
            if set(map(_create_index_of, rows)) == {index}:
                self._queue_rows(group, index, seen)  # a plan's placements: all new
                continue
            run: list[list[Any]] = []
            for row in rows:
                if row[ROW_CREATE_INDEX] == index:
                    run.append(row)
                    continue
                if run:  # keep log order: queue the new ones before this update
                    self._queue_rows(group.subset(run), index, seen)
                    run = []
                seen.add(row[ROW_ID])
                self._upsert_alloc(group.subset([row]).expand()[0], index)
            if run:
                self._queue_rows(group.subset(run), index, seen)
        if touched:
            self._touch("allocs", index)

    def _upsert_alloc(self, alloc: Allocation, index: int) -> None:
        key = (alloc.namespace, alloc.job_id)
        if (
            alloc.create_index == index
            and alloc.id not in self._queued_allocs
            and self._allocs.get(alloc.id) is None
        ):
            self._queue_new(key, stamped_alloc(alloc, None, index))
            return
        # An update of an existing allocation: its job's queued work goes first.
        if key in self._queued:
            self._settle(key)
        old_queued = self._queued_allocs.get(alloc.id)
        if old_queued is not None:  # filed under another job (should not happen)
            self._settle((old_queued.namespace, old_queued.job_id))
        allocs = self._allocs
        slot = allocs.slot(alloc.id)
        old = allocs.get_at(slot, alloc.id)
        self._write_alloc(old, stamped_alloc(alloc, old, index), slot)

    def _queue_new(self, key: JobKey, alloc: Allocation) -> None:
        if not alloc.terminal():
            self._usage_table.add(alloc)
            self._live_allocs[key] = self._live_allocs.get(key, 0) + 1
        self._queued_allocs[alloc.id] = alloc
        self._queued_new[key] = self._queued_new.get(key, 0) + 1
        self._enqueue(key, (alloc, 0))
        self._dirty.setdefault(key, False)

    def _queue_rows(self, group: AllocRows, index: int, seen: set[str]) -> None:
        """Queue new allocations of one group without building their records. They are new
        because the leader stamped them so (create_index == the entry's index): stamping
        keeps an existing record's create_index, which is always older. But an ID twice in
        one entry is stamped new both times (the second is an update of the first): such
        rows, and any already queued, take the checked path one record at a time. `seen`:
        the IDs of the entry's earlier rows."""
        proto, rows = group.proto, group.rows
        ids = list(map(_id_of, rows))
        unique = set(ids)
        if (
            len(unique) != len(ids)
            or not seen.isdisjoint(unique)
            or not self._queued_allocs.keys().isdisjoint(unique)
        ):
            seen |= unique
            for alloc in group.expand():
                self._upsert_alloc(alloc, index)
            return
        seen |= unique
        key = (proto.namespace, proto.job_id)
        if not proto.terminal():  # statuses are shared by the group
            resources = proto.allocated_resources
            if resources.devices:  # device instances are counted per allocation
                for alloc in group.expand():
                    self._usage_table.add(alloc)
            else:
                self._usage_table.add_many(resources, Counter(map(_node_id_of, rows)))
            self._live_allocs[key] = self._live_allocs.get(key, 0) + len(rows)
        # What a client report needs to know of a queued allocation (its job, its status)
        # is in the group's prototype.
        self._queued_allocs.update(zip(ids, repeat(proto)))
        self._queued_new[key] = self._queued_new.get(key, 0) + len(rows)
        self._enqueue(key, (group, index))
        self._dirty.setdefault(key, False)

    def _enqueue(self, key: JobKey, item: _Queued) -> None:
        items = self._queued.get(key)
        if items is None:
            items = self._queued[key] = []
        items.append(item)

    # -- applying: client reports -----------------------------------------------------------

    def _apply_client_updates(self, change: UpdateAllocsClientStatus, index: int) -> None:
        if self._apply_reports(change.updates, index):
            self._touch("allocs", index)

    def _apply_reports(self, updates: Iterable[AllocClientUpdate], index: int) -> bool:
        """Queue non-terminal reports under their job, apply the others now; False if no
        report was about a known allocation."""
        touched = False
        for update in updates:
            alloc = self._known(update.alloc_id)
            if alloc is None:
                continue  # unknown allocation: ignored, as by the eager store
            touched = True
            if update.client_status in CLIENT_TERMINAL or alloc.client_status in CLIENT_TERMINAL:
                self._report_now(alloc, update, index)
            else:
                self._enqueue((alloc.namespace, alloc.job_id), (update, index))
        return touched

    def _known(self, alloc_id: str) -> Allocation | None:
        """A known allocation's record, or its queued group's prototype (same job and
        statuses); None if unknown."""
        return self._queued_allocs.get(alloc_id) or self._allocs.get(alloc_id)

    def _apply_client_rows(self, change: UpdateClientStatusRows, index: int) -> None:
        """The compact form: a run's reports are queued per job as one item each."""
        touched = False
        known = self._known
        for group in change.groups:
            if group.proto.client_status in CLIENT_TERMINAL:
                touched = self._apply_reports(group.expand(), index) or touched
                continue
            by_job: dict[JobKey, list[list[str]]] = {}
            for row in group.rows:
                alloc = known(row[0])
                if alloc is None:
                    continue  # unknown allocation: ignored, as by the eager store
                touched = True
                key = (alloc.namespace, alloc.job_id)
                if alloc.client_status in CLIENT_TERMINAL:
                    # Back into the live set: applied now, after what this run queued.
                    self._enqueue_reports(group, by_job, index)
                    by_job = {}
                    self._report_now(alloc, group.subset([row]).expand()[0], index)
                    continue
                job_rows = by_job.get(key)
                if job_rows is None:
                    job_rows = by_job[key] = []
                job_rows.append(row)
            self._enqueue_reports(group, by_job, index)
        if touched:
            self._touch("allocs", index)

    def _enqueue_reports(
        self, group: ClientUpdateRows, by_job: dict[JobKey, list[list[str]]], index: int
    ) -> None:
        for key, rows in by_job.items():
            self._enqueue(key, (group.subset(rows), index))

    def _report_now(self, alloc: Allocation, update: AllocClientUpdate, index: int) -> None:
        """A report that moves the allocation out of (or back into) the live set: usage
        changes now, in order, so the job's queued work goes first."""
        key = (alloc.namespace, alloc.job_id)
        if key in self._queued:
            self._settle(key)
        self._apply_client_update(update, index)

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
