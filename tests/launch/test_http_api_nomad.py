"""Nomad endpoints and checks of issue 18 against a running agent over real HTTP (real Ray
actors, the embedded Redis, ACLs on): search and fuzzy search, a forced GC and Node.Evaluate,
the leader's address without a token and a drain without a deadline, the eval priority, node
pool and scale index checks, allocations' TaskStates (with `drover alloc status`), signals
reaching a raw_exec task and the client GC removing its folder (with `drover alloc signal`),
and a dispatched payload read by its raw_exec task."""

from __future__ import annotations

import base64
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nomad
import orjson
import pytest

from actors.agent.core import FleetSpec
from actors.api.core.shapes import job_to_nomad
from contracts.jobspec import parse_hcl_with_warnings
from launch.cli import main as cli
from launch.system import DroverSystem, SystemConfig

TOKEN = "5d1e3c9a-7b2f-4c6e-8a1d-0f9e8d7c6b5a"

JOB = """
job "{job_id}" {{
  datacenters = ["dc1"]
  type = "{kind}"
  group "front" {{
    count = {count}
    task "server" {{
      driver = "mock"
      config {{ run_for = "{run_for}" }}
      resources {{
        cpu    = 40
        memory = 32
      }}
    }}
  }}
}}
"""


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DroverSystem]:
    config = SystemConfig(
        data_dir=Path(tmp_path_factory.mktemp("drover-http-nomad")),
        workers=1,
        num_cpus=2,
        fleets=[
            FleetSpec(
                name="sim",
                count=3,
                cpu_mhz=4000,
                memory_mb=8192,
                disk_mb=20_000,
                drivers=("mock", "raw_exec"),
            )
        ],
        raw_exec=True,  # the signal and payload tests run real processes
        http_addr="127.0.0.1:0",
        acl_enabled=True,
        acl_bootstrap_token=TOKEN,
    )
    with DroverSystem(config) as running:
        yield running


def http(
    system: DroverSystem, method: str, path: str, body: Any = None, token: str | None = TOKEN
) -> tuple[int, Any]:
    data = orjson.dumps(body) if body is not None else None
    request = urllib.request.Request(system.http_address + path, data=data, method=method)
    if token:
        request.add_header("X-Nomad-Token", token)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read()
            return response.status, orjson.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode().strip()


def job(job_id: str, *, kind: str = "service", count: int = 2, run_for: str = "1h") -> dict:
    text = JOB.format(job_id=job_id, kind=kind, count=count, run_for=run_for)
    return job_to_nomad(parse_hcl_with_warnings(text)[0])


def wait_for(check: Any, what: str, timeout_s: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def running(system: DroverSystem, job_id: str, count: int) -> list[dict]:
    def check() -> list[dict] | None:
        allocs = http(system, "GET", f"/v1/job/{job_id}/allocations")[1]
        live = [a for a in allocs if a["ClientStatus"] == "running"]
        return live if len(live) == count else None

    return list(wait_for(check, f"{count} running allocations of {job_id}"))


def test_search_and_fuzzy_search_over_http(system: DroverSystem) -> None:
    status, reply = http(system, "POST", "/v1/jobs", {"Job": job("finder")})
    assert status == 200
    allocs = running(system, "finder", 2)
    status, found = http(system, "POST", "/v1/search", {"Prefix": "fin", "Context": "all"})
    assert status == 200 and found["Matches"]["jobs"] == ["finder"]
    assert found["Truncations"]["jobs"] is False
    by_id = http(system, "PUT", "/v1/search", {"Prefix": allocs[0]["ID"][:8], "Context": "allocs"})
    assert by_id[1]["Matches"]["allocs"] == [allocs[0]["ID"]]
    evals = http(system, "POST", "/v1/search", {"Prefix": reply["EvalID"], "Context": "evals"})
    assert evals[1]["Matches"] == {"evals": [reply["EvalID"]]}
    fuzzy = http(system, "POST", "/v1/search/fuzzy", {"Text": "serv", "Context": "jobs"})[1]
    assert {"ID": "server", "Scope": ["default", "finder", "front"]} in fuzzy["Matches"]["tasks"]
    assert (
        http(system, "POST", "/v1/search", {"Prefix": "f", "Context": "all"}, token=None)[0] == 403
    )
    bad = http(system, "POST", "/v1/search/fuzzy", {"Text": "x", "Context": "jobs"})
    assert bad[0] == 400 and "at least 2 characters" in bad[1]


def test_node_evaluate_and_system_gc_over_http(system: DroverSystem) -> None:
    assert (
        http(system, "POST", "/v1/jobs", {"Job": job("brief", kind="batch", run_for="1s")})[0]
        == 200
    )
    allocs = wait_for(
        lambda: (
            [
                a
                for a in http(system, "GET", "/v1/job/brief/allocations")[1]
                if a["ClientStatus"] == "complete"
            ]
            or None
        ),
        "the batch job's allocations to complete",
    )
    node_id = allocs[0]["NodeID"]
    status, evaluated = http(system, "PUT", f"/v1/node/{node_id}/evaluate", {})
    assert status == 200 and set(evaluated) == {
        "EvalIDs",
        "EvalCreateIndex",
        "NodeModifyIndex",
        "Index",
    }
    for eval_id in evaluated["EvalIDs"]:
        ev = http(system, "GET", f"/v1/evaluation/{eval_id}")[1]
        assert ev["TriggeredBy"] == "node-update" and ev["NodeID"] == node_id
    assert http(system, "POST", "/v1/node/ghost/evaluate", {})[0] == 404
    # The batch job is done: once its evals are done too, a forced GC takes it all.
    wait_for(
        lambda: all(
            e["Status"] == "complete" for e in http(system, "GET", "/v1/job/brief/evaluations")[1]
        ),
        "the job's evaluations to complete",
    )
    assert http(system, "PUT", "/v1/system/gc", token=None)[0] == 403  # management only
    assert http(system, "PUT", "/v1/system/gc")[0] == 200
    assert http(system, "GET", "/v1/job/brief")[0] == 404
    assert http(system, "GET", f"/v1/allocation/{allocs[0]['ID']}")[0] == 404


def test_leader_needs_no_token_and_a_drain_without_deadline_has_none(
    system: DroverSystem,
) -> None:
    status, leader = http(system, "GET", "/v1/status/leader", token=None)
    host = system.http_address.removeprefix("http://").rpartition(":")[0]
    assert status == 200 and leader == f"{host}:4647"
    assert http(system, "POST", "/v1/jobs", {"Job": job("held", count=3)})[0] == 200
    node_id = running(system, "held", 3)[0]["NodeID"]
    status, _ = http(system, "POST", f"/v1/node/{node_id}/drain", {"DrainSpec": {}})
    assert status == 200
    node = http(system, "GET", f"/v1/node/{node_id}")[1]
    strategy = node["DrainStrategy"]
    # Service allocations migrate at once; while it drains, the strategy has no deadline.
    assert strategy is None or strategy["DrainSpec"]["Deadline"] == 0
    undrain = {"DrainSpec": None, "MarkEligible": True}
    assert http(system, "POST", f"/v1/node/{node_id}/drain", undrain)[0] == 200


def test_job_checks_nomad_makes_over_http(system: DroverSystem) -> None:
    status, reply = http(system, "POST", "/v1/jobs", {"Job": job("urgent"), "EvalPriority": 95})
    assert status == 200
    assert http(system, "GET", f"/v1/evaluation/{reply['EvalID']}")[1]["Priority"] == 95
    pooled = job("pooled")
    pooled["NodePool"] = "nowhere"
    status, message = http(system, "POST", "/v1/jobs", {"Job": pooled})
    assert (status, message) == (400, 'job "pooled" is in nonexistent node pool "nowhere"')
    current = http(system, "GET", "/v1/job/urgent")[1]["JobModifyIndex"]
    stale = {"Count": 3, "Target": {"Group": "front"}, "JobModifyIndex": current + 100}
    status, message = http(system, "POST", "/v1/job/urgent/scale", stale)
    assert status == 400 and message.startswith(f"Enforcing job modify index {current + 100}:")
    status, stopped = http(system, "DELETE", "/v1/job/urgent?eval_priority=7")
    assert status == 200
    assert http(system, "GET", f"/v1/evaluation/{stopped['EvalID']}")[1]["Priority"] == 7


def test_allocations_carry_task_states_and_alloc_status_shows_them(
    system: DroverSystem, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert http(system, "POST", "/v1/jobs", {"Job": job("stately", count=1)})[0] == 200
    (alloc,) = running(system, "stately", 1)
    assert alloc["TaskStates"]["server"]["State"] == "running"
    full = http(system, "GET", f"/v1/allocation/{alloc['ID']}")[1]
    state = full["TaskStates"]["server"]
    assert state["Failed"] is False and state["Restarts"] == 0
    assert [e["Type"] for e in state["Events"]] == ["Received", "Started"]
    assert not state["StartedAt"].startswith("0001")
    tasks = full["AllocatedResources"]["Tasks"]["server"]
    assert tasks["Cpu"]["CpuShares"] == 40 and tasks["Memory"]["MemoryMB"] == 32
    listed = http(system, "GET", "/v1/allocations?resources=true")[1]
    mine = next(a for a in listed if a["ID"] == alloc["ID"])
    assert mine["TaskStates"]["server"]["State"] == "running"
    assert mine["AllocatedResources"]["Tasks"]["server"]["Cpu"]["CpuShares"] == 40

    monkeypatch.setenv("DROVER_ADDR", system.http_address)
    monkeypatch.setenv("DROVER_TOKEN", TOKEN)
    assert cli(["alloc", "status", alloc["ID"][:8]]) == 0
    out = capsys.readouterr().out
    assert 'Task "server" is "running"' in out and "Total Restarts = 0" in out
    assert "Recent Events:" in out and "Task started by client" in out


def test_python_nomad_calls_these_endpoints_unchanged(system: DroverSystem) -> None:
    host, port = system.http_address.removeprefix("http://").split(":")
    client = nomad.Nomad(host=host, port=int(port), token=TOKEN, timeout=30)
    client.job.register_job("pyjob", {"Job": job("pyjob", count=1)})
    running(system, "pyjob", 1)
    assert client.search.search("pyj", "jobs")["Matches"]["jobs"] == ["pyjob"]
    fuzzy = client.search.fuzzy_search("pyj", "all")["Matches"]
    assert [m["ID"] for m in fuzzy["jobs"]] == ["pyjob"]
    node_id = client.nodes.get_nodes()[0]["ID"]
    assert "EvalIDs" in client.node.evaluate_node(node_id)
    assert client.system.initiate_garbage_collection() is True


TEMPLATE = """
job "{job_id}" {{
  datacenters = ["dc1"]
  type = "batch"
  {block}
  group "work" {{
    task "run" {{
      driver = "mock"
      config {{ run_for = "30s" }}
      resources {{
        cpu    = 20
        memory = 16
      }}
    }}
  }}
}}
"""


def template(job_id: str, block: str) -> dict:
    return job_to_nomad(parse_hcl_with_warnings(TEMPLATE.format(job_id=job_id, block=block))[0])


def test_parameterized_jobs_dispatch_over_http_python_nomad_and_the_cli(
    system: DroverSystem, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    block = 'parameterized {\n payload = "optional"\n meta_required = ["input"]\n }'
    status, reply = http(system, "POST", "/v1/jobs", {"Job": template("convert", block)})
    assert status == 200 and reply["EvalID"] == ""
    parent = http(system, "GET", "/v1/job/convert")[1]
    assert parent["ParameterizedJob"]["MetaRequired"] == ["input"]
    assert parent["Status"] == "running"
    stub = next(j for j in http(system, "GET", "/v1/jobs")[1] if j["ID"] == "convert")
    assert stub["ParameterizedJob"] is True and stub["ParentID"] == ""
    # Never scheduled itself.
    assert http(system, "GET", "/v1/job/convert/evaluations")[1] == []

    body = {"Meta": {"input": "a.csv"}, "Payload": "aGVsbG8="}
    status, reply = http(system, "POST", "/v1/job/convert/dispatch", body)
    assert status == 200 and reply["EvalID"] and reply["JobCreateIndex"] > 0
    child_id = reply["DispatchedJobID"]
    assert child_id.startswith("convert/dispatch-")
    child = http(system, "GET", f"/v1/job/{child_id.replace('/', '%2F')}")[1]
    assert child["ParentID"] == "convert" and child["Dispatched"] is True
    assert child["Meta"]["input"] == "a.csv" and child["Payload"] == "aGVsbG8="
    running(system, child_id.replace("/", "%2F"), 1)

    refused = http(system, "POST", "/v1/job/convert/dispatch", {"Meta": {"other": "x"}})
    assert refused[0] == 400 and "unpermitted metadata keys: ['other']" in refused[1]
    missing = http(system, "POST", "/v1/job/nope/dispatch", {})
    assert missing[0] == 404

    host, port = system.http_address.removeprefix("http://").split(":")
    client = nomad.Nomad(host=host, port=int(port), token=TOKEN, timeout=30)
    first = client.job.dispatch_job("convert", meta={"input": "b"}, idempotency_token="t1")
    again = client.job.dispatch_job("convert", meta={"input": "b"}, idempotency_token="t1")
    assert first["DispatchedJobID"] == again["DispatchedJobID"] and again["EvalID"] == ""

    monkeypatch.setenv("DROVER_ADDR", system.http_address)
    monkeypatch.setenv("DROVER_TOKEN", TOKEN)
    assert cli(["job", "dispatch", "-detach", "-meta", "input=c", "convert"]) == 0
    out = capsys.readouterr().out
    assert "Dispatched Job ID = convert/dispatch-" in out and "Evaluation ID" in out
    children = [j for j in http(system, "GET", "/v1/jobs")[1] if j["ParentID"] == "convert"]
    assert len(children) == 3


def test_periodic_jobs_register_without_an_eval_and_force_launch(
    system: DroverSystem, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    block = 'periodic {\n crons = ["@yearly"]\n prohibit_overlap = true\n }'
    status, reply = http(system, "POST", "/v1/jobs", {"Job": template("nightly", block)})
    assert status == 200 and reply["EvalID"] == ""
    parent = http(system, "GET", "/v1/job/nightly")[1]
    assert parent["Periodic"]["Spec"] == "@yearly" and parent["Periodic"]["ProhibitOverlap"]
    refused = http(system, "POST", "/v1/job/nightly/evaluate", {})
    assert refused[0] == 400 and "can't evaluate periodic job" in refused[1]

    status, forced = http(system, "POST", "/v1/job/nightly/periodic/force", {})
    assert status == 200 and forced["EvalID"]
    evaluation = http(system, "GET", f"/v1/evaluation/{forced['EvalID']}")[1]
    assert evaluation["TriggeredBy"] == "periodic-job"
    assert evaluation["JobID"].startswith("nightly/periodic-")
    running(system, evaluation["JobID"].replace("/", "%2F"), 1)

    host, port = system.http_address.removeprefix("http://").split(":")
    client = nomad.Nomad(host=host, port=int(port), token=TOKEN, timeout=30)
    assert client.job.periodic_job("nightly")["EvalID"]
    not_periodic = http(system, "POST", "/v1/job/convert-none/periodic/force", {})
    assert not_periodic[0] == 404

    monkeypatch.setenv("DROVER_ADDR", system.http_address)
    monkeypatch.setenv("DROVER_TOKEN", TOKEN)
    assert cli(["job", "periodic", "force", "-detach", "nightly"]) == 0
    assert "Evaluation ID:" in capsys.readouterr().out


SERVICE = """
job "rollout" {{
  datacenters = ["dc1"]
  group "web" {{
    count = 2
    update {{
      max_parallel     = 1
      canary           = {canary}
      min_healthy_time = "1s"
      healthy_deadline = "60s"
      auto_revert      = true
    }}
    task "server" {{
      driver = "mock"
      env {{ VERSION = "{version}" }}
      config {{ run_for = "1h" }}
      resources {{
        cpu    = 20
        memory = 16
      }}
    }}
  }}
}}
"""


def rollout(version: str, canary: int = 0) -> dict:
    text = SERVICE.format(version=version, canary=canary)
    return job_to_nomad(parse_hcl_with_warnings(text)[0])


def test_deployments_roll_out_promote_canaries_and_answer_as_nomad(
    system: DroverSystem, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert http(system, "POST", "/v1/jobs", {"Job": rollout("1")})[0] == 200

    def latest(status: str) -> dict | None:
        found = http(system, "GET", "/v1/job/rollout/deployment")[1]
        return found if found and found["Status"] == status else None

    first = wait_for(lambda: latest("successful"), "the first deployment to succeed")
    assert first["StatusDescription"] == "Deployment completed successfully"
    assert first["TaskGroups"]["web"]["HealthyAllocs"] == 2
    versions = http(system, "GET", "/v1/job/rollout/versions")[1]["Versions"]
    assert versions[0]["Stable"] is True

    # A new version with a canary: it waits for promotion, and scaling is refused meanwhile.
    assert http(system, "POST", "/v1/jobs", {"Job": rollout("2", canary=1)})[0] == 200
    second = wait_for(lambda: latest("running"), "the canary deployment")
    assert second["ID"] != first["ID"]
    assert second["StatusDescription"] == "Deployment is running but requires manual promotion"

    def canary_healthy() -> dict | None:
        allocs = http(system, "GET", f"/v1/deployment/allocations/{second['ID']}")[1]
        status = [a["DeploymentStatus"] for a in allocs]
        return allocs[0] if len(allocs) == 1 and status[0]["Healthy"] is True else None

    canary = wait_for(canary_healthy, "the canary to be healthy")
    assert canary["DeploymentStatus"]["Canary"] is True
    scale = {"Count": 3, "Target": {"Group": "web"}}
    blocked = http(system, "POST", "/v1/job/rollout/scale", scale)
    assert blocked[0] == 400 and "job scaling blocked due to active deployment" in blocked[1]

    host, port = system.http_address.removeprefix("http://").split(":")
    client = nomad.Nomad(host=host, port=int(port), token=TOKEN, timeout=30)
    assert client.deployment.promote_deployment_all(second["ID"])["EvalID"]
    done = wait_for(lambda: latest("successful"), "the promoted deployment to succeed")
    assert done["ID"] == second["ID"] and done["TaskGroups"]["web"]["Promoted"] is True
    live = [
        a
        for a in http(system, "GET", "/v1/job/rollout/allocations")[1]
        if a["DesiredStatus"] == "run"
    ]
    assert len(live) == 2 and {a["JobVersion"] for a in live} == {done["JobVersion"]}

    with pytest.raises(nomad.api.exceptions.BadRequestNomadException) as refused:
        client.deployment.fail_deployment(second["ID"])
    assert refused.value.nomad_resp.text.strip() == "can't fail terminal deployment"
    listed = [d["ID"] for d in client.deployments.get_deployments()]
    assert {first["ID"], second["ID"]} <= set(listed)
    assert len(http(system, "GET", "/v1/job/rollout/deployments")[1]) == 2

    monkeypatch.setenv("DROVER_ADDR", system.http_address)
    monkeypatch.setenv("DROVER_TOKEN", TOKEN)
    assert cli(["deployment", "status", second["ID"][:8]]) == 0
    out = capsys.readouterr().out
    assert "Deployment completed successfully" in out and "Promoted" in out
    assert cli(["deployment", "list"]) == 0
    assert second["ID"][:8] in capsys.readouterr().out


HOG = """
job "{job_id}" {{
  datacenters = ["dc1"]
  priority = {priority}
  group "g" {{
    count = {count}
    constraint {{ operator = "distinct_hosts" value = "true" }}
    task "t" {{
      driver = "mock"
      config {{ run_for = "1h" }}
      resources {{
        cpu    = {cpu}
        memory = 16
      }}
    }}
  }}
}}
"""


def hog(job_id: str, priority: int, count: int, cpu: int) -> dict:
    text = HOG.format(job_id=job_id, priority=priority, count=count, cpu=cpu)
    return job_to_nomad(parse_hcl_with_warnings(text)[0])


def test_scheduler_configuration_and_service_preemption_over_http(system: DroverSystem) -> None:
    path = "/v1/operator/scheduler/configuration"
    status, config = http(system, "GET", path)
    assert status == 200
    assert config["SchedulerConfig"]["PreemptionConfig"] == {
        "SystemSchedulerEnabled": True,
        "SysBatchSchedulerEnabled": False,
        "BatchSchedulerEnabled": False,
        "ServiceSchedulerEnabled": False,
    }
    assert config["SchedulerConfig"]["SchedulerAlgorithm"] == "binpack"
    wanted = dict(config["SchedulerConfig"])
    wanted["PreemptionConfig"] = {**wanted["PreemptionConfig"], "ServiceSchedulerEnabled": True}
    stale = config["SchedulerConfig"]["ModifyIndex"] + 12345
    assert http(system, "PUT", f"{path}?cas={stale}", wanted)[1]["Updated"] is False
    assert http(system, "PUT", path, {"SchedulerAlgorithm": "fastest"})[0] == 400
    assert http(system, "PUT", path, wanted, token=None)[0] == 403
    current = config["SchedulerConfig"]["ModifyIndex"]
    assert http(system, "PUT", f"{path}?cas={current}", wanted)[1]["Updated"] is True
    try:
        nodes = len(http(system, "GET", "/v1/nodes")[1])
        assert http(system, "POST", "/v1/jobs", {"Job": hog("filler", 20, nodes, 3500)})[0] == 200
        running(system, "filler", nodes)
        assert http(system, "POST", "/v1/jobs", {"Job": hog("urgent", 80, 1, 1500)})[0] == 200
        (placed,) = running(system, "urgent", 1)
        full = http(system, "GET", f"/v1/allocation/{placed['ID']}")[1]
        [victim_id] = full["PreemptedAllocations"]
        victim = http(system, "GET", f"/v1/allocation/{victim_id}")[1]
        assert victim["JobID"] == "filler" and victim["DesiredStatus"] == "evict"
        assert victim["DesiredDescription"] == f"Preempted by alloc ID {placed['ID']}"
        assert victim["PreemptedByAllocation"] == placed["ID"]
        evals = http(system, "GET", "/v1/job/filler/evaluations")[1]
        assert "preemption" in {e["TriggeredBy"] for e in evals}
    finally:
        for job_id in ("urgent", "filler"):
            http(system, "DELETE", f"/v1/job/{job_id}?purge=true")
        http(system, "PUT", path, config["SchedulerConfig"])


SIGNALLED = """
job "signalled" {{
  datacenters = ["dc1"]
  group "g" {{
    task "trap" {{
      driver = "raw_exec"
      config {{
        command = "/bin/sh"
        args    = ["-c", "trap 'echo got >> {out}' USR1 HUP; while :; do sleep 0.05; done"]
      }}
      kill_timeout = "1s"
      resources {{
        cpu    = 20
        memory = 16
      }}
    }}
    task "side" {{
      driver = "mock"
      resources {{
        cpu    = 20
        memory = 16
      }}
    }}
  }}
}}
"""


def alloc_dir(system: DroverSystem, alloc_id: str) -> Path:
    """Where the hosting agent's raw_exec driver keeps the allocation (<data>/allocs/<agent>)."""
    return next(system.config.data_dir.glob("allocs/*")) / alloc_id


def test_signals_reach_the_task_and_show_as_events_and_the_client_gc_collects(
    system: DroverSystem,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "signals"
    spec = job_to_nomad(parse_hcl_with_warnings(SIGNALLED.format(out=out))[0])
    assert http(system, "POST", "/v1/jobs", {"Job": spec})[0] == 200
    (alloc,) = running(system, "signalled", 1)
    path = f"/v1/client/allocation/{alloc['ID']}/signal"

    def lines(n: int) -> list[str]:
        def enough() -> list[str] | None:
            got = out.read_text().split() if out.exists() else []
            return got if len(got) >= n else None

        return list(wait_for(enough, f"{n} signals"))

    status, reply = http(system, "POST", path, {"Signal": "SIGUSR1", "Task": "trap"})
    assert (status, reply) == (200, {"Index": 0})
    assert lines(1) == ["got"]
    full = http(system, "GET", f"/v1/allocation/{alloc['ID']}")[1]
    (signaling,) = [e for e in full["TaskStates"]["trap"]["Events"] if e["Type"] == "Signaling"]
    assert signaling["DisplayMessage"] == "Task being sent signal SIGUSR1"
    assert signaling["Details"] == {"signal": "SIGUSR1"}
    assert all(e["Type"] != "Signaling" for e in full["TaskStates"]["side"]["Events"])

    # python-nomad's calls, unchanged: every task, then a signal Nomad does not know.
    host, port = system.http_address.removeprefix("http://").split(":")
    client = nomad.Nomad(host=host, port=int(port), token=TOKEN, timeout=30)
    assert client.client.allocation.signal_allocation(alloc["ID"], "SIGHUP") == {"Index": 0}
    assert lines(2) == ["got", "got"]
    with pytest.raises(nomad.api.exceptions.BaseNomadException, match="invalid signal"):
        client.client.allocation.signal_allocation(alloc["ID"], "INVALID-SIGNAL")
    nope = http(system, "POST", path, {"Signal": "SIGHUP", "Task": "nope"})
    assert nope[0] == 400 and 'Task not found: "nope"' in nope[1]
    full = http(system, "GET", f"/v1/allocation/{alloc['ID']}")[1]
    side = [e["Type"] for e in full["TaskStates"]["side"]["Events"]]
    assert side.count("Signaling") == 1  # the signal to every task reached the mock task too

    monkeypatch.setenv("DROVER_ADDR", system.http_address)
    monkeypatch.setenv("DROVER_TOKEN", TOKEN)
    assert cli(["alloc", "signal", "-s", "SIGUSR1", alloc["ID"][:8], "trap"]) == 0
    assert lines(3) == ["got"] * 3
    assert cli(["alloc", "status", alloc["ID"][:8]]) == 0
    assert "Task being sent signal SIGUSR1" in capsys.readouterr().out
    assert cli(["alloc", "signal", "-s", "SIGNOPE", alloc["ID"][:8]]) == 1
    assert "invalid signal 'SIGNOPE'" in capsys.readouterr().err

    # The client GC: refused while it runs, its folder removed once it stopped.
    gc = f"/v1/client/allocation/{alloc['ID']}/gc"
    refused = http(system, "GET", gc)
    assert refused[0] == 400 and "not eligible for GC" in refused[1]
    folder = alloc_dir(system, alloc["ID"])
    assert (folder / "trap").is_dir()
    assert http(system, "DELETE", "/v1/job/signalled")[0] == 200

    def stopped() -> bool:
        found = http(system, "GET", f"/v1/allocation/{alloc['ID']}")[1]
        return bool(found["ClientStatus"] == "complete")

    wait_for(stopped, "the allocation to stop")
    assert http(system, "GET", gc) == (200, None)
    assert not folder.exists()
    assert client.client.gc_all_allocations.garbage_collect(alloc["NodeID"]) is None
    assert client.client.gc_all_allocations.garbage_collect() is None
    assert http(system, "GET", "/v1/client/gc?node_id=nope")[0] == 404


PAYLOAD_JOB = """
job "reader" {
  datacenters = ["dc1"]
  type = "batch"
  parameterized {
    payload = "required"
  }
  group "g" {
    task "cat" {
      driver = "raw_exec"
      config {
        command = "cat"
        args    = ["local/input.txt"]
      }
      dispatch_payload {
        file = "input.txt"
      }
      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
"""


def test_a_dispatched_payload_is_the_file_its_raw_exec_task_cats(system: DroverSystem) -> None:
    spec = job_to_nomad(parse_hcl_with_warnings(PAYLOAD_JOB)[0])
    assert spec["TaskGroups"][0]["Tasks"][0]["DispatchPayload"] == {"File": "input.txt"}
    assert http(system, "POST", "/v1/jobs", {"Job": spec})[0] == 200
    payload = b"id,name\n1,ada\n"
    body = {"Payload": base64.b64encode(payload).decode()}
    status, reply = http(system, "POST", "/v1/job/reader/dispatch", body)
    assert status == 200
    child = reply["DispatchedJobID"].replace("/", "%2F")

    def finished() -> list[dict] | None:
        allocs = http(system, "GET", f"/v1/job/{child}/allocations")[1]
        return allocs if allocs and allocs[0]["ClientStatus"] in ("complete", "failed") else None

    (alloc,) = wait_for(finished, "the dispatched child to finish")
    assert alloc["ClientStatus"] == "complete", alloc["ClientDescription"]
    folder = alloc_dir(system, alloc["ID"])
    assert (folder / "cat" / "local" / "input.txt").read_bytes() == payload
    assert (folder / "alloc" / "logs" / "cat.stdout").read_bytes() == payload
