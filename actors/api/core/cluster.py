"""Evaluations, allocations, nodes, fleets and status handlers."""

from __future__ import annotations

from typing import Any

from actors.api.core import shapes
from actors.api.core.call import Call, PendingWrite
from actors.api.core.deployment_shapes import deployment_lookup
from actors.api.core.errors import bad_request, not_found
from actors.api.core.http_types import ApiResponse
from actors.api.core.shapes import NS_PER_S
from actors.api.core.task_states import job_lookup
from actors.state import StateReader
from contracts import DrainStrategy
from contracts.messages import LeaderResponse, RequestKind


def _prefixed(items: Any, prefix: str) -> list[Any]:
    return [i for i in items if i.id.startswith(prefix)]


# -- evaluations ----------------------------------------------------------------------------------


def list_evals(call: Call) -> ApiResponse:
    prefix, status = call.query("prefix"), call.query("status")
    namespace = call.query("namespace") or "default"

    def render(state: StateReader) -> Any:
        evals = [
            e
            for e in _prefixed(state.evals(), prefix)
            if (namespace == "*" or e.namespace == namespace)
            and (not status or e.status.value == status)
        ]
        evals.sort(key=lambda e: (e.create_index, e.id), reverse=True)
        return [shapes.evaluation(e) for e in evals]

    return call.read(("evals",), render)


def get_eval(call: Call) -> ApiResponse:
    def render(state: StateReader) -> Any:
        ev = state.eval(call.params["id"])
        if ev is None:
            raise not_found(f'eval "{call.params["id"]}" not found')
        return shapes.evaluation(ev)

    return call.read(("evals",), render)


def eval_allocations(call: Call) -> ApiResponse:
    def render(state: StateReader) -> Any:
        eval_id = call.params["id"]
        ev = state.eval(eval_id)
        if ev is None:
            raise not_found(f'eval "{eval_id}" not found')
        allocs = state.allocs_by_job(ev.namespace, ev.job_id)
        job, dep = job_lookup(state), deployment_lookup(state)
        return [
            shapes.alloc_stub(a, job=job(a), deployment=dep(a))
            for a in allocs
            if a.eval_id == eval_id
        ]

    return call.read(("allocs",), render)


# -- allocations ----------------------------------------------------------------------------------


def list_allocs(call: Call) -> ApiResponse:
    prefix = call.query("prefix")
    resources = call.flag("resources")
    namespace = call.query("namespace") or "default"

    def render(state: StateReader) -> Any:
        allocs = [
            a
            for a in _prefixed(state.allocs(), prefix)
            if namespace == "*" or a.namespace == namespace
        ]
        allocs.sort(key=lambda a: (a.create_index, a.id))
        job, dep = job_lookup(state), deployment_lookup(state)
        return [
            shapes.alloc_stub(a, resources=resources, job=job(a), deployment=dep(a)) for a in allocs
        ]

    return call.read(("allocs",), render)


def get_alloc(call: Call) -> ApiResponse:
    def render(state: StateReader) -> Any:
        alloc = state.alloc(call.params["id"])
        if alloc is None:
            raise not_found(f'alloc "{call.params["id"]}" not found')
        return shapes.alloc_full(
            alloc,
            state.job_version(alloc.namespace, alloc.job_id, alloc.job_version),
            deployment_lookup(state)(alloc),
            call.backend.task_events(alloc.id),
        )

    return call.read(("allocs",), render)


def stop_alloc(call: Call) -> PendingWrite:
    return call.write_then(RequestKind.STOP_ALLOC, _stop_alloc_reply, alloc_id=call.params["id"])


def _stop_alloc_reply(response: LeaderResponse) -> ApiResponse:
    return ApiResponse(200, {"EvalID": response.eval_id, "Index": response.index}, response.index)


# -- nodes ----------------------------------------------------------------------------------------


def list_nodes(call: Call) -> ApiResponse:
    prefix = call.query("prefix")
    resources, with_os = call.flag("resources"), call.flag("os")

    def render(state: StateReader) -> Any:
        nodes = sorted(_prefixed(state.nodes(), prefix), key=lambda n: n.name)
        return [shapes.node_stub(n, resources=resources, os=with_os) for n in nodes]

    return call.read(("nodes",), render)


def _node_id(state: StateReader, raw: str) -> str:
    """A full node ID, or a unique prefix of one (as the Nomad CLI accepts)."""
    if state.node(raw) is not None:
        return raw
    matches = [n.id for n in state.nodes() if n.id.startswith(raw) or n.name == raw]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise not_found(f'node "{raw}" not found')
    raise bad_request(f'node "{raw}" is ambiguous: matches {len(matches)} nodes')


def get_node(call: Call) -> ApiResponse:
    return call.read(
        ("nodes",),
        lambda s: shapes.node_full(s.node(_node_id(s, call.params["id"]))),  # type: ignore[arg-type]
    )


def node_allocations(call: Call) -> ApiResponse:
    def render(state: StateReader) -> Any:
        node_id = _node_id(state, call.params["id"])
        job = job_lookup(state)
        return [shapes.alloc_stub(a, job=job(a)) for a in state.allocs_by_node(node_id)]

    return call.read(("allocs",), render)


def _node_reply(response: LeaderResponse) -> ApiResponse:
    body = {
        "EvalIDs": list(response.eval_ids),
        "EvalCreateIndex": response.index if response.eval_ids else 0,
        "NodeModifyIndex": response.index,
        "Index": response.index,
    }
    return ApiResponse(200, body, response.index)


def drain_node(call: Call) -> PendingWrite:
    body = call.json_or_empty()
    spec = body.get("DrainSpec")
    drain: DrainStrategy | None = None
    if spec is not None:
        if not isinstance(spec, dict):
            raise bad_request(f"DrainSpec: expected an object or null, got {spec!r}")
        # Nomad: 0 (or none given) is no deadline; < 0 forces everything off at once.
        deadline = spec.get("Deadline") or 0
        if not isinstance(deadline, int) or isinstance(deadline, bool):
            raise bad_request(f"DrainSpec.Deadline: expected nanoseconds, got {deadline!r}")
        ignore = spec.get("IgnoreSystemJobs", False)
        if not isinstance(ignore, bool):
            raise bad_request(f"DrainSpec.IgnoreSystemJobs: expected a boolean, got {ignore!r}")
        drain = DrainStrategy(deadline_s=deadline / NS_PER_S, ignore_system_jobs=ignore)
    mark = body.get("MarkEligible", False)
    if not isinstance(mark, bool):
        raise bad_request(f"MarkEligible: expected a boolean, got {mark!r}")
    node_id = _node_id(call.backend.snapshot(), call.params["id"])
    return call.write_then(
        RequestKind.DRAIN_NODE, _node_reply, node_ids=(node_id,), drain=drain, mark_eligible=mark
    )


def node_eligibility(call: Call) -> PendingWrite:
    body = call.json()
    value = body.get("Eligibility")
    if value not in ("eligible", "ineligible"):
        raise bad_request(f"Eligibility: expected 'eligible' or 'ineligible', got {value!r}")
    node_id = _node_id(call.backend.snapshot(), call.params["id"])
    return call.write_then(
        RequestKind.NODE_ELIGIBILITY, _node_reply, node_ids=(node_id,), eligible=value == "eligible"
    )


def evaluate_node(call: Call) -> ApiResponse:
    """Nomad's Node.Evaluate: node-update evals for the node's jobs and the system jobs;
    NodeModifyIndex is the node's own (the node itself is not written)."""
    node_id = _node_id(call.backend.snapshot(), call.params["id"])
    response = call.write(RequestKind.NODE_EVALUATE, node_ids=(node_id,))
    node = call.backend.snapshot().node(node_id)
    body = {
        "EvalIDs": list(response.eval_ids),
        "EvalCreateIndex": response.index if response.eval_ids else 0,
        "NodeModifyIndex": node.modify_index if node is not None else 0,
        "Index": response.index,
    }
    return ApiResponse(200, body, response.index or None)


def system_gc(call: Call) -> PendingWrite:
    """Nomad's System.GarbageCollect, done at once through the leader (actors/leader/core/
    gc.py) where Nomad queues a core eval: on return what could go is gone."""
    return call.write_then(RequestKind.SYSTEM_GC, _gc_reply)


def _gc_reply(response: LeaderResponse) -> ApiResponse:
    return ApiResponse(200, None, response.index or None)


# -- status and ACL -------------------------------------------------------------------------------


def leader(call: Call) -> ApiResponse:
    """The leader's RPC address, `<advertise host>:<rpc port>` (see Backend.leader_address):
    Nomad's answer, which clients compare with `<ip>:4647`."""
    return ApiResponse(200, call.backend.leader_address())


def peers(call: Call) -> ApiResponse:
    """One server: the leader, by its RPC address. Nomad lists no peer without a leader."""
    address = call.backend.leader_address()
    return ApiResponse(200, [address] if address else [])


def regions(call: Call) -> ApiResponse:
    return ApiResponse(200, ["global"])
