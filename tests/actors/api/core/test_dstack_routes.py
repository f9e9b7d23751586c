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


def test_deleting_an_idle_fleet_removes_its_instances_at_once(call, backend) -> None:
    call("POST", "/v1/fleets", {"Fleet": CLUSTER})
    deleted = call("DELETE", "/v1/fleet/c2650")
    assert deleted.status == 200 and deleted.body["Draining"] == 2
    assert deleted.body["DeadlineSeconds"] == 3600
    names = [n["Name"] for n in call("GET", "/v1/nodes").body]
    assert not [n for n in names if n.startswith("c2650-")]
    assert call("GET", "/v1/fleet/c2650").status == 404
    assert call("DELETE", "/v1/fleet/c2650").status == 404


def test_deleting_a_fleet_lets_its_runs_finish_first(call, backend) -> None:
    call("POST", "/v1/fleets", {"Fleet": CLUSTER})
    call("POST", "/v1/runs", {"Run": GANG})
    backend.schedule_pending()
    _report(backend, call("GET", "/v1/run/iperf").body, ClientStatus.RUNNING)
    assert call("DELETE", "/v1/fleet/c2650", deadline="600").status == 200
    backend.schedule_pending()
    fleet = call("GET", "/v1/fleet/c2650").body
    assert fleet["Status"] == "deleting" and fleet["Ineligible"] == 2
    assert call("GET", "/v1/run/iperf").body["Status"] == "running", "ranks run on"
    again = call("POST", "/v1/runs", {"Run": {**GANG, "name": "second"}})
    backend.schedule_pending()
    assert again.status == 200
    assert call("GET", "/v1/run/second").body["Ranks"] == [], "nothing new is placed there"

    _report(backend, call("GET", "/v1/run/iperf").body, ClientStatus.COMPLETE)
    assert call("GET", "/v1/run/iperf").body["Status"] == "done"
    assert call("GET", "/v1/fleet/c2650").status == 404, "drained, then removed"


def test_a_forced_fleet_deletion_ends_its_runs(call, backend) -> None:
    call("POST", "/v1/fleets", {"Fleet": CLUSTER})
    call("POST", "/v1/runs", {"Run": GANG})
    backend.schedule_pending()
    _report(backend, call("GET", "/v1/run/iperf").body, ClientStatus.RUNNING)
    deleted = call("DELETE", "/v1/fleet/c2650", force="true")
    assert deleted.body["DeadlineSeconds"] == -1
    backend.schedule_pending()
    assert call("GET", "/v1/run/iperf").body["Status"] == "terminated"
    assert backend.store.job("default", "iperf").stop
    for bad in ("0", "-5", "soon", "nan", "inf"):
        refused = call("DELETE", "/v1/fleet/sim", deadline=bad)
        assert refused.status == 400 and "deadline: expected seconds" in refused.body


# -- review fixes -------------------------------------------------------------------------------


def test_a_run_whose_instance_goes_away_fails(call, backend) -> None:
    """Instances removed under a running gang (Nomad's node purge) end the run (its job
    stops) instead of replacing one rank on its own."""
    call("POST", "/v1/fleets", {"Fleet": CLUSTER})
    call("POST", "/v1/runs", {"Run": GANG})
    backend.schedule_pending()
    _report(backend, call("GET", "/v1/run/iperf").body, ClientStatus.RUNNING)
    instances = [n.id for n in backend.store.nodes() if n.name.startswith("c2650-")]
    backend.write(LeaderRequest(RequestKind.DELETE_NODES, node_ids=tuple(instances)))
    backend.schedule_pending()
    run = call("GET", "/v1/run/iperf").body
    assert run["Status"] == "failed"
    assert {r["ClientStatus"] for r in run["Ranks"]} == {"lost"}
    assert backend.store.job("default", "iperf").stop


def test_a_run_submitted_again_shows_its_new_ranks(call, backend) -> None:
    call("POST", "/v1/fleets", {"Fleet": CLUSTER})
    call("POST", "/v1/runs", {"Run": GANG})
    backend.schedule_pending()
    run = call("GET", "/v1/run/iperf").body
    again = call("POST", "/v1/runs", {"Run": GANG})
    assert again.status == 409 and "drover stop iperf" in again.body  # still active
    _report(backend, run, ClientStatus.FAILED)
    backend.schedule_pending()
    assert call("GET", "/v1/run/iperf").body["Status"] == "failed"
    assert call("POST", "/v1/runs", {"Run": GANG}).status == 200
    backend.schedule_pending()
    rerun = call("GET", "/v1/run/iperf").body
    assert rerun["Status"] == "provisioning"
    assert {r["AllocID"] for r in rerun["Ranks"]}.isdisjoint(r["AllocID"] for r in run["Ranks"])


def test_priorities_follow_dstack(call, backend) -> None:
    call("POST", "/v1/fleets", {"Fleet": CLUSTER})
    for name, extra, expected in (("p0", {"priority": 0}, 1), ("p70", {"priority": 70}, 70),
                                  ("none", {}, 50)):  # fmt: skip
        assert call("POST", "/v1/runs", {"Run": {**GANG, "name": name, **extra}}).status == 200
        assert call("GET", f"/v1/run/{name}").body["Priority"] == expected


def test_dstack_options_drover_does_not_model_are_refused_or_honoured(call, backend) -> None:
    call("POST", "/v1/fleets", {"Fleet": CLUSTER})
    projects = call("POST", "/v1/runs", {"Run": {**GANG, "fleets": ["main/c2650"]}})
    assert projects.status == 400 and "main/c2650" in projects.body
    # Retrying on errors only (not on no-capacity): no capacity fails the run at once.
    retry = {"on_events": ["error"], "duration": "1h"}
    call("POST", "/v1/runs", {"Run": {**GANG, "name": "big", "nodes": 3, "retry": retry}})
    backend.schedule_pending()
    assert call("GET", "/v1/run/big").body["Status"] == "failed"


def test_with_master_done_a_worker_failing_after_the_master_still_means_done(call, backend):
    call("POST", "/v1/fleets", {"Fleet": CLUSTER})
    call("POST", "/v1/runs", {"Run": {**GANG, "stop_criteria": "master-done"}})
    backend.schedule_pending()
    run = call("GET", "/v1/run/iperf").body
    _report(backend, run, ClientStatus.RUNNING)
    by_rank = {r["Rank"]: r["AllocID"] for r in run["Ranks"]}
    for rank, status in ((0, ClientStatus.COMPLETE), (1, ClientStatus.FAILED)):
        update = AllocClientUpdate(by_rank[rank], status)
        backend.write(LeaderRequest(RequestKind.CLIENT_UPDATES, updates=(update,)))
    assert call("GET", "/v1/run/iperf").body["Status"] == "done"


def test_fleets_too_large_to_build_are_refused(call) -> None:
    huge = {"name": "huge", "nodes": 20_000, "resources": {"cpu": 2}}
    reply = call("POST", "/v1/fleets", {"Fleet": huge})
    assert reply.status == 400 and "nodes: 20000" in reply.body
    many = {"name": "many", "blocks": "auto", "resources": {"cpu": 4096, "memory": "1GB"}}
    reply = call("POST", "/v1/fleets", {"Fleet": many})
    assert reply.status == 400 and "4096 blocks per instance" in reply.body
