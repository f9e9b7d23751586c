"""Node and system endpoints through the API core (cluster.py): Node.Evaluate, a forced GC,
and a drain without a deadline, against the real leader core and scheduler."""

from __future__ import annotations

from actors.api.core.shapes import job_to_nomad
from contracts import ClientStatus
from contracts.jobspec import parse_job_file
from contracts.messages import LeaderRequest, RequestKind
from contracts.state_log import AllocClientUpdate

from .conftest import Client, MemoryBackend


def run_web(call: Client, backend: MemoryBackend) -> list[dict]:
    job = job_to_nomad(parse_job_file("examples/web.nomad"))
    assert call("POST", "/v1/jobs", {"Job": job}).status == 200
    backend.schedule_pending()
    return list(call("GET", "/v1/job/web/allocations").body)


def report(backend: MemoryBackend, alloc_ids: list[str], status: ClientStatus) -> None:
    updates = tuple(AllocClientUpdate(a, status) for a in alloc_ids)
    backend.write(LeaderRequest(RequestKind.CLIENT_UPDATES, updates=updates))


def test_node_evaluate_answers_nomads_fields(call: Client, backend: MemoryBackend) -> None:
    allocs = run_web(call, backend)
    node_id = allocs[0]["NodeID"]
    node = call("GET", f"/v1/node/{node_id}").body
    reply = call("PUT", f"/v1/node/{node_id}/evaluate")
    assert reply.status == 200
    assert set(reply.body) == {"EvalIDs", "EvalCreateIndex", "NodeModifyIndex", "Index"}
    (eval_id,) = reply.body["EvalIDs"]
    assert reply.body["NodeModifyIndex"] == node["ModifyIndex"]  # the node is not written
    assert reply.body["EvalCreateIndex"] == reply.body["Index"] == reply.index
    ev = call("GET", f"/v1/evaluation/{eval_id}").body
    assert (ev["TriggeredBy"], ev["JobID"], ev["NodeID"]) == ("node-update", "web", node_id)
    idle = next(
        n["ID"]
        for n in call("GET", "/v1/nodes").body
        if n["ID"] not in {a["NodeID"] for a in allocs}
    )
    empty = call("POST", f"/v1/node/{idle}/evaluate").body
    assert empty["EvalIDs"] == [] and empty["EvalCreateIndex"] == 0
    assert call("POST", "/v1/node/ghost/evaluate").status == 404


def test_system_gc_removes_what_finished(call: Client, backend: MemoryBackend) -> None:
    allocs = run_web(call, backend)
    assert call("PUT", "/v1/system/gc").status == 200
    assert len(call("GET", "/v1/job/web/allocations").body) == len(allocs)  # all still live
    assert call("DELETE", "/v1/job/web").status == 200
    backend.schedule_pending()
    report(backend, [a["ID"] for a in allocs], ClientStatus.COMPLETE)
    assert call("POST", "/v1/system/gc").status == 200
    assert call("GET", "/v1/job/web").status == 404
    assert call("GET", "/v1/allocations").body == []
    assert call("GET", "/v1/evaluations").body == []


def test_a_drain_without_a_deadline_has_none(call: Client, backend: MemoryBackend) -> None:
    node_id = call("GET", "/v1/nodes").body[0]["ID"]
    for spec in ({}, {"Deadline": None}, {"Deadline": 0}):
        assert call("POST", f"/v1/node/{node_id}/drain", {"DrainSpec": spec}).status == 200
        strategy = backend.store.node(node_id).drain_strategy
        # An empty node's drain completes at once; its strategy had no deadline either way.
        assert strategy is None or strategy.deadline_ns() is None
    run_web(call, backend)
    busy = call("GET", "/v1/job/web/allocations").body[0]["NodeID"]
    assert call("POST", f"/v1/node/{busy}/drain", {"DrainSpec": {}}).status == 200
    drained = call("GET", f"/v1/node/{busy}").body
    assert drained["DrainStrategy"]["DrainSpec"]["Deadline"] == 0
    assert backend.store.node(busy).drain_strategy.deadline_ns() is None
    forced = call("POST", f"/v1/node/{busy}/drain", {"DrainSpec": {"Deadline": -1}})
    assert forced.status == 200
    bad = call("POST", f"/v1/node/{busy}/drain", {"DrainSpec": {"Deadline": "1h"}})
    assert bad.status == 400 and "DrainSpec.Deadline" in bad.body
