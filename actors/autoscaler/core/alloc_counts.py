"""Live allocations per task group, counted from the state log without building records.

The autoscaler needs, of every allocation, only which group it belongs to and whether it
runs or is still starting (a target's `count` and `starting`). Its replica reads the log
compact (`decode_entry(..., compact=True)`) and keeps no allocation records; this table is
fed the same entries and keeps one small row per live allocation (desired to run, not
finished on its client): a plan's groups are read from their shared prototype and a row's
ID, a client report from its row. An allocation leaves the table when it stops, finishes
or is garbage-collected, so the table is as large as the cluster's live allocations.
"""

from __future__ import annotations

from collections.abc import Iterable

from contracts.alloc_batch import ROW_ID
from contracts.allocation import CLIENT_TERMINAL, Allocation, ClientStatus, DesiredStatus
from contracts.state_log import (
    AllocClientUpdate,
    DeleteEvals,
    StateChange,
    UpdateAllocsClientStatus,
    UpdateClientStatusRows,
    UpsertAllocRows,
    UpsertAllocs,
)

GroupKey = tuple[str, str, str]  # (namespace, job id, group)


# The changes AllocCounts reads (and the only ones it needs of the log).
ALLOC_CHANGES = (
    UpsertAllocs,
    UpsertAllocRows,
    UpdateAllocsClientStatus,
    UpdateClientStatusRows,
    DeleteEvals,
)


class AllocCounts:
    def __init__(self) -> None:
        self._live: dict[str, tuple[GroupKey, bool]] = {}  # alloc id -> (group, running)
        self._counts: dict[GroupKey, list[int]] = {}  # group -> [running, starting]

    def counts(self, namespace: str, job_id: str, group: str) -> tuple[int, int]:
        """(running, starting) allocations of a group."""
        found = self._counts.get((namespace, job_id, group))
        return (found[0], found[1]) if found is not None else (0, 0)

    def __len__(self) -> int:
        return len(self._live)

    def is_live(self, alloc_id: str) -> bool:
        """Placed and not terminal (neither stopped by the scheduler nor finished)."""
        return alloc_id in self._live

    def apply(self, change: StateChange) -> None:
        if isinstance(change, UpsertAllocRows):
            for rows in change.groups:
                proto = rows.proto
                key = (proto.namespace, proto.job_id, proto.task_group)
                live = _live(proto.desired_status, proto.client_status)
                running = proto.client_status is ClientStatus.RUNNING
                for row in rows.rows:
                    self._set(row[ROW_ID], key, live, running)
        elif isinstance(change, UpsertAllocs):
            self._put_allocs(change.allocs)
        elif isinstance(change, UpdateClientStatusRows):
            for group in change.groups:
                status = group.proto.client_status
                for row in group.rows:
                    self._report(row[0], status)
        elif isinstance(change, UpdateAllocsClientStatus):
            self._reports(change.updates)
        elif isinstance(change, DeleteEvals):
            for alloc_id in change.alloc_ids:
                self._drop(alloc_id)

    def _put_allocs(self, allocs: Iterable[Allocation]) -> None:
        for a in allocs:
            key = (a.namespace, a.job_id, a.task_group)
            live = _live(a.desired_status, a.client_status)
            self._set(a.id, key, live, a.client_status is ClientStatus.RUNNING)

    def _reports(self, updates: Iterable[AllocClientUpdate]) -> None:
        for update in updates:
            self._report(update.alloc_id, update.client_status)

    def _report(self, alloc_id: str, status: ClientStatus) -> None:
        known = self._live.get(alloc_id)
        if known is None:  # not live (or never seen): a report does not revive it
            return
        live = status not in CLIENT_TERMINAL
        self._set(alloc_id, known[0], live, status is ClientStatus.RUNNING)

    def _set(self, alloc_id: str, key: GroupKey, live: bool, running: bool) -> None:
        self._drop(alloc_id)
        if not live:
            return
        self._live[alloc_id] = (key, running)
        counts = self._counts.get(key)
        if counts is None:
            counts = self._counts[key] = [0, 0]
        counts[0 if running else 1] += 1

    def _drop(self, alloc_id: str) -> None:
        old = self._live.pop(alloc_id, None)
        if old is None:
            return
        key, running = old
        counts = self._counts[key]
        counts[0 if running else 1] -= 1
        if counts == [0, 0]:
            del self._counts[key]


def _live(desired: DesiredStatus, client: ClientStatus) -> bool:
    return desired is DesiredStatus.RUN and client not in CLIENT_TERMINAL
