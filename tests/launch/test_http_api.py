"""The HTTP API and the CLI against a running agent: real Ray actors, the embedded Redis, real
HTTP on a loopback port, ACLs on. Also the python-nomad client, unchanged.

Covers the endpoints through real HTTP (status codes and messages included) and the three
peer failures as CLI scenarios: -preserve-counts, Nomad #24957 and `job history` order.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nomad
import orjson
import pytest
import ray

from actors.agent.core import FleetSpec
from actors.api.core.shapes import job_to_nomad
from contracts.jobspec import parse_job_file
from launch.cli import main as cli
from launch.system import API_NICENESS, DroverSystem, SystemConfig

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TOKEN = "0b5c7a9e-4e0b-4a57-9a43-1c1e2d3f4a5b"


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DroverSystem]:
    config = SystemConfig(
        data_dir=Path(tmp_path_factory.mktemp("drover-http")),
        workers=2,
        num_cpus=2,
        fleets=[FleetSpec(name="sim", count=6, cpu_mhz=4000, memory_mb=8192, disk_mb=20_000)],
        http_addr="127.0.0.1:0",
        acl_enabled=True,
        acl_bootstrap_token=TOKEN,
        heartbeat_ttl_s=5.0,
        heartbeat_s=0.5,
    )
    with DroverSystem(config) as running:
        yield running


def http(
    system: DroverSystem,
    method: str,
    path: str,
    body: Any = None,
    token: str | None = TOKEN,
    raw: bytes | None = None,
) -> tuple[int, Any, dict[str, str]]:
    data = raw if raw is not None else (orjson.dumps(body) if body is not None else None)
    request = urllib.request.Request(system.http_address + path, data=data, method=method)
    if token:
        request.add_header("X-Nomad-Token", token)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, orjson.loads(response.read()), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode().strip(), dict(exc.headers)


@pytest.fixture
def run_cli(system: DroverSystem, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture):
    monkeypatch.setenv("DROVER_ADDR", system.http_address)
    monkeypatch.setenv("DROVER_TOKEN", TOKEN)

    def run(*argv: str) -> tuple[int, str, str]:
        code = cli(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def _leader_term(system: DroverSystem) -> int | None:
    """The leader's term; None while Ray still counts it as restarting (its loop may answer
    the stream before its constructor has returned)."""
    try:
        return int(ray.get(system.leader.stats.remote())["term"])
    except ray.exceptions.ActorUnavailableError:
        return None


def wait_for(predicate, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.1)


# -- the API over HTTP ----------------------------------------------------------------------------


def test_acl_guards_every_endpoint(system: DroverSystem) -> None:
    assert http(system, "GET", "/v1/jobs", token=None)[:2] == (403, "Permission denied")
    assert http(system, "GET", "/v1/nodes", token="wrong")[0] == 403
    status, body, _ = http(system, "POST", "/v1/acl/bootstrap", token=None)
    assert (status, body) == (400, "ACL bootstrap already done")
    assert http(system, "GET", "/v1/acl/token/self")[1]["SecretID"] == TOKEN


def test_jobs_endpoints_over_http(system: DroverSystem) -> None:
    job = job_to_nomad(parse_job_file(EXAMPLES / "web.nomad"))
    status, reply, headers = http(system, "POST", "/v1/jobs", {"Job": job})
    assert status == 200 and int(headers["X-Nomad-Index"]) == reply["Index"] > 0
    eval_id = reply["EvalID"]
    wait_for(lambda: http(system, "GET", f"/v1/evaluation/{eval_id}")[1]["Status"] == "complete")
    assert [j["ID"] for j in http(system, "GET", "/v1/jobs?prefix=w")[1]] == ["web"]
    assert http(system, "GET", "/v1/job/web")[1]["TaskGroups"][0]["Name"] == "frontend"
    assert http(system, "GET", "/v1/job/web/versions")[1]["Versions"][0]["Version"] == 0
    allocs = http(system, "GET", "/v1/job/web/allocations")[1]
    assert len(allocs) == 5 and all(a["JobID"] == "web" for a in allocs)
    assert http(system, "GET", "/v1/job/web/evaluations")[1][0]["ID"] == eval_id
    summary = http(system, "GET", "/v1/job/web/summary")[1]
    assert set(summary["Summary"]) == {"frontend", "api"}
    assert http(system, "GET", f"/v1/evaluation/{eval_id}/allocations")[1][0]["EvalID"] == eval_id
    assert any(e["ID"] == eval_id for e in http(system, "GET", "/v1/evaluations")[1])
    alloc_id = allocs[0]["ID"]
    assert http(system, "GET", f"/v1/allocation/{alloc_id}")[1]["ID"] == alloc_id
    assert len(http(system, "GET", "/v1/allocations?resources=true")[1]) >= 5
    planned = http(system, "POST", "/v1/job/web/plan", {"Job": job, "Diff": True})[1]
    assert planned["Annotations"]["DesiredTGUpdates"]["frontend"]["Ignore"] == 3
    evaluated = http(system, "POST", "/v1/job/web/evaluate", {})[1]
    assert evaluated["EvalID"]
    # Scaling waits out the version's deployment (Nomad refuses it while one is active).
    wait_for(lambda: http(system, "GET", "/v1/job/web/deployment")[1]["Status"] == "successful")
    scaled = http(system, "POST", "/v1/job/web/scale", {"Count": 3, "Target": {"Group": "api"}})
    assert scaled[0] == 200
    events = http(system, "GET", "/v1/job/web/scale")[1]["TaskGroups"]["api"]["Events"]
    assert events[0]["Count"] == 3 and events[0]["PreviousCount"] == 2
    policies = http(system, "GET", "/v1/scaling/policies")[1]  # other tests' jobs have some too
    assert [p["Target"]["Group"] for p in policies if p["Target"]["Job"] == "web"] == ["api"]
    stable = http(system, "POST", "/v1/job/web/stable", {"JobVersion": 0, "Stable": True})
    assert stable[0] == 200
    stopped = http(system, "POST", f"/v1/allocation/{alloc_id}/stop", {})
    assert stopped[0] == 200 and stopped[1]["EvalID"]
    with open(EXAMPLES / "web.nomad", encoding="utf-8") as handle:
        parsed = http(system, "POST", "/v1/jobs/parse", {"JobHCL": handle.read()})[1]
    assert parsed["ID"] == "web"
    status, reply, _ = http(system, "DELETE", "/v1/job/web?purge=true")
    assert status == 200
    wait_for(lambda: http(system, "GET", "/v1/job/web")[0] == 404)


def test_a_small_job_is_placed_when_its_registration_is_answered(system: DroverSystem) -> None:
    # The leader schedules a small job itself before it answers, and the API answers once
    # its replica holds what the leader had committed (python-nomad's test_get_allocation
    # lists a job's allocations right after registering it, as Nomad places that fast).
    for round_ in range(3):
        job_id = f"quick-{round_}"
        job = job_to_nomad(parse_job_file(EXAMPLES / "web.nomad")) | {"ID": job_id, "Name": job_id}
        status, reply, _ = http(system, "POST", "/v1/jobs", {"Job": job})
        assert status == 200, reply
        allocs = http(system, "GET", f"/v1/job/{job_id}/allocations")[1]
        assert len(allocs) == 5, (round_, allocs)
        assert {a["EvalID"] for a in allocs} == {reply["EvalID"]}
        assert http(system, "GET", f"/v1/evaluation/{reply['EvalID']}")[1]["Status"] == "complete"
        assert http(system, "DELETE", f"/v1/job/{job_id}?purge=true")[0] == 200


@pytest.mark.skipif(sys.platform != "linux", reason="a nice value per thread is Linux's")
def test_the_apis_threads_run_at_the_actors_priority(
    system: DroverSystem,
) -> None:
    assert http(system, "GET", "/v1/jobs")[0] == 200  # a handler thread exists
    niceness = {
        thread.name: os.getpriority(os.PRIO_PROCESS, thread.native_id)
        for thread in threading.enumerate()
        if thread.native_id is not None
    }
    api = {name: nice for name, nice in niceness.items() if name.startswith("drover-http")}
    assert api and set(api.values()) == {max(API_NICENESS, niceness["MainThread"])}, niceness


def test_nodes_and_status_endpoints_over_http(system: DroverSystem) -> None:
    nodes = http(system, "GET", "/v1/nodes?resources=true")[1]
    assert len(nodes) >= 6 and all("NodeResources" in n and n["Drain"] is False for n in nodes)
    node_id = next(n["ID"] for n in nodes if n["Name"].startswith("sim-"))
    assert http(system, "GET", f"/v1/node/{node_id}")[1]["ID"] == node_id
    assert isinstance(http(system, "GET", f"/v1/node/{node_id}/allocations")[1], list)
    drained = http(system, "POST", f"/v1/node/{node_id}/drain", {"DrainSpec": {"Deadline": 10**9}})
    assert drained[0] == 200
    undrained = http(
        system, "POST", f"/v1/node/{node_id}/drain", {"DrainSpec": None, "MarkEligible": True}
    )
    assert undrained[0] == 200
    eligibility = http(
        system, "POST", f"/v1/node/{node_id}/eligibility", {"Eligibility": "ineligible"}
    )
    assert eligibility[0] == 200
    node = http(system, "GET", f"/v1/node/{node_id}")[1]
    assert node["SchedulingEligibility"] == "ineligible"
    http(system, "POST", f"/v1/node/{node_id}/eligibility", {"Eligibility": "eligible"})
    # The leader is named as Nomad names a server: the advertise host and the RPC port.
    host = system.http_address.removeprefix("http://").rpartition(":")[0]
    assert http(system, "GET", "/v1/status/leader")[1] == f"{host}:4647"
    assert http(system, "GET", "/v1/status/peers")[1] == [f"{host}:4647"]
    assert http(system, "GET", "/v1/regions")[1] == ["global"]


def test_bad_input_and_unknown_ids_over_http(system: DroverSystem) -> None:
    status, message, _ = http(system, "POST", "/v1/jobs", raw=b"{oops")
    assert status == 400 and "invalid JSON" in message
    job = job_to_nomad(parse_job_file(EXAMPLES / "web.nomad"))
    job["Priority"] = "high"
    status, message, _ = http(system, "POST", "/v1/jobs", {"Job": job})
    assert status == 400 and "Priority" in message and "high" in message
    assert http(system, "GET", "/v1/job/ghost")[:2] == (404, 'job "ghost" not found')
    assert http(system, "GET", "/v1/evaluation/ghost")[0] == 404
    assert http(system, "GET", "/v1/allocation/ghost")[0] == 404
    assert http(system, "GET", "/v1/node/ghost")[0] == 404
    status, message, _ = http(system, "POST", "/v1/jobs", raw=b"x" * (9 * 1024 * 1024))
    assert status == 413 and "too large" in message


def test_blocking_query_over_http_waits_for_a_change(system: DroverSystem) -> None:
    """A client follows /v1/jobs with blocking queries until a job registered meanwhile shows
    up. Every answer must come with an index past the one it waited on: an answer given
    without waiting (or at the end of the 60 s wait) would repeat it. The timed-out answer
    itself is covered in tests/actors/api/core/test_api.py, where nothing else writes."""
    _, _, headers = http(system, "GET", "/v1/jobs")
    seen: list[tuple[int, int]] = []  # (index waited on, index answered)
    found = threading.Event()

    def follow(index: int) -> None:
        while not found.is_set():
            status, jobs, headers = http(system, "GET", f"/v1/jobs?index={index}&wait=60s")
            assert status == 200
            seen.append((index, int(headers["X-Nomad-Index"])))
            if "blocking-wake" in [j["ID"] for j in jobs] or seen[-1][1] <= index:
                found.set()
            index = seen[-1][1]

    follower = threading.Thread(target=follow, args=(int(headers["X-Nomad-Index"]),))
    follower.start()
    job = job_to_nomad(parse_job_file(EXAMPLES / "batch.nomad"))
    job["ID"] = job["Name"] = "blocking-wake"
    assert http(system, "POST", "/v1/jobs", {"Job": job})[0] == 200
    follower.join(timeout=90)
    assert not follower.is_alive(), "the blocking query never saw the new job"
    assert seen and all(answered > waited for waited, answered in seen), seen


def test_fleet_apply_over_the_cli(run_cli, tmp_path: Path, system: DroverSystem) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        "type: fleet\nname: gpu\nnodes: 2\n"
        "resources: {cpu: 8, memory: 32GB, gpu: {count: 2, name: H100}}\nnode_class: gpu\n"
    )
    code, out, _ = run_cli("fleet", "apply", str(fleet))
    assert code == 0 and 'Fleet "gpu" applied: 2 instances' in out
    code, out, _ = run_cli("fleet", "status", "-json")
    fleets = {f["Name"]: f for f in orjson.loads(out)}
    assert fleets["gpu"]["Ready"] == 2 and fleets["gpu"]["GPUs"] == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("type: fleet\nname: x\nnodes: lots\n")
    code, _, err = run_cli("fleet", "apply", str(bad))
    assert code == 1 and "nodes" in err and "'lots'" in err and err.count("\n") == 1


# -- python-nomad ---------------------------------------------------------------------------------


def test_python_nomad_client_works_unchanged(system: DroverSystem) -> None:
    host, port = system.http_address.removeprefix("http://").split(":")
    client = nomad.Nomad(host=host, port=int(port), token=TOKEN, timeout=30)
    job = {"Job": job_to_nomad(parse_job_file(EXAMPLES / "batch.nomad"))}
    job_id = job["Job"]["ID"]
    reply = client.job.register_job(job_id, job)
    assert reply["EvalID"]
    assert client.job.get_job(job_id)["ID"] == job_id
    assert job_id in client.jobs
    assert client.job.get_versions(job_id)["Versions"][0]["Version"] == 0
    wait_for(lambda: len(client.job.get_allocations(job_id)) > 0)
    assert client.job.get_allocations(job_id)[0]["JobID"] == job_id
    assert client.job.get_evaluations(job_id)[0]["JobID"] == job_id
    assert any(n["Name"].startswith("sim-") for n in client.nodes.get_nodes())
    assert client.status.leader.get_leader() == f"{host}:4647"
    with pytest.raises(nomad.api.exceptions.URLNotFoundNomadException):
        client.job.get_job("no-such-job")


# -- the three peer failures, as CLI scenarios ----------------------------------------------------

SCALED_JOB = """
job "autoscaled" {{
  datacenters = ["dc1"]
  group "web" {{
    count = 10
    scaling {{
      min = 10
      max = 30
    }}
    task "server" {{
      driver = "mock"
      config {{ run_for = "1h" }}
      env {{ RELEASE = "{release}" }}
      resources {{
        cpu    = 20
        memory = 16
      }}
    }}
  }}
{extra}}}
"""

EXTRA_GROUP = """
  group "extra" {
    count = 2
    task "sidecar" {
      driver = "mock"
      config { run_for = "1h" }
      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
"""


def _group_counts(run_cli, job_id: str) -> dict[str, int]:
    code, out, _ = run_cli("job", "inspect", job_id)
    assert code == 0
    return {tg["Name"]: tg["Count"] for tg in orjson.loads(out)["Job"]["TaskGroups"]}


def test_preserve_counts_scenario(run_cli, tmp_path: Path) -> None:
    spec = tmp_path / "autoscaled.nomad"
    spec.write_text(SCALED_JOB.format(release="1", extra=""))
    code, out, _ = run_cli("job", "run", str(spec))
    assert code == 0, out
    assert 'finished with status "complete"' in out and "Allocation" in out
    assert run_cli("job", "scale", "autoscaled", "web", "30")[0] == 0
    assert _group_counts(run_cli, "autoscaled") == {"web": 30}

    # A changed spec without -preserve-counts resets the group to the file's count ...
    spec.write_text(SCALED_JOB.format(release="2", extra=""))
    assert run_cli("job", "run", "-detach", str(spec))[0] == 0
    assert _group_counts(run_cli, "autoscaled") == {"web": 10}

    # ... with -preserve-counts the autoscaled count stays, and a new group takes the file's.
    assert run_cli("job", "scale", "autoscaled", "web", "30")[0] == 0
    spec.write_text(SCALED_JOB.format(release="3", extra=EXTRA_GROUP))
    assert run_cli("job", "run", "-preserve-counts", str(spec))[0] == 0
    assert _group_counts(run_cli, "autoscaled") == {"web": 30, "extra": 2}
    code, out, _ = run_cli("job", "scaling-events", "autoscaled")
    assert code == 0 and "30" in out and "PrevCount" in out


def test_stop_revert_version_status_scenario(run_cli, tmp_path: Path) -> None:
    """Nomad #24957: run (v0) -> stop (v1) -> revert to v0 (v2): v1 dead, v2 running."""
    spec = tmp_path / "reverted.nomad"
    spec.write_text(SCALED_JOB.format(release="1", extra="").replace("autoscaled", "reverted"))
    assert run_cli("job", "run", str(spec))[0] == 0
    assert run_cli("job", "stop", "reverted")[0] == 0
    code, out, _ = run_cli("job", "revert", "reverted", "0")
    assert code == 0, out

    def version_status(version: int) -> str:
        code, out, _ = run_cli("job", "inspect", "-version", str(version), "reverted")
        assert code == 0
        return str(orjson.loads(out)["Job"]["Status"])

    wait_for(lambda: version_status(2) == "running")
    assert version_status(1) == "dead"

    # `job history` lists the versions newest first.
    code, out, _ = run_cli("job", "history", "reverted")
    assert code == 0
    listed = [int(line.split("=")[1]) for line in out.splitlines() if line.startswith("Version")]
    assert listed == [2, 1, 0]
    code, out, _ = run_cli("job", "history", "-json", "reverted")
    assert [v["Version"] for v in orjson.loads(out)] == [2, 1, 0]
    code, out, _ = run_cli("job", "status", "reverted")
    assert code == 0 and "running" in out and "Allocations" in out


def test_cli_reads_and_errors(run_cli, tmp_path: Path) -> None:
    # Its own job, evaluation and allocations: nothing here relies on what other tests left.
    spec = tmp_path / "cli-reads.nomad"
    spec.write_text(SCALED_JOB.format(release="1", extra="").replace("autoscaled", "cli-reads"))
    code, out, _ = run_cli("job", "run", str(spec))
    assert code == 0 and 'finished with status "complete"' in out, out
    code, out, _ = run_cli("job", "status")
    assert code == 0 and out.splitlines()[0].split()[:2] == ["ID", "Type"]
    code, out, _ = run_cli("node", "status")
    assert code == 0 and "Eligibility" in out.splitlines()[0]
    code, out, _ = run_cli("eval", "list", "-json")
    evals = orjson.loads(out)
    assert code == 0 and evals
    code, out, _ = run_cli("eval", "status", evals[0]["ID"][:8])
    assert code == 0 and evals[0]["ID"] in out
    code, out, _ = run_cli("job", "status", "-json", "cli-reads")
    alloc_id = orjson.loads(out)["Allocations"][0]["ID"]
    code, out, _ = run_cli("alloc", "status", alloc_id[:8])
    assert code == 0 and alloc_id in out
    node_name = "sim-0000"
    assert run_cli("node", "eligibility", "-disable", node_name)[0] == 0
    code, out, _ = run_cli("node", "status", "-json", node_name)
    assert orjson.loads(out)["Node"]["SchedulingEligibility"] == "ineligible"
    assert run_cli("node", "eligibility", "-enable", node_name)[0] == 0
    # A job never registered (whatever other tests did with "web"): plan places everything
    # (exit 1, as Nomad's) and -check-index 1 conflicts with its absence.
    unregistered = tmp_path / "cli-plan.nomad"
    web = (EXAMPLES / "web.nomad").read_text()
    unregistered.write_text(web.replace('job "web"', 'job "cli-plan"'))
    code, out, _ = run_cli("job", "plan", str(unregistered))
    assert code == 1 and "All tasks successfully allocated" in out and "-check-index" in out
    code, _, err = run_cli("job", "status", "ghost")
    assert code == 1 and "404" in err and "ghost" in err and err.count("\n") == 1
    code, _, err = run_cli("job", "run", str(tmp_path / "missing.nomad"))
    assert code == 1 and "missing.nomad" in err
    code, _, err = run_cli("job", "run", "-check-index", "1", str(unregistered))
    assert code == 1 and "409" in err


def test_writes_go_on_through_a_leader_restart(system: DroverSystem) -> None:
    """The API sends writes on the leader's request stream, not through the actor: a write
    sent as the leader dies waits on the stream and the restarted leader (a new term, its
    store rebuilt from the log) answers it, in full."""
    term = ray.get(system.leader.stats.remote())["term"]
    ray.kill(system.leader, no_restart=False)
    job = job_to_nomad(parse_job_file(EXAMPLES / "batch.nomad"))
    job["ID"] = job["Name"] = "across-restart"
    status, reply, _ = http(system, "POST", "/v1/jobs", {"Job": job})
    assert status == 200 and reply["EvalID"] and reply["JobModifyIndex"] > 0, reply
    wait_for(lambda: _leader_term(system) == term + 1, timeout_s=60)
    eval_id = reply["EvalID"]
    wait_for(lambda: http(system, "GET", f"/v1/evaluation/{eval_id}")[1]["Status"] == "complete")
    assert http(system, "GET", "/v1/job/across-restart/allocations")[1]
    # And the next write is the new leader's.
    job["ID"] = job["Name"] = "after-restart"
    status, reply, _ = http(system, "POST", "/v1/jobs", {"Job": job})
    assert status == 200 and reply["EvalID"]


def test_python_nomad_makes_a_policy_and_a_client_token_that_can_do_only_what_it_grants(
    system: DroverSystem,
) -> None:
    host, port = system.http_address.removeprefix("http://").rsplit(":", 1)
    root = nomad.Nomad(host=host, port=int(port), token=TOKEN, timeout=30)
    rules = 'namespace "default" {\n  policy = "read"\n  capabilities = ["scale-job"]\n}\n'
    root.acl.create_policy("reader", {"Name": "reader", "Description": "ci", "Rules": rules})
    assert "reader" in [p["Name"] for p in root.acl.get_policies()]
    assert root.acl.get_policy("reader")["Rules"] == rules
    made = root.acl.create_token({"Name": "ci", "Type": "client", "Policies": ["reader"]})
    assert made["SecretID"] and made["Policies"] == ["reader"]
    ci = nomad.Nomad(host=host, port=int(port), token=made["SecretID"], timeout=30)
    assert ci.acl.get_self_token()["AccessorID"] == made["AccessorID"]
    assert isinstance(ci.jobs.get_jobs(), list)  # read: granted
    job = {"Job": job_to_nomad(parse_job_file(EXAMPLES / "batch.nomad"))}
    job["Job"]["ID"] = job["Job"]["Name"] = "acl-refused"
    with pytest.raises(nomad.api.exceptions.URLNotAuthorizedNomadException):
        ci.job.register_job("acl-refused", job)  # submit-job: not granted
    with pytest.raises(nomad.api.exceptions.URLNotAuthorizedNomadException):
        ci.nodes.get_nodes()  # no node rule
    assert root.acl.delete_token(made["AccessorID"])
    with pytest.raises(nomad.api.exceptions.URLNotAuthorizedNomadException):
        ci.jobs.get_jobs()
