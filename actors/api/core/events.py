"""Nomad's event stream, read off drover's state log: what a committed entry means as Nomad's
events (`nomad/state/events.go`, `nomad/structs/event.go`).

Nomad names one event type per raft message and makes an event of every record the message
changed, with the record after the change as payload. drover's log entries are its raft
messages, so an entry maps to its type here and each record it touched to an event, read from
the replica's store right after the entry was applied (the records are frozen: an event keeps
a reference, never a copy). Payloads are the JSON the API serves for a GET of that record
(shapes.py), rendered once, when a subscriber first needs them.

Where one drover entry holds what Nomad writes in several messages, each record gets the type
of the message Nomad would have written it in: a committed plan's allocations are
`PlanResult`, the evaluations it completes or creates `EvaluationUpdated` (Nomad's worker
writes those with Eval.Update). A job whose status an entry changed is an event of the
entry's type, as in Nomad (its status is written in the same transaction).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from actors.api.core import shapes
from actors.api.core.deployment_shapes import deployment_json
from actors.state import StateReader
from contracts import Allocation, Evaluation, Job, Node
from contracts.deployment import Deployment
from contracts.state_log import (
    DeleteNodes,
    LogEntry,
    PurgeJob,
    UpdateAllocsClientStatus,
    UpdateClientStatusRows,
    UpsertAllocRows,
    UpsertAllocs,
    UpsertDeployments,
    UpsertEvals,
    UpsertJob,
    UpsertNodes,
)

log = logging.getLogger(__name__)

TOPIC_JOB = "Job"
TOPIC_ALLOCATION = "Allocation"
TOPIC_EVALUATION = "Evaluation"
TOPIC_NODE = "Node"
TOPIC_DEPLOYMENT = "Deployment"

NODE_REGISTRATION = "NodeRegistration"
NODE_DEREGISTRATION = "NodeDeregistration"
NODE_DRAIN = "NodeDrain"  # drain and eligibility changes (Nomad types both so)
NODE_EVENT = "NodeStreamEvent"  # a status change (ready, down, ...)
JOB_REGISTERED = "JobRegistered"
JOB_DEREGISTERED = "JobDeregistered"
EVALUATION_UPDATED = "EvaluationUpdated"
ALLOCATION_UPDATED = "AllocationUpdated"  # client status reports
ALLOCATION_DESIRED = "AllocationUpdateDesiredStatus"  # alloc stop, drain migrations
PLAN_RESULT = "PlanResult"
# Every deployment change (created, status, promotion, health), as one type: drover writes
# them as whole records, where Nomad has a message (and an event type) per cause.
DEPLOYMENT_STATUS_UPDATE = "DeploymentStatusUpdate"

# The request ID the leader gives a committed plan (actors/leader/service.py `_apply_plan_in`);
# any other UpsertAllocs is an operator's mark (alloc stop, drain).
PLAN_REQUEST_PREFIX = "plan/"

Record = Job | Allocation | Evaluation | Node | Deployment


@dataclass(slots=True)
class Event:
    """Nomad's structs.Event; `encoded()` is its JSON, made once and shared by subscribers."""

    topic: str
    type: str
    key: str
    namespace: str
    filter_keys: tuple[str, ...] | None
    index: int
    record: Record
    _json: bytes | None = field(default=None, repr=False, compare=False)

    def payload(self) -> dict[str, Any]:
        record = self.record
        if isinstance(record, Job):
            return {"Job": shapes.job_to_nomad(record)}
        if isinstance(record, Allocation):
            # Nomad drops the job from allocation events to keep them small.
            return {"Allocation": shapes.alloc_full(record, None)}
        if isinstance(record, Evaluation):
            return {"Evaluation": shapes.evaluation(record)}
        if isinstance(record, Deployment):
            return {"Deployment": deployment_json(record)}
        return {"Node": shapes.node_full(record)}

    def encoded(self) -> bytes:
        if self._json is None:
            self._json = orjson.dumps(
                {
                    "Topic": self.topic,
                    "Type": self.type,
                    "Key": self.key,
                    "Namespace": self.namespace,
                    "FilterKeys": list(self.filter_keys) if self.filter_keys is not None else None,
                    "Index": self.index,
                    "Payload": self.payload(),
                }
            )
        return self._json


def _deployment_id(record: Allocation | Evaluation) -> str:
    # Evaluations carry no deployment in drover: Nomad's empty ID stands in.
    return str(getattr(record, "deployment_id", "") or "")


def deployment_event(deployment: Deployment, type_: str, index: int) -> Event:
    keys = (deployment.job_id,)
    return Event(
        TOPIC_DEPLOYMENT, type_, deployment.id, deployment.namespace, keys, index, deployment
    )


def job_event(job: Job, type_: str, index: int) -> Event:
    return Event(TOPIC_JOB, type_, job.id, job.namespace, None, index, job)


def eval_event(ev: Evaluation, type_: str, index: int) -> Event:
    keys = (ev.job_id, _deployment_id(ev))
    return Event(TOPIC_EVALUATION, type_, ev.id, ev.namespace, keys, index, ev)


def alloc_event(alloc: Allocation, type_: str, index: int) -> Event:
    keys = (alloc.job_id, _deployment_id(alloc))
    return Event(TOPIC_ALLOCATION, type_, alloc.id, alloc.namespace, keys, index, alloc)


def node_event(node: Node, type_: str, index: int) -> Event:
    return Event(TOPIC_NODE, type_, node.id, "", None, index, node)


def node_type(previous: Node | None, node: Node, index: int) -> str:
    """What changed a node, told from its record before and after (drover writes every node
    change as one UpsertNodes; Nomad has a message per cause)."""
    if previous is None or node.create_index == index:
        return NODE_REGISTRATION
    if (
        previous.drain_strategy != node.drain_strategy
        or previous.scheduling_eligibility != node.scheduling_eligibility
    ):
        return NODE_DRAIN
    if previous.status != node.status:
        return NODE_EVENT
    return NODE_REGISTRATION


class EventTranslator:
    """Log entries to events. Keeps the last record of each node (a deregistration's payload
    and how a node changed are told from it): seed it from the store it follows."""

    def __init__(self) -> None:
        self._nodes: dict[str, Node] = {}

    def seed(self, state: StateReader) -> None:
        self._nodes = {node.id: node for node in state.nodes()}

    def forget(self) -> None:
        self._nodes.clear()

    def remember(self, entry: LogEntry) -> None:
        """A snapshot chunk being restored: no events, but its nodes are the latest known."""
        if isinstance(entry.change, UpsertNodes):
            self._nodes.update((node.id, node) for node in entry.change.nodes)

    def events(self, entry: LogEntry, state: StateReader) -> list[Event]:
        """The events of `entry`, read from `state` as it stands right after applying it."""
        change, index = entry.change, entry.index
        if isinstance(change, UpsertNodes):
            return self._upserted_nodes(change, state, index)
        if isinstance(change, DeleteNodes):
            return [
                node_event(node, NODE_DEREGISTRATION, index)
                for node_id in change.node_ids
                if (node := self._nodes.pop(node_id, None)) is not None
            ]
        if isinstance(change, UpsertJob):
            if change.keep_version:
                return []  # Nomad's job stability update publishes nothing
            job = state.job(change.job.namespace, change.job.id)
            type_ = JOB_DEREGISTERED if change.job.stop else JOB_REGISTERED
            out = [job_event(job, type_, index)] if job is not None else []
            return out + _evals(change.evals, type_, state, index)
        if isinstance(change, PurgeJob):
            # Nomad publishes no event for a deleted job, only for the evaluation made.
            return _evals(change.evals, JOB_DEREGISTERED, state, index)
        if isinstance(change, UpsertEvals):
            out = _evals(change.evals, EVALUATION_UPDATED, state, index)
            return out + _job_statuses(change.evals, EVALUATION_UPDATED, state, index)
        if isinstance(change, UpsertAllocRows):
            change = change.expanded()
        if isinstance(change, UpsertAllocs):
            plan = entry.request_id.startswith(PLAN_REQUEST_PREFIX)
            type_ = PLAN_RESULT if plan else ALLOCATION_DESIRED
            out = _allocs((a.id for a in change.allocs), type_, state, index)
            out += _evals(change.evals, EVALUATION_UPDATED if plan else type_, state, index)
            touched: list[Allocation | Evaluation] = [*change.allocs, *change.evals]
            return out + _job_statuses(touched, type_, state, index)
        if isinstance(change, UpdateClientStatusRows):
            change = change.expanded()
        if isinstance(change, UpdateAllocsClientStatus):
            ids = [u.alloc_id for u in change.updates]
            out = _allocs(ids, ALLOCATION_UPDATED, state, index)
            records = [e.record for e in out if isinstance(e.record, Allocation)]
            return out + _job_statuses(records, ALLOCATION_UPDATED, state, index)
        if isinstance(change, UpsertDeployments):
            return [
                deployment_event(state.deployment(d.id) or d, DEPLOYMENT_STATUS_UPDATE, index)
                for d in change.deployments
            ]
        return []  # scaling events, evaluation GC, snapshot chunks: none in Nomad either

    def _upserted_nodes(self, change: UpsertNodes, state: StateReader, index: int) -> list[Event]:
        out = []
        for written in change.nodes:
            node = state.node(written.id) or written
            out.append(node_event(node, node_type(self._nodes.get(node.id), node, index), index))
            self._nodes[node.id] = node
        return out


def _evals(evals: Iterable[Evaluation], type_: str, state: StateReader, index: int) -> list[Event]:
    return [
        eval_event(stored, type_, index)
        for ev in evals
        if (stored := state.eval(ev.id)) is not None
    ]


def _allocs(ids: Iterable[str], type_: str, state: StateReader, index: int) -> list[Event]:
    return [
        alloc_event(alloc, type_, index)
        for alloc_id in ids
        if (alloc := state.alloc(alloc_id)) is not None
    ]


def _job_statuses(
    touched: Iterable[Allocation | Evaluation], type_: str, state: StateReader, index: int
) -> list[Event]:
    """The jobs whose record this entry rewrote (their status follows their allocations and
    evaluations), each once."""
    keys = dict.fromkeys((r.namespace, r.job_id) for r in touched)
    return [
        job_event(job, type_, index)
        for namespace, job_id in keys
        if (job := state.job(namespace, job_id)) is not None and job.modify_index == index
    ]


Publish = Callable[[int, list[Event]], None]


class EventSource:
    """The replica's listener: translates each applied entry and publishes its events. A
    replica that reloads a snapshot (it fell behind the log's kept tail) calls `reset`: the
    restored chunks make no events, and `on_reset` tells the broker events were lost."""

    def __init__(
        self, publish: Publish, on_reset: Callable[[], None], translator: EventTranslator
    ) -> None:
        self.publish = publish
        self.reset_broker = on_reset
        self.translator = translator
        self._restoring = False
        self._restore_index = 0

    def attach(self, state: StateReader) -> None:
        """Start from `state` (the replica as loaded): only later entries make events."""
        self.translator.seed(state)
        self._restoring, self._restore_index = False, 0

    def reset(self) -> None:
        self.translator.forget()
        self.reset_broker()
        self._restoring, self._restore_index = True, 0

    def on_entry(self, entry: LogEntry, state: StateReader) -> None:
        if self._restoring:
            if self._restore_index in (0, entry.index):  # the snapshot's chunks share its index
                self._restore_index = entry.index
                self.translator.remember(entry)
                return
            self._restoring = False
        try:
            events = self.translator.events(entry, state)
        except Exception:  # a bug here must not stop the replica that serves every read
            log.exception("events of log entry %d not made", entry.index)
            return
        if events:
            self.publish(entry.index, events)
