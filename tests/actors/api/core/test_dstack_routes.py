"""Fleets and runs through the API core (dstack_routes.py) over a real store, with the real
scheduler standing in for the workers (`backend.schedule_pending`)."""

from __future__ import annotations

from contracts import ClientStatus
from contracts.messages import LeaderRequest, RequestKind
from contracts.state_log import AllocClientUpdate

CLUSTER = {
    "name": "c2650",
    "nodes": 2,
    "placement": "cluster",
    "blocks": "auto",
    "resources": {"cpu": "2..", "gpu": 0, "memory": "2GB", "disk": "1GB.."},
}
GANG = {
    "name": "iperf",
    "nodes": 2,
    "resources": {"cpu": "1..", "memory": "1GB..", "gpu": 0, "disk": "1GB.."},
    "mock": {"run_for": "1h"},
}


def _report(backend, run: dict, status: ClientStatus) -> None:
    updates = tuple(AllocClientUpdate(r["AllocID"], status) for r in run["Ranks"])
    backend.write(LeaderRequest(RequestKind.CLIENT_UPDATES, updates=updates))


def test_a_fleet_shows_its_instances_blocks(call) -> None:
    assert call("POST", "/v1/fleets", {"Fleet": CLUSTER}).status == 200
    fleet = call("GET", "/v1/fleet/c2650").body
    assert (fleet["Placement"], fleet["Blocks"], fleet["Busy"]) == ("cluster", "auto", "0/4 busy")
    assert [i["Busy"] for i in fleet["Instances"]] == ["0/2 busy", "0/2 busy"]
    assert call("GET", "/v1/fleet/nope").status == 404


def test_issue_2650_through_the_api(call, backend) -> None:
    call("POST", "/v1/fleets", {"Fleet": CLUSTER})
    submitted = call("POST", "/v1/runs", {"Run": GANG})
    assert submitted.status == 200 and submitted.body["Name"] == "iperf"
    assert submitted.body["EvalID"]
    backend.schedule_pending()
    run = call("GET", "/v1/run/iperf").body
    assert run["Status"] == "provisioning" and run["Nodes"] == 2
    assert sorted(r["Rank"] for r in run["Ranks"]) == [0, 1]
    assert {r["Blocks"] for r in run["Ranks"]} == {"2/2"}
    assert call("GET", "/v1/fleet/c2650").body["Busy"] == "4/4 busy"
    _report(backend, run, ClientStatus.RUNNING)
    assert call("GET", "/v1/run/iperf").body["Status"] == "running"
    _report(backend, run, ClientStatus.COMPLETE)
    assert call("GET", "/v1/run/iperf").body["Status"] == "done"
    assert [r["Name"] for r in call("GET", "/v1/runs").body] == ["iperf"]


def test_a_run_without_capacity_waits_unless_it_asked_to_fail(call, backend) -> None:
    call("POST", "/v1/fleets", {"Fleet": CLUSTER})
    call("POST", "/v1/runs", {"Run": {**GANG, "name": "big", "nodes": 3}})
    call("POST", "/v1/runs", {"Run": {**GANG, "name": "fast", "nodes": 3, "retry": False}})
    backend.schedule_pending()
    waiting = call("GET", "/v1/run/big").body
    assert waiting["Status"] == "submitted" and waiting["Ranks"] == []
    assert waiting["Waiting"]  # why: the blocked evaluation's exhausted dimensions
    assert call("GET", "/v1/run/fast").body["Status"] == "failed"


def test_a_failed_rank_fails_the_run_and_stops_the_others(call, backend) -> None:
    call("POST", "/v1/fleets", {"Fleet": CLUSTER})
    call("POST", "/v1/runs", {"Run": GANG})
    backend.schedule_pending()
    run = call("GET", "/v1/run/iperf").body
    _report(backend, run, ClientStatus.RUNNING)
    rank1 = next(r for r in run["Ranks"] if r["Rank"] == 1)
    update = AllocClientUpdate(rank1["AllocID"], ClientStatus.FAILED)
    backend.write(LeaderRequest(RequestKind.CLIENT_UPDATES, updates=(update,)))
    backend.schedule_pending()  # the job's stop: rank 0 is told to stop
    run = call("GET", "/v1/run/iperf").body
    assert run["Status"] == "failed"
    rank0 = next(r for r in run["Ranks"] if r["Rank"] == 0)
    assert rank0["DesiredStatus"] == "stop"


def test_master_done_stops_the_workers(call, backend) -> None:
    call("POST", "/v1/fleets", {"Fleet": CLUSTER})
    call("POST", "/v1/runs", {"Run": {**GANG, "stop_criteria": "master-done"}})
    backend.schedule_pending()
    run = call("GET", "/v1/run/iperf").body
    _report(backend, run, ClientStatus.RUNNING)
    rank0 = next(r for r in run["Ranks"] if r["Rank"] == 0)
    update = AllocClientUpdate(rank0["AllocID"], ClientStatus.COMPLETE)
    backend.write(LeaderRequest(RequestKind.CLIENT_UPDATES, updates=(update,)))
    backend.schedule_pending()
    run = call("GET", "/v1/run/iperf").body
    assert run["Status"] == "done"
    rank1 = next(r for r in run["Ranks"] if r["Rank"] == 1)
    assert rank1["DesiredStatus"] == "stop"


def test_stop_a_run_and_errors_name_the_field(call, backend) -> None:
    call("POST", "/v1/fleets", {"Fleet": CLUSTER})
    call("POST", "/v1/runs", {"Run": GANG})
    backend.schedule_pending()
    assert call("POST", "/v1/run/iperf/stop").status == 200
    backend.schedule_pending()
    assert call("GET", "/v1/run/iperf").body["Status"] == "terminated"
    bad = call("POST", "/v1/runs", {"Run": {"name": "x1", "nodes": 0, "mock": {}}})
    assert bad.status == 400 and "nodes" in bad.body
    none = call("POST", "/v1/runs", {"Run": {"name": "x2"}})
    assert none.status == 400 and "commands" in none.body
    assert call("POST", "/v1/run/missing/stop").status == 404


def test_a_run_name_taken_by_a_plain_job_is_a_conflict(call, backend) -> None:
    job = {"Job": {"ID": "web", "Name": "web", "TaskGroups": [{"Name": "g", "Tasks": [
        {"Name": "t", "Driver": "mock", "Config": {"run_for": "1h"}}]}]}}  # fmt: skip
    assert call("POST", "/v1/jobs", job).status == 200
    clash = call("POST", "/v1/runs", {"Run": {**GANG, "name": "web"}})
    assert clash.status == 409 and "not a run" in clash.body
    assert call("GET", "/v1/run/web").status == 404


def test_deleting_a_fleet_removes_its_instances(call, backend) -> None:
    call("POST", "/v1/fleets", {"Fleet": CLUSTER})
    deleted = call("DELETE", "/v1/fleet/c2650")
    assert deleted.status == 200 and deleted.body["Removed"] == 2
    names = [n["Name"] for n in call("GET", "/v1/nodes").body]
    assert not [n for n in names if n.startswith("c2650-")]
    assert call("DELETE", "/v1/fleet/c2650").status == 404
