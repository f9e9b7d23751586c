"""The replicated state log: typed changes, applied identically by the leader and replicas.

Every change carries all the data its application needs (records, times, ids): applying an
entry must never consult a clock or a random source, so that every replica that applies the
same entries reaches the same state. The store stamps create/modify indexes from the entry.

Wire form: `{"Index": 7, "Term": 1, "Type": "UpsertAllocs", "Change": {...PascalCase...}}`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import orjson

from contracts.alloc_batch import AllocRows, compact_allocs, decode_alloc_groups, expand_allocs
from contracts.allocation import CLIENT_TERMINAL, Allocation, ClientStatus
from contracts.codec import (
    CodecError,
    describe,
    from_wire,
    generic_decoder,
    register_wire_form,
    to_lean_wire,
)
from contracts.copying import replacer
from contracts.deployment import Deployment
from contracts.evaluation import Evaluation
from contracts.fast_init import install_fast_inits
from contracts.job import Job
from contracts.node import Node
from contracts.scaling import ScalingEvent
from contracts.scheduler_config import SchedulerConfiguration


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


# On the wire a client report is one row, [AllocID, ClientStatus, ClientDescription,
# ModifyTime, NodeID]: an agent sends one per allocation it runs, and the leader decodes them
# all, so the row form costs a third of an object's. The object form is still read.
_UPDATE_ROW = "[AllocID, ClientStatus, ClientDescription, ModifyTime, NodeID]"
_STATUS_BY_VALUE = {s.value: s for s in ClientStatus}
_new_update = replacer(
    AllocClientUpdate, "alloc_id", "client_status", "client_description", "modify_time", "node_id"
)
_UPDATE_PROTO = AllocClientUpdate("", ClientStatus.PENDING)


def client_update(
    alloc_id: str,
    client_status: ClientStatus,
    client_description: str,
    modify_time: int,
    node_id: str,
) -> AllocClientUpdate:
    """`AllocClientUpdate(...)` at a third of the cost (a frozen dataclass's __init__ sets
    each field through object.__setattr__): an agent makes one per allocation it runs."""
    return _new_update(
        _UPDATE_PROTO, alloc_id, client_status, client_description, modify_time, node_id
    )


def _update_to_wire(update: AllocClientUpdate) -> list[Any]:
    return [
        update.alloc_id,
        update.client_status.value,
        update.client_description,
        update.modify_time,
        update.node_id,
    ]


def _client_status(raw: Any) -> ClientStatus | None:
    """The status a wire value names, or None (the validating decoder then says why)."""
    return _STATUS_BY_VALUE.get(raw) if type(raw) is str else None


def _update_from_wire(data: Any, path: str) -> AllocClientUpdate:
    if type(data) is list:
        if len(data) == 5:
            alloc_id, status, description, modify_time, node_id = data
            client_status = _client_status(status)
            if (
                client_status is not None
                and type(alloc_id) is str
                and type(description) is str
                and type(modify_time) is int
                and type(node_id) is str
            ):
                return client_update(alloc_id, client_status, description, modify_time, node_id)
        raise CodecError(path, f"expected {_UPDATE_ROW}, got {describe(data)}")
    update: AllocClientUpdate = generic_decoder(AllocClientUpdate)(data, path, "error")
    return update


register_wire_form(AllocClientUpdate, _update_to_wire, _update_from_wire)


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


@dataclass(frozen=True, slots=True)
class UpsertDeployments:
    """Create or update deployments, whole records (the store stamps their indexes): the
    scheduler's new or cancelled ones, and the leader's watcher's status, promotion and
    health changes (contracts/deployment.py)."""

    deployments: tuple[Deployment, ...]


@dataclass(frozen=True, slots=True)
class UpsertSchedulerConfig:
    """The scheduler configuration, whole (the store stamps its indexes)."""

    config: SchedulerConfiguration


@dataclass(frozen=True, slots=True)
class JobImage:
    """A job as a snapshot holds it: the current record, the version history (newest
    first) and the groups' scaling events (newest first), each exactly as stored."""

    job: Job
    versions: tuple[Job, ...] = ()
    scaling: dict[str, tuple[ScalingEvent, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RestoreJobs:
    """Jobs of a snapshot. Never committed to the log: it appears only in snapshot chunks,
    which a store applies verbatim (indexes and versions as recorded, see
    actors/state/image.py), as it does their UpsertNodes, UpsertEvals and UpsertAllocs."""

    jobs: tuple[JobImage, ...]


@dataclass(frozen=True, slots=True)
class UpsertAllocRows:
    """UpsertAllocs as a follower may read it: the allocations left in their compact groups
    (`decode_entry(..., compact=True)`), for a store that builds the records only when
    something reads them. A read-side form: never written (the log holds UpsertAllocs)."""

    groups: tuple[AllocRows, ...]
    evals: tuple[Evaluation, ...] = ()

    def expanded(self) -> UpsertAllocs:
        return UpsertAllocs(tuple(a for g in self.groups for a in g.expand()), self.evals)


@dataclass(frozen=True, slots=True)
class ClientUpdateRows:
    """A run of client reports sharing status, description and time: the shared fields as
    a prototype report (no alloc or node id) and one [AllocID, NodeID] row per report."""

    proto: AllocClientUpdate
    rows: list[list[str]]

    def expand(self) -> list[AllocClientUpdate]:
        proto = self.proto
        return [_update_from_row(proto, alloc_id, node_id) for alloc_id, node_id in self.rows]

    def subset(self, rows: list[list[str]]) -> ClientUpdateRows:
        return ClientUpdateRows(self.proto, rows)


@dataclass(frozen=True, slots=True)
class UpdateClientStatusRows:
    """UpdateAllocsClientStatus as a follower may read it (`compact=True`): runs of rows."""

    groups: tuple[ClientUpdateRows, ...]

    def expanded(self) -> UpdateAllocsClientStatus:
        return UpdateAllocsClientStatus(tuple(u for g in self.groups for u in g.expand()))


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
    | RestoreJobs
    | UpsertAllocRows
    | UpdateClientStatusRows
    | UpsertDeployments
    | UpsertSchedulerConfig
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
        RestoreJobs,
        UpsertDeployments,
        UpsertSchedulerConfig,
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
    # W3C traceparents: "" -> the span that committed the entry (a plan apply, a request);
    # an eval ID -> the span that enqueued that evaluation (the root of its trace).
    trace: dict[str, str] = field(default_factory=dict)
    # When the leader committed it (wall clock, ns since the epoch; 0: not recorded). Lets a
    # follower tell how far behind the leader it reads, and a benchmark time commits exactly
    # however late it reads them.
    committed_ns: int = 0


def encode_entry(entry: LogEntry) -> bytes:
    change = entry.change
    if isinstance(change, UpsertAllocRows | UpdateClientStatusRows):
        change = change.expanded()
    if isinstance(change, UpsertAllocs):
        wire = _compact_allocs(change)
    elif isinstance(change, UpdateAllocsClientStatus):
        wire = _compact_updates(change)
    else:
        wire = to_lean_wire(change)
    data = {"Index": entry.index, "Term": entry.term, "Type": type(change).__name__, "Change": wire}
    if entry.request_id:
        data["RequestID"] = entry.request_id
    if entry.trace:
        data["Trace"] = entry.trace
    if entry.committed_ns:
        data["Time"] = entry.committed_ns
    return orjson.dumps(data)


def _compact_allocs(change: UpsertAllocs) -> dict[str, Any]:
    return {"AllocGroups": compact_allocs(change.allocs), "Evals": to_lean_wire(change.evals)}


def _expand_allocs(wire: Any, path: str, compact: bool) -> UpsertAllocs | UpsertAllocRows:
    if not isinstance(wire, dict):
        raise CodecError(path, f"expected an object, got {describe(wire)}")
    for key in wire:
        if key not in ("AllocGroups", "Evals"):
            raise CodecError(f"{path}.{key}", "unknown field")
    evals = from_wire(tuple[Evaluation, ...], wire.get("Evals"), f"{path}.Evals")
    if compact:
        groups = decode_alloc_groups(wire.get("AllocGroups"), f"{path}.AllocGroups")
        return UpsertAllocRows(groups=groups, evals=evals)
    allocs = expand_allocs(wire.get("AllocGroups"), f"{path}.AllocGroups")
    return UpsertAllocs(allocs=allocs, evals=evals)


# Client reports in the log, grouped like allocations: an agent's batch shares its status,
# description and time, so each run of updates that share them is sent as one group whose
# rows are just [AllocID, NodeID]. Runs keep the updates' order. Decoding copies a prototype
# per row (cheap), and followers that only act on terminal reports (the broker, the agents)
# can leave the other groups undecoded.
_UPDATE_GROUP_KEYS = frozenset({"ClientStatus", "ClientDescription", "ModifyTime", "Rows"})
_update_from_row = replacer(AllocClientUpdate, "alloc_id", "node_id")
_eval_of_job_at = replacer(Evaluation, "job_modify_index")


def _compact_updates(change: UpdateAllocsClientStatus) -> dict[str, Any]:
    groups: list[dict[str, Any]] = []
    rows: list[list[str]] = []
    key: tuple[ClientStatus, str, int] | None = None
    for u in change.updates:
        k = (u.client_status, u.client_description, u.modify_time)
        if k != key:
            key = k
            rows = []
            groups.append(
                {
                    "ClientStatus": u.client_status.value,
                    "ClientDescription": u.client_description,
                    "ModifyTime": u.modify_time,
                    "Rows": rows,
                }
            )
        rows.append([u.alloc_id, u.node_id])
    return {"UpdateGroups": groups}


def _expand_updates(
    wire: Any, path: str, terminal_only: bool, compact: bool
) -> UpdateAllocsClientStatus | UpdateClientStatusRows:
    if not isinstance(wire, dict) or set(wire) != {"UpdateGroups"}:
        raise CodecError(path, "expected an object with UpdateGroups")
    groups = wire["UpdateGroups"]
    if not isinstance(groups, list):
        raise CodecError(f"{path}.UpdateGroups", f"expected a list, got {describe(groups)}")
    runs: list[ClientUpdateRows] = []
    for g, group in enumerate(groups):
        where = f"{path}.UpdateGroups[{g}]"
        if type(group) is not dict or group.keys() != _UPDATE_GROUP_KEYS:
            raise CodecError(
                where, f"expected an object with {', '.join(sorted(_UPDATE_GROUP_KEYS))}"
            )
        raw_status = group["ClientStatus"]
        status = _client_status(raw_status)
        if terminal_only and status is not None and status not in CLIENT_TERMINAL:
            continue
        description, modify_time = group["ClientDescription"], group["ModifyTime"]
        if status is None or type(description) is not str or type(modify_time) is not int:
            # The validating decoder names what is wrong.
            status = from_wire(ClientStatus, raw_status, f"{where}.ClientStatus")
            description = from_wire(str, description, f"{where}.ClientDescription")
            modify_time = from_wire(int, modify_time, f"{where}.ModifyTime")
        proto = client_update("", status, description, modify_time, "")
        rows = group["Rows"]
        if type(rows) is not list:
            raise CodecError(f"{where}.Rows", f"expected a list, got {describe(rows)}")
        for r, row in enumerate(rows):
            if (
                type(row) is not list
                or len(row) != 2
                or type(row[0]) is not str
                or type(row[1]) is not str
            ):
                raise CodecError(
                    f"{where}.Rows[{r}]", f"expected [AllocID, NodeID] strings, got {describe(row)}"
                )
        runs.append(ClientUpdateRows(proto, rows))
    if compact:
        return UpdateClientStatusRows(tuple(runs))
    return UpdateAllocsClientStatus(tuple(u for run in runs for u in run.expand()))


_ENTRY_KEYS = ("Index", "Term", "Type", "Change")
_REQUIRED_ENTRY_KEYS = frozenset(_ENTRY_KEYS)
_ALL_ENTRY_KEYS = _REQUIRED_ENTRY_KEYS | {"RequestID", "Trace", "Time"}


def decode_entry(
    raw: bytes | str,
    *,
    skip_allocs: bool = False,
    terminal_updates_only: bool = False,
    compact: bool = False,
    jobs_as_evals: bool = False,
    keep_job: Callable[[dict[str, Any]], bool] | None = None,
    keep_eval: Callable[[dict[str, Any]], bool] | None = None,
) -> LogEntry:
    """Parse and validate an entry; raises CodecError naming the JSON path of a bad field.

    skip_allocs: leave out UpsertAllocs' allocation records (their evaluations are kept),
    for followers that do not track allocations and should not pay to decode them.
    terminal_updates_only: keep only the client reports of a terminal status (complete,
    failed, lost) in UpdateAllocsClientStatus, for followers that act on nothing else.
    compact: read allocations and client reports in their compact groups (UpsertAllocRows,
    UpdateClientStatusRows: validated, records not built), for stores that build records
    only when something reads them.
    jobs_as_evals: a job registration is read as the evaluations it carries (UpsertEvals),
    its job left undecoded, for followers that never read jobs (the broker).
    keep_job: with jobs_as_evals, the registrations whose raw `Change` it accepts are read
    whole, for followers that read only some jobs (the autoscaler: those with policies).
    keep_eval: of the evaluations an entry writes (a registration's, a purge's, a plan's,
    an eval update's), only those whose raw object it accepts are decoded; the others are
    left out, for followers that read no evaluations (the client agent) or only some (the
    autoscaler: blocked ones). Garbage collection's deletions stay."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise CodecError("$", f"not valid JSON: {exc}") from None
    if type(data) is not dict:
        raise CodecError("$", f"expected an object, got {describe(data)}")
    if not _ALL_ENTRY_KEYS.issuperset(data) or not data.keys() >= _REQUIRED_ENTRY_KEYS:
        _refuse_entry_keys(data)
    kind = data["Type"]
    cls = CHANGE_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        allowed = ", ".join(CHANGE_TYPES)
        raise CodecError("$.Type", f"expected one of {allowed}, got {describe(kind)}")
    # Every entry's own fields, checked inline: the codec's call per field cost a small
    # entry a quarter of its decoding, on every follower.
    index, term = data["Index"], data["Term"]
    if type(index) is not int:
        index = from_wire(int, index, "$.Index")
    if type(term) is not int:
        term = from_wire(int, term, "$.Term")
    if keep_eval is not None:
        _filter_evals(data["Change"], keep_eval)
    change: StateChange
    if (
        cls is UpsertJob
        and jobs_as_evals
        and isinstance(data["Change"], dict)
        and (keep_job is None or not keep_job(data["Change"]))
    ):
        evals = from_wire(tuple[Evaluation, ...], data["Change"].get("Evals"), "$.Change.Evals")
        if data["Change"].get("KeepVersion") is not True:
            # The store gives a registration's evals the job's new modify index (its own).
            evals = tuple(_eval_of_job_at(e, index) for e in evals)
        change = UpsertEvals(evals)
    elif cls is UpsertAllocs and skip_allocs and isinstance(data["Change"], dict):
        evals = from_wire(tuple[Evaluation, ...], data["Change"].get("Evals"), "$.Change.Evals")
        change = UpsertAllocs(allocs=(), evals=evals)
    elif (
        cls is UpsertAllocs and isinstance(data["Change"], dict) and "AllocGroups" in data["Change"]
    ):
        change = _expand_allocs(data["Change"], "$.Change", compact)
    elif (
        cls is UpdateAllocsClientStatus
        and isinstance(data["Change"], dict)
        and "UpdateGroups" in data["Change"]
    ):
        change = _expand_updates(data["Change"], "$.Change", terminal_updates_only, compact)
    else:
        change = from_wire(cls, data["Change"], "$.Change")
        if terminal_updates_only and isinstance(change, UpdateAllocsClientStatus):
            change = UpdateAllocsClientStatus(
                tuple(u for u in change.updates if u.client_status in CLIENT_TERMINAL)
            )
    request_id, committed_ns = data.get("RequestID", ""), data.get("Time", 0)
    if type(request_id) is not str:
        request_id = from_wire(str, request_id, "$.RequestID")
    if type(committed_ns) is not int:
        committed_ns = from_wire(int, committed_ns, "$.Time")
    trace = from_wire(dict[str, str], data["Trace"], "$.Trace") if "Trace" in data else {}
    return LogEntry(index, term, change, request_id, trace, committed_ns)


def _filter_evals(change: Any, keep_eval: Callable[[dict[str, Any]], bool]) -> None:
    """Drop from a raw change's `Evals` the evaluations `keep_eval` refuses (in place: the
    entry's own parse). Whatever is not shaped as an evaluation is kept, for the decoder to
    name it."""
    if type(change) is not dict:
        return
    evals = change.get("Evals")
    if type(evals) is list and evals:
        change["Evals"] = [e for e in evals if type(e) is not dict or keep_eval(e)]


def _refuse_entry_keys(data: dict[str, Any]) -> None:
    for key in data:
        if key not in _ALL_ENTRY_KEYS:
            raise CodecError(f"$.{key}", "unknown field")
    for key in _ENTRY_KEYS:
        if key not in data:
            raise CodecError(f"$.{key}", "required field is missing")


def without_allocs(entry: LogEntry) -> LogEntry:
    """What a follower that keeps no allocation records stores of an entry: everything but
    the allocations (their evaluations stay, so indexes and eval state match the leader's).
    The agent and the autoscaler read allocations straight from the log instead."""
    change = entry.change
    if isinstance(change, UpsertAllocs | UpsertAllocRows):
        return LogEntry(entry.index, entry.term, UpsertEvals(change.evals))
    if isinstance(change, UpdateAllocsClientStatus | UpdateClientStatusRows):
        return LogEntry(entry.index, entry.term, UpsertEvals(()))
    return entry


install_fast_inits(__name__)
