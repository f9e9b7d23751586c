"""`/v1/scaling/...` against the in-memory backend: Nomad's policy list and policy bodies
from the job groups' scaling blocks, and drover's decisions endpoint relaying what the
autoscaler says (here: the answer the real pure pieces give for a policy)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from actors.api.core.shapes import job_to_nomad
from actors.autoscaler.core.decisions import DecisionLog, to_json
from actors.autoscaler.core.handler import PolicyHandler
from actors.autoscaler.core.registry import PolicyRegistry, group_policy_id
from actors.autoscaler.core.views import policy_json
from contracts.autoscaling import MetricPoint, MetricQuery, TargetStatus
from contracts.jobspec import parse_hcl

from .conftest import Client, MemoryBackend

WEB = """
job "web" {
  group "api" {
    count = 2
    scaling {
      min = 1
      max = 8
      policy {
        cooldown = "1m"
        check "cpu" {
          query = "avg_cpu"
          strategy "target-value" { target = 50 }
        }
      }
    }
    task "t" { driver = "mock" }
  }
  group "db" {
    scaling {
      enabled = false
      max = 3
    }
    task "t" { driver = "mock" }
  }
}
"""
OTHER = """
job "other" {
  group "g" {
    task "t" { driver = "mock" }
  }
}
"""
API_ID = group_policy_id("default", "web", "api")
DB_ID = group_policy_id("default", "web", "db")


def run(call: Client, hcl: str) -> None:
    reply = call("POST", "/v1/jobs", {"Job": job_to_nomad(parse_hcl(hcl))})
    assert reply.status == 200, reply.body


def test_policies_list_nomads_stubs_with_filters(call: Client) -> None:
    run(call, WEB)
    run(call, OTHER)
    reply = call("GET", "/v1/scaling/policies")
    assert reply.status == 200
    stubs = {s["ID"]: s for s in reply.body}
    assert set(stubs) == {API_ID, DB_ID}
    assert stubs[API_ID]["Target"] == {"Namespace": "default", "Job": "web", "Group": "api"}
    assert (stubs[API_ID]["Enabled"], stubs[DB_ID]["Enabled"]) == (True, False)
    assert stubs[API_ID]["Type"] == "horizontal" and stubs[API_ID]["CreateIndex"] > 0
    assert [s["ID"] for s in reply.body] == sorted(stubs)
    assert call("GET", "/v1/scaling/policies", job="other").body == []
    assert len(call("GET", "/v1/scaling/policies", job="web", type="horizontal").body) == 2
    assert call("GET", "/v1/scaling/policies", type="cluster").body == []
    (only,) = call("GET", "/v1/scaling/policies", prefix=API_ID[:8]).body
    assert only["ID"] == API_ID
    assert call("GET", "/v1/scaling/policies", namespace="elsewhere").body == []
    assert len(call("GET", "/v1/scaling/policies", namespace="*").body) == 2


def test_a_policy_reads_as_nomads_scaling_policy(call: Client) -> None:
    run(call, WEB)
    body = call("GET", f"/v1/scaling/policy/{API_ID}").body
    assert {k: body[k] for k in ("ID", "Namespace", "Type", "Min", "Max", "Enabled")} == {
        "ID": API_ID,
        "Namespace": "default",
        "Type": "horizontal",
        "Min": 1,
        "Max": 8,
        "Enabled": True,
    }
    assert body["Target"] == {"Namespace": "default", "Job": "web", "Group": "api"}
    assert body["Policy"]["cooldown"] == "1m"
    assert body["Policy"]["check"][0]["cpu"]["query"] == "avg_cpu"
    db = call("GET", f"/v1/scaling/policy/{DB_ID}").body
    assert (db["Min"], db["Max"], db["Policy"], db["Enabled"]) == (1, 3, {}, False)
    missing = call("GET", "/v1/scaling/policy/ghost")
    assert (missing.status, missing.body) == (404, "policy not found")


def explained(backend: MemoryBackend) -> dict[str, Any]:
    """What the autoscaler answers for web/api after two evaluations (a scale, then the
    cooldown), made by the registry, handler and decision log it runs."""
    job = backend.store.job("default", "web")
    registry = PolicyRegistry()
    registry.apply_job("default", "web", job, index=1)
    entry = registry.get(API_ID)
    assert entry is not None and entry.policy is not None
    handler = PolicyHandler(API_ID, entry.policy)
    log = DecisionLog()

    def reader(query: MetricQuery) -> Sequence[MetricPoint]:
        return [(query.end_s, 100.0)]

    first = handler.tick(100.0, TargetStatus(ready=True, count=2), reader)
    log.add(first)
    log.settle(first.decision_id, True, eval_id="e-1", index=7)
    handler.scale_succeeded(first.decision_id, 101.0)
    log.add(handler.tick(110.0, TargetStatus(ready=True, count=4), reader))
    return {
        "Policy": policy_json(entry, handler, 120.0, log.last(API_ID, 1)[0]),
        "Decisions": [to_json(r) for r in log.last(API_ID)],
    }


def test_decisions_relay_the_autoscalers_view(call: Client, backend: MemoryBackend) -> None:
    run(call, WEB)
    unavailable = call("GET", f"/v1/scaling/policy/{API_ID}/decisions")
    assert (unavailable.status, unavailable.body) == (503, "no autoscaler runs with this agent")
    backend.autoscaler = {API_ID: explained(backend)}
    reply = call("GET", f"/v1/scaling/policy/{API_ID}/decisions", limit=1)
    assert reply.status == 200
    assert reply.body["ID"] == API_ID
    assert reply.body["Policy"]["State"] == "cooldown"
    (newest,) = reply.body["Decisions"]
    assert newest["Outcome"] == "cooldown" and newest["CurrentCount"] == 4
    both = call("GET", f"/v1/scaling/policy/{API_ID}/decisions").body["Decisions"]
    assert [d["Outcome"] for d in both] == ["cooldown", "scale"]
    assert both[1]["Scale"] == {"Status": "ok", "Error": "", "EvalID": "e-1", "Index": 7}
    unknown = call("GET", f"/v1/scaling/policy/{DB_ID}/decisions")
    assert (unknown.status, unknown.body) == (
        404,
        f'policy "{DB_ID}" is not known to the autoscaler',
    )
    for bad, why in (("x", "expected an integer, got 'x'"), ("0", "expected 1 to 50, got 0")):
        refused = call("GET", f"/v1/scaling/policy/{API_ID}/decisions", limit=bad)
        assert (refused.status, refused.body) == (400, f"limit: {why}")
