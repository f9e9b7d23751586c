"""The API core against the real leader core and scheduler: Nomad's shapes, status codes,
blocking queries, ACLs and dry-run plans."""

from __future__ import annotations

import dataclasses
import threading
from concurrent.futures import Future

import orjson

from actors.agent.core import FleetSpec
from actors.api.core import Api, ApiError, ApiRequest, ApiResponse
from actors.api.core.api import WriteInFlight
from actors.api.core.call import PendingWrite
from actors.api.core.shapes import job_to_nomad
from contracts.jobspec import parse_job_file, parse_json
from contracts.jobspec.limits import JobLimits
from contracts.messages import LeaderRequest, LeaderResponse

from .conftest import Client, MemoryBackend

EXAMPLES = ("web.nomad", "batch.nomad", "gpu.nomad", "system.nomad", "web.json")


def web_job(count: int = 3) -> dict:
    job = job_to_nomad(parse_job_file("examples/web.nomad"))
    job["TaskGroups"][0]["Count"] = count
    return job


def test_job_json_round_trips_through_the_jobspec_parser() -> None:
    for name in EXAMPLES:
        job = parse_job_file(f"examples/{name}")
        assert parse_json({"Job": job_to_nomad(job)}) == job, name


def test_register_read_list_and_summary(call: Client, backend: MemoryBackend) -> None:
    reply = call("POST", "/v1/jobs", {"Job": web_job()})
    assert reply.status == 200 and reply.body["EvalID"] and reply.body["JobModifyIndex"] > 0
    backend.schedule_pending()
    job = call("GET", "/v1/job/web")
    assert job.status == 200 and job.body["ID"] == "web" and job.body["Version"] == 0
    assert job.index and job.index > 0
    listed = call("GET", "/v1/jobs", prefix="we")
    assert [j["ID"] for j in listed.body] == ["web"]
    assert call("GET", "/v1/jobs", prefix="zz").body == []
    summary = call("GET", "/v1/job/web/summary").body["Summary"]
    assert summary["frontend"]["Starting"] == 3 and summary["api"]["Starting"] == 2
    allocs = call("GET", "/v1/job/web/allocations").body
    assert len(allocs) == 5 and {a["EvalID"] for a in allocs} == {reply.body["EvalID"]}
    evals = call("GET", "/v1/job/web/evaluations").body
    assert evals[0]["JobID"] == "web" and evals[0]["Status"] == "complete"
    one = call("GET", f"/v1/allocation/{allocs[0]['ID']}").body
    assert one["Job"]["ID"] == "web" and "Flattened" in one["AllocatedResources"]
    with_resources = call("GET", "/v1/allocations", resources="true").body
    assert all("AllocatedResources" in a for a in with_resources)


def test_errors_carry_status_and_name_the_problem(call: Client) -> None:
    assert call("GET", "/v1/job/nope").status == 404
    assert call("GET", "/v1/nowhere").status == 404
    assert call("PATCH", "/v1/jobs").status == 405
    bad_json = call("POST", "/v1/jobs", b"{not json")
    assert bad_json.status == 400 and "invalid JSON" in bad_json.body
    no_job = call("POST", "/v1/jobs", {"Jobb": {}})
    assert no_job.status == 400 and "Job" in no_job.body
    job = web_job()
    job["TaskGroups"][0]["Count"] = "three"
    bad_field = call("POST", "/v1/jobs", {"Job": job})
    assert bad_field.status == 400
    assert "TaskGroups[0].Count" in bad_field.body and '"three"' in bad_field.body
    mismatch = call("POST", "/v1/job/other", {"Job": web_job()})
    assert mismatch.status == 400 and "does not match" in mismatch.body
    assert call("GET", "/v1/evaluation/ghost").status == 404
    assert call("GET", "/v1/allocation/ghost").status == 404
    assert call("POST", "/v1/allocation/ghost/stop").status == 404
    assert call("GET", "/v1/node/ghost").status == 404
    bad_index = call("GET", "/v1/jobs", index="x")
    assert bad_index.status == 400 and "index" in bad_index.body
    bad_wait = call("GET", "/v1/jobs", index="1", wait="soon")
    assert bad_wait.status == 400 and "wait" in bad_wait.body
    assert call("GET", "/v1/jobs").status == 200  # nothing was written by the bad calls


def test_enforce_index_conflicts(call: Client) -> None:
    first = call("POST", "/v1/jobs", {"Job": web_job()}).body
    stale = call("POST", "/v1/jobs", {"Job": web_job(4), "EnforceIndex": True, "JobModifyIndex": 1})
    assert stale.status == 409 and "conflicting job modify index" in stale.body
    ok = call(
        "POST",
        "/v1/jobs",
        {"Job": web_job(4), "EnforceIndex": True, "JobModifyIndex": first["JobModifyIndex"]},
    )
    assert ok.status == 200


def test_blocking_query_returns_when_the_data_changes(call: Client, backend: MemoryBackend) -> None:
    index = call("GET", "/v1/jobs").index
    timed_out = call("GET", "/v1/jobs", index=index, wait="200ms")
    assert timed_out.status == 200 and timed_out.index == index
    # It waited on the backend, for no longer than the query asked, before answering.
    assert backend.waits and 0 < backend.waits[0] <= 0.2

    backend.waiting.clear()
    results = {}

    def wait() -> None:
        results["reply"] = call("GET", "/v1/jobs", index=index, wait="10s")

    waiter = threading.Thread(target=wait)
    waiter.start()
    assert backend.waiting.wait(timeout=30), "a blocking query must wait for a change"
    assert waiter.is_alive() and "reply" not in results
    call("POST", "/v1/jobs", {"Job": web_job()})
    waiter.join(timeout=30)
    assert results["reply"].index > index and results["reply"].body[0]["ID"] == "web"


def test_versions_revert_stable_and_status(call: Client, backend: MemoryBackend) -> None:
    call("POST", "/v1/jobs", {"Job": web_job()})
    backend.schedule_pending()
    call("DELETE", "/v1/job/web")
    backend.schedule_pending()
    reverted = call("POST", "/v1/job/web/revert", {"JobID": "web", "JobVersion": 0})
    assert reverted.status == 200 and reverted.body["EvalID"]
    backend.schedule_pending()
    versions = call("GET", "/v1/job/web/versions", diffs="true").body
    statuses = {v["Version"]: v["Status"] for v in versions["Versions"]}
    assert statuses[1] == "dead" and statuses[2] == "running"  # Nomad #24957
    assert [v["Version"] for v in versions["Versions"]] == [2, 1, 0]
    assert len(versions["Diffs"]) == 2
    stable = call("POST", "/v1/job/web/stable", {"JobVersion": 2, "Stable": True})
    assert stable.status == 200
    assert call("GET", "/v1/job/web").body["Stable"] is True
    assert call("POST", "/v1/job/web/revert", {"JobVersion": -1}).status == 400


def test_scale_and_scaling_policies(call: Client, backend: MemoryBackend) -> None:
    call("POST", "/v1/jobs", {"Job": web_job()})
    reply = call(
        "POST", "/v1/job/web/scale", {"Count": 4, "Target": {"Group": "api"}, "Message": "more"}
    )
    assert reply.status == 200 and reply.body["EvalID"]
    status = call("GET", "/v1/job/web/scale").body
    assert status["TaskGroups"]["api"]["Desired"] == 4
    assert status["TaskGroups"]["api"]["Events"][0]["Message"] == "more"
    too_many = call("POST", "/v1/job/web/scale", {"Count": 99, "Target": {"Group": "api"}})
    assert too_many.status == 400 and "max" in too_many.body
    poison = call("POST", "/v1/job/web/scale", {"Count": 10**9, "Target": {"Group": "api"}})
    assert poison.status == 400
    assert "Count: 1000000000 is outside 0..1000000 (the limit of a group)" in poison.body
    job = web_job()
    job["TaskGroups"][0]["Count"] = 10**9
    refused = call("POST", "/v1/jobs", {"Job": job})
    assert (
        refused.status == 400 and "count 1000000000 is above the limit of 1000000" in refused.body
    )
    policies = call("GET", "/v1/scaling/policies").body
    assert [p["Target"]["Group"] for p in policies] == ["api"]
    policy = call("GET", f"/v1/scaling/policy/{policies[0]['ID']}").body
    assert policy["Max"] == 10
    assert call("GET", "/v1/scaling/policy/ghost").status == 404


def test_plan_is_a_dry_run(call: Client, backend: MemoryBackend) -> None:
    before = backend.store.latest_index()
    planned = call("POST", "/v1/job/web/plan", {"Job": web_job(), "Diff": True}).body
    assert planned["Annotations"]["DesiredTGUpdates"]["frontend"]["Place"] == 3
    assert planned["FailedTGAllocs"] is None and planned["Diff"]["Type"] == "Added"
    assert backend.store.latest_index() == before, "a plan commits nothing"
    assert call("GET", "/v1/job/web").status == 404
    huge = web_job(3)
    huge["TaskGroups"][0]["Tasks"][0]["Resources"]["MemoryMB"] = 100_000
    failing = call("POST", "/v1/job/web/plan", {"Job": huge}).body
    assert "frontend" in failing["FailedTGAllocs"]
    assert failing["CreatedEvals"][0]["Status"] == "blocked"
    call("POST", "/v1/jobs", {"Job": web_job()})
    backend.schedule_pending()
    unchanged = call("POST", "/v1/job/web/plan", {"Job": web_job()}).body
    assert unchanged["Annotations"]["DesiredTGUpdates"]["frontend"]["Ignore"] == 3
    assert unchanged["JobModifyIndex"] == call("GET", "/v1/job/web").body["JobModifyIndex"]


def test_nodes_drain_eligibility_and_alloc_stop(call: Client, backend: MemoryBackend) -> None:
    job = web_job()
    for group in job["TaskGroups"]:
        # Nomad's numToDrain is healthy - (count - max_parallel): a max_parallel past the
        # count lets the allocations here (never reported running) go at once.
        group["Migrate"] = {"MaxParallel": 10}
    call("POST", "/v1/jobs", {"Job": job})
    backend.schedule_pending()
    nodes = call("GET", "/v1/nodes", resources="true").body
    assert len(nodes) == 4 and all(n["Drain"] is False for n in nodes)
    assert nodes[0]["NodeResources"]["Cpu"]["CpuShares"] == 4000
    loaded = next(n["ID"] for n in nodes if call("GET", f"/v1/node/{n['ID']}/allocations").body)
    drained = call("POST", f"/v1/node/{loaded}/drain", {"DrainSpec": {"Deadline": 60_000_000_000}})
    assert drained.status == 200 and drained.body["EvalIDs"]
    node = call("GET", f"/v1/node/{loaded}").body
    assert node["Drain"] is True and node["SchedulingEligibility"] == "ineligible"
    backend.schedule_pending()
    live = [
        a for a in call("GET", f"/v1/node/{loaded}/allocations").body if a["DesiredStatus"] == "run"
    ]
    assert live == [], "a drained node's allocations migrate"
    bad = call("POST", f"/v1/node/{loaded}/eligibility", {"Eligibility": "maybe"})
    assert bad.status == 400 and "Eligibility" in bad.body
    undrain = call("POST", f"/v1/node/{loaded}/drain", {"DrainSpec": None, "MarkEligible": True})
    assert undrain.status == 200
    assert call("GET", f"/v1/node/{loaded}").body["SchedulingEligibility"] == "eligible"
    off = call("POST", f"/v1/node/{loaded}/eligibility", {"Eligibility": "ineligible"})
    assert off.status == 200
    victim = call("GET", "/v1/job/web/allocations").body[-1]
    stopped = call("POST", f"/v1/allocation/{victim['ID']}/stop")
    assert stopped.status == 200 and stopped.body["EvalID"]
    backend.schedule_pending()
    assert call("GET", f"/v1/allocation/{victim['ID']}").body["DesiredStatus"] == "stop"


def test_acl_tokens(backend: MemoryBackend) -> None:
    backend.acl_enabled = True
    anonymous = Client(Api(backend))
    assert anonymous("GET", "/v1/jobs").status == 403
    token = anonymous("POST", "/v1/acl/bootstrap").body
    assert token["Type"] == "management"
    assert anonymous("POST", "/v1/acl/bootstrap").status == 400
    assert Client(Api(backend), token="wrong")("GET", "/v1/jobs").status == 403
    authorised = Client(Api(backend), token=token["SecretID"])
    assert authorised("GET", "/v1/jobs").status == 200
    assert authorised("GET", "/v1/acl/token/self").body["AccessorID"] == token["AccessorID"]


def test_status_gives_the_servers_rpc_address(backend: MemoryBackend) -> None:
    backend.address = "10.1.2.3:34567"
    call = Client(Api(backend))
    assert call("GET", "/v1/status/leader").body == "10.1.2.3:34567"
    assert call("GET", "/v1/status/peers").body == ["10.1.2.3:34567"]
    backend.address = ""  # not served yet: no leader known, no peers (as Nomad answers)
    assert call("GET", "/v1/status/leader").body == ""
    assert call("GET", "/v1/status/peers").body == []


def test_status_and_fleets(call: Client) -> None:
    assert call("GET", "/v1/regions").body == ["global"]
    applied = call(
        "POST",
        "/v1/fleets",
        {"Fleet": {"name": "gpu", "nodes": 2, "resources": {"cpu": 8, "gpu": 4}}},
    )
    assert applied.status == 200 and applied.body == {"Name": "gpu", "Nodes": 2}
    fleets = {f["Name"]: f for f in call("GET", "/v1/fleets").body}
    assert fleets["gpu"]["Ready"] == 2 and fleets["gpu"]["GPUs"] == 4
    bad = call("POST", "/v1/fleets", {"Fleet": {"name": "x", "nodes": -1}})
    assert bad.status == 400 and "nodes" in bad.body and "-1" in bad.body


def test_every_route_is_listed(call: Client) -> None:
    endpoints = call.api.endpoints()
    for method, path in (
        ("GET", "/v1/jobs"),
        ("POST", "/v1/jobs/parse"),
        ("POST", "/v1/job/:id/plan"),
        ("GET", "/v1/node/:id/allocations"),
        ("POST", "/v1/acl/bootstrap"),
    ):
        assert (method, path) in endpoints


def test_parse_endpoint(call: Client) -> None:
    with open("examples/web.nomad", encoding="utf-8") as handle:
        text = handle.read()
    parsed = call("POST", "/v1/jobs/parse", {"JobHCL": text, "Canonicalize": True})
    assert parsed.status == 200 and parsed.body["Name"] == "web"
    assert parsed.body["Type"] == "service"
    broken = call("POST", "/v1/jobs/parse", {"JobHCL": 'job "x" { group "g" { count = "a" } }'})
    assert broken.status == 400 and "count" in broken.body


def test_the_servers_job_limits_are_400s_naming_the_limit() -> None:
    backend = MemoryBackend(job_limits=JobLimits(max_count=5, max_job_bytes=20_000))
    backend.apply_fleet(FleetSpec(name="sim", count=2, cpu_mhz=4000, memory_mb=8192))
    call = Client(Api(backend))
    before = backend.store.latest_index()
    refused = call("POST", "/v1/jobs", {"Job": web_job(6)})
    assert refused.status == 400
    assert 'group "frontend": count 6 is above the limit of 5' in refused.body
    padded = web_job(1)
    padded["Meta"] = {"pad": "x" * 30_000}
    big = call("POST", "/v1/jobs", {"Job": padded})
    assert big.status == 400 and "bytes, above the limit of 20000" in big.body
    assert backend.store.latest_index() == before  # nothing written
    assert call("POST", "/v1/jobs", {"Job": web_job(5)}).status == 200
    scaled = call("POST", "/v1/job/web/scale", {"Count": 6, "Target": {"Group": "frontend"}})
    assert scaled.status == 400 and "Count: 6 is outside 0..5" in scaled.body


def _register(job_id: str) -> ApiRequest:
    body = orjson.dumps({"Job": job_to_nomad(parse_job_file("examples/web.nomad"))})
    return ApiRequest("POST", "/v1/jobs", {}, body.replace(b'"web"', f'"{job_id}"'.encode()))


def test_a_write_begun_and_finished_answers_as_handle_does(backend: MemoryBackend) -> None:
    api = Api(backend)
    started = api.begin(_register("begun"))
    assert isinstance(started, WriteInFlight) and started.answer.done()
    begun = api.finish(started, started.answer)
    waited = api.handle(_register("waited"))
    assert begun.status == waited.status == 200
    assert begun.body.keys() == waited.body.keys() and begun.index and waited.index
    assert waited.index > begun.index  # each its own commit
    assert api.begin(ApiRequest("GET", "/v1/jobs")).status == 200  # a read answers at once


def test_a_write_that_failed_or_was_given_up_is_answered_as_handle_would() -> None:
    api = Api(MemoryBackend())
    started = api.begin(_register("failing"))
    assert isinstance(started, WriteInFlight)
    failed: Future[LeaderResponse] = Future()
    failed.set_exception(ApiError(503, "Redis is unreachable"))
    assert api.finish(started, failed) == ApiResponse(503, "Redis is unreachable")
    refused: Future[LeaderResponse] = Future()
    refused.set_result(LeaderResponse("r", ok=False, error="job is stale", error_kind="conflict"))
    assert api.finish(started, refused) == ApiResponse(409, "job is stale")
    given_up: Future[LeaderResponse] = Future()
    given_up.cancel()
    answer = api.finish(started, given_up)
    assert started.request_id  # the request went with an id of the API's
    assert answer == ApiResponse(
        503, f"request {started.request_id} was given up before the leader answered"
    )


class SentWrites(MemoryBackend):
    """A memory backend that keeps every leader request submitted to it."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[LeaderRequest] = []

    def submit(self, request: LeaderRequest) -> Future[LeaderResponse]:
        self.sent.append(request)
        return super().submit(request)


def test_a_write_in_flight_knows_the_id_its_leader_request_went_with() -> None:
    backend = SentWrites()
    first, second = (Api(backend).begin(_register(name)) for name in ("one", "two"))
    assert isinstance(first, WriteInFlight) and isinstance(second, WriteInFlight)
    assert [r.request_id for r in backend.sent] == [first.request_id, second.request_id]
    assert first.request_id != second.request_id


def test_a_render_that_raises_is_a_500_naming_the_error() -> None:
    api = Api(MemoryBackend())
    started = api.begin(_register("render"))
    assert isinstance(started, WriteInFlight)

    def broken(response: LeaderResponse) -> ApiResponse:
        raise KeyError("EvalID")

    flight = dataclasses.replace(started, pending=PendingWrite(started.pending.request, broken))
    answer = api.finish(flight, started.answer)
    assert answer.status == 500 and "KeyError" in answer.body
