"""The replicated state log: typed changes, applied identically by the leader and replicas.

Every change carries all the data its application needs (records, times, ids): applying an
entry must never consult a clock or a random source, so that every replica that applies the
same entries reaches the same state. The store stamps create/modify indexes from the entry.

Wire form: `{"Index": 7, "Term": 1, "Type": "UpsertAllocs", "Change": {...PascalCase...}}`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

import orjson

from contracts.allocation import Allocation, ClientStatus
from contracts.codec import CodecError, describe, from_wire, to_wire
from contracts.evaluation import Evaluation
from contracts.job import Job
from contracts.node import Node
from contracts.scaling import ScalingEvent


@dataclass(frozen=True, slots=True)
class UpsertNodes:
    nodes: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class DeleteNodes:
    node_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class GroupScalingEvent:
    group: str
    event: ScalingEvent


@dataclass(frozen=True, slots=True)
class UpsertJob:
    """Register a job version (the store bumps Version); evals are written in the same entry.

    keep_version: rewrite the row of `job.version` in place (the "set stable" API) instead of
    writing a new version.
    """

    job: Job
    evals: tuple[Evaluation, ...] = ()
    scaling_events: tuple[GroupScalingEvent, ...] = ()
    keep_version: bool = False


@dataclass(frozen=True, slots=True)
class PurgeJob:
    """Delete a job, its versions and scaling events; its allocs and evals stay until GC."""

    namespace: str
    job_id: str
    evals: tuple[Evaluation, ...] = ()


@dataclass(frozen=True, slots=True)
class UpsertEvals:
    evals: tuple[Evaluation, ...]


@dataclass(frozen=True, slots=True)
class DeleteEvals:
    """Garbage collection: drop evals and (optionally) allocs for good."""

    eval_ids: tuple[str, ...]
    alloc_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class UpsertAllocs:
    """What a committed plan writes: placed, updated and stopped allocations, plus evals."""

    allocs: tuple[Allocation, ...]
    evals: tuple[Evaluation, ...] = ()


@dataclass(frozen=True, slots=True)
class AllocClientUpdate:
    alloc_id: str
    client_status: ClientStatus
    client_description: str = ""
    modify_time: int = 0


@dataclass(frozen=True, slots=True)
class UpdateAllocsClientStatus:
    """Status reported by clients; touches only the client-owned fields."""

    updates: tuple[AllocClientUpdate, ...]


@dataclass(frozen=True, slots=True)
class AppendScalingEvent:
    namespace: str
    job_id: str
    group: str
    event: ScalingEvent


StateChange: TypeAlias = (
    UpsertNodes
    | DeleteNodes
    | UpsertJob
    | PurgeJob
    | UpsertEvals
    | DeleteEvals
    | UpsertAllocs
    | UpdateAllocsClientStatus
    | AppendScalingEvent
)

CHANGE_TYPES: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (
        UpsertNodes,
        DeleteNodes,
        UpsertJob,
        PurgeJob,
        UpsertEvals,
        DeleteEvals,
        UpsertAllocs,
        UpdateAllocsClientStatus,
        AppendScalingEvent,
    )
}


@dataclass(frozen=True, slots=True)
class LogEntry:
    index: int
    term: int
    change: StateChange


def encode_entry(entry: LogEntry) -> bytes:
    return orjson.dumps(
        {
            "Index": entry.index,
            "Term": entry.term,
            "Type": type(entry.change).__name__,
            "Change": to_wire(entry.change),
        }
    )


_ENTRY_KEYS = ("Index", "Term", "Type", "Change")


def decode_entry(raw: bytes | str) -> LogEntry:
    """Parse and validate an entry; raises CodecError naming the JSON path of a bad field."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise CodecError("$", f"not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise CodecError("$", f"expected an object, got {describe(data)}")
    for key in data:
        if key not in _ENTRY_KEYS:
            raise CodecError(f"$.{key}", "unknown field")
    for key in _ENTRY_KEYS:
        if key not in data:
            raise CodecError(f"$.{key}", "required field is missing")
    kind = data["Type"]
    cls = CHANGE_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        allowed = ", ".join(CHANGE_TYPES)
        raise CodecError("$.Type", f"expected one of {allowed}, got {describe(kind)}")
    index = from_wire(int, data["Index"], "$.Index")
    term = from_wire(int, data["Term"], "$.Term")
    change: StateChange = from_wire(cls, data["Change"], "$.Change")
    return LogEntry(index=index, term=term, change=change)
