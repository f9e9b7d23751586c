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

from contracts.alloc_batch import compact_allocs, expand_allocs
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
    # The allocation's node, so that followers that keep no allocations (the broker) can
    # tell which node class just gained room.
    node_id: str = ""


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
    # The request this entry commits ("" for the leader's own decisions): a leader rebuilt
    # from the log knows which requests are done and never applies one twice.
    request_id: str = ""


def encode_entry(entry: LogEntry) -> bytes:
    change = entry.change
    wire = _compact_allocs(change) if isinstance(change, UpsertAllocs) else to_wire(change)
    data = {"Index": entry.index, "Term": entry.term, "Type": type(change).__name__, "Change": wire}
    if entry.request_id:
        data["RequestID"] = entry.request_id
    return orjson.dumps(data)


def _compact_allocs(change: UpsertAllocs) -> dict[str, Any]:
    return {"AllocGroups": compact_allocs(change.allocs), "Evals": to_wire(change.evals)}


def _expand_allocs(wire: Any, path: str) -> UpsertAllocs:
    if not isinstance(wire, dict):
        raise CodecError(path, f"expected an object, got {describe(wire)}")
    for key in wire:
        if key not in ("AllocGroups", "Evals"):
            raise CodecError(f"{path}.{key}", "unknown field")
    allocs = expand_allocs(wire.get("AllocGroups"), f"{path}.AllocGroups")
    evals = from_wire(tuple[Evaluation, ...], wire.get("Evals"), f"{path}.Evals")
    return UpsertAllocs(allocs=allocs, evals=evals)


_ENTRY_KEYS = ("Index", "Term", "Type", "Change")


def decode_entry(raw: bytes | str, *, skip_allocs: bool = False) -> LogEntry:
    """Parse and validate an entry; raises CodecError naming the JSON path of a bad field.

    skip_allocs: leave out UpsertAllocs' allocation records (their evaluations are kept),
    for followers that do not track allocations and should not pay to decode them."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise CodecError("$", f"not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise CodecError("$", f"expected an object, got {describe(data)}")
    for key in data:
        if key not in _ENTRY_KEYS and key != "RequestID":
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
    change: StateChange
    if cls is UpsertAllocs and skip_allocs and isinstance(data["Change"], dict):
        evals = from_wire(tuple[Evaluation, ...], data["Change"].get("Evals"), "$.Change.Evals")
        change = UpsertAllocs(allocs=(), evals=evals)
    elif (
        cls is UpsertAllocs and isinstance(data["Change"], dict) and "AllocGroups" in data["Change"]
    ):
        change = _expand_allocs(data["Change"], "$.Change")
    else:
        change = from_wire(cls, data["Change"], "$.Change")
    request_id = from_wire(str, data.get("RequestID", ""), "$.RequestID")
    return LogEntry(index=index, term=term, change=change, request_id=request_id)
