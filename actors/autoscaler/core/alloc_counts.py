"""Live allocations per task group, counted from the state log without building records.

The autoscaler needs, of every allocation, only which group it belongs to and whether it
runs or is still starting (a target's `count` and `starting`). Its replica reads the log
compact (`decode_entry(..., compact=True)`) and keeps no allocation records; this table is
fed the same entries and keeps one small row per live allocation (desired to run, not
finished on its client): a plan's groups are read from their shared prototype and a row's
ID, a client report from its row. An allocation leaves the table when it stops, finishes
or is garbage-collected, so the table is as large as the cluster's live allocations.

It also sums the live allocations' allocated CPU and memory per node (`node_load`), as the
state's `node_usage` does from records, for the cluster signals (`percentage-allocated_*`,
the `least_busy` / `empty` node selectors): `is_system` says whether a job is a system job,
so that `empty_ignore_system` can ignore those allocations.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from contracts.alloc_batch import ROW_ID, ROW_NODE_ID
from contracts.allocation import CLIENT_TERMINAL, Allocation, ClientStatus, DesiredStatus
from contracts.job import Job
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
SystemJob = Callable[[str, str], bool]  # (namespace, job id) -> is a system job


@dataclass(frozen=True, slots=True)
class NodeLoad:
    """What a node's live allocations hold: allocated CPU (MHz) and memory (MB), how many,
    and how many of them belong to system jobs."""

    cpu: int = 0
    memory_mb: int = 0
    allocs: int = 0
    system_allocs: int = 0


EMPTY_LOAD = NodeLoad()
_Live = tuple[GroupKey, bool, str, int, int, bool]  # group, running, node, cpu, memory, system


def _never_system(namespace: str, job_id: str) -> bool:
    return False


class _Jobs(Protocol):
    def job(self, namespace: str, job_id: str) -> Job | None: ...


def system_job(state: _Jobs, namespace: str, job_id: str) -> bool:
    """Whether a job of `state` is a system job (its allocations: empty_ignore_system)."""
    job = state.job(namespace, job_id)
    return job is not None and job.type in ("system", "sysbatch")


# The changes AllocCounts reads (and the only ones it needs of the log).
ALLOC_CHANGES = (
    UpsertAllocs,
    UpsertAllocRows,
    UpdateAllocsClientStatus,
    UpdateClientStatusRows,
    DeleteEvals,
)


class AllocCounts:
    def __init__(self, is_system: SystemJob = _never_system) -> None:
        self._live: dict[str, _Live] = {}
        self._counts: dict[GroupKey, list[int]] = {}  # group -> [running, starting]
        self._nodes: dict[str, list[int]] = {}  # node -> [cpu, memory, allocs, system allocs]
        self.is_system = is_system

    def node_load(self, node_id: str) -> NodeLoad:
        found = self._nodes.get(node_id)
        return NodeLoad(*found) if found is not None else EMPTY_LOAD

    def counts(self, namespace: str, job_id: str, group: str) -> tuple[int, int]:
        """(running, starting) allocations of a group."""
        found = self._counts.get((namespace, job_id, group))
        return (found[0], found[1]) if found is not None else (0, 0)

    def __len__(self) -> int:
        return len(self._live)

    def clear(self) -> None:
        """Forget every allocation (before the log is read again from a snapshot)."""
        self._live.clear()
        self._counts.clear()
        self._nodes.clear()

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
                res = proto.allocated_resources
                system = live and self.is_system(proto.namespace, proto.job_id)
                for row in rows.rows:
                    where = (row[ROW_NODE_ID], res.cpu, res.memory_mb, system)
                    self._set(row[ROW_ID], key, live, running, where)
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
            res = a.allocated_resources
            system = live and self.is_system(a.namespace, a.job_id)
            where = (a.node_id, res.cpu, res.memory_mb, system)
            self._set(a.id, key, live, a.client_status is ClientStatus.RUNNING, where)

    def _reports(self, updates: Iterable[AllocClientUpdate]) -> None:
        for update in updates:
            self._report(update.alloc_id, update.client_status)

    def _report(self, alloc_id: str, status: ClientStatus) -> None:
        known = self._live.get(alloc_id)
        if known is None:  # not live (or never seen): a report does not revive it
            return
        live = status not in CLIENT_TERMINAL
        self._set(alloc_id, known[0], live, status is ClientStatus.RUNNING, known[2:])

    def _set(
        self,
        alloc_id: str,
        key: GroupKey,
        live: bool,
        running: bool,
        where: tuple[str, int, int, bool],
    ) -> None:
        self._drop(alloc_id)
        if not live:
            return
        self._live[alloc_id] = (key, running, *where)
        counts = self._counts.get(key)
        if counts is None:
            counts = self._counts[key] = [0, 0]
        counts[0 if running else 1] += 1
        self._charge(where, 1)

    def _drop(self, alloc_id: str) -> None:
        old = self._live.pop(alloc_id, None)
        if old is None:
            return
        key, running = old[0], old[1]
        counts = self._counts[key]
        counts[0 if running else 1] -= 1
        if counts == [0, 0]:
            del self._counts[key]
        self._charge(old[2:], -1)

    def _charge(self, where: tuple[str, int, int, bool], sign: int) -> None:
        node_id, cpu, memory, system = where
        load = self._nodes.get(node_id)
        if load is None:
            load = self._nodes[node_id] = [0, 0, 0, 0]
        load[0] += sign * cpu
        load[1] += sign * memory
        load[2] += sign
        load[3] += sign * system
        if load[2] == 0:
            del self._nodes[node_id]


def _live(desired: DesiredStatus, client: ClientStatus) -> bool:
    return desired is DesiredStatus.RUN and client not in CLIENT_TERMINAL
