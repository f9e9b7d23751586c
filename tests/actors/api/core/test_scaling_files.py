"""File (cluster) policies in Nomad's scaling endpoints, against the in-memory backend whose
autoscaler part is the real registry and applied-file store: listed beside the job groups'
policies with their fleet target, read as Nomad's ScalingPolicy, applied (parsed by the API
first) and deleted; without an autoscaler the job policies still answer."""

from __future__ import annotations

from actors.api.core.shapes import job_to_nomad
from actors.autoscaler.core.applied import MAX_POLICY_FILE_BYTES, applied_path
from actors.autoscaler.core.registry import file_policy_id, group_policy_id
from contracts.jobspec import parse_hcl

from .conftest import Client, MemoryBackend

GPU = """
scaling "gpu" {
  enabled = true
  min     = 1
  max     = 4
  policy {
    cooldown = "30s"
    check "queue" {
      query = "blocked_allocs"
      strategy "threshold" {
        lower_bound = 1
        delta       = 1
      }
    }
    target "fleet" {
      fleet                  = "gpu"
      node_selector_strategy = "empty"
    }
  }
}
"""
WEB = """
job "web" {
  group "api" {
    scaling {
      max = 3
      policy {
        check "cpu" {
          query = "avg_cpu"
          strategy "target-value" { target = 50 }
        }
      }
    }
    task "t" { driver = "mock" }
  }
}
"""
GPU_ID = file_policy_id(applied_path("gpu.hcl"), "gpu")
API_ID = group_policy_id("default", "web", "api")


def apply(call: Client, text: str = GPU, name: str = "gpu.hcl") -> tuple[int, object]:
    reply = call("POST", "/v1/scaling/policies", {"Name": name, "Text": text})
    return reply.status, reply.body


def test_file_policies_list_and_read_beside_the_job_policies(
    call: Client, backend: MemoryBackend
) -> None:
    assert call("POST", "/v1/jobs", {"Job": job_to_nomad(parse_hcl(WEB))}).status == 200
    assert [s["ID"] for s in call("GET", "/v1/scaling/policies").body] == [API_ID]
    backend.start_autoscaler()
    status, body = apply(call)
    assert status == 200, body
    stub = {
        "ID": GPU_ID,
        "Enabled": True,
        "Type": "cluster",
        "Target": {"Fleet": "gpu", "NodeSelectorStrategy": "empty"},
        "CreateIndex": 0,
        "ModifyIndex": 0,
    }
    assert body == {"Name": "gpu.hcl", "Policies": [stub]}
    listed = call("GET", "/v1/scaling/policies").body
    assert sorted(s["ID"] for s in listed) == sorted([API_ID, GPU_ID])
    assert stub in listed
    # Filters: a fleet policy has no job and no namespace (listed in every namespace).
    assert [s["ID"] for s in call("GET", "/v1/scaling/policies", type="cluster").body] == [GPU_ID]
    assert [s["ID"] for s in call("GET", "/v1/scaling/policies", job="web").body] == [API_ID]
    assert GPU_ID in [s["ID"] for s in call("GET", "/v1/scaling/policies", namespace="x").body]
    got = call("GET", f"/v1/scaling/policy/{GPU_ID}")
    assert got.status == 200
    assert got.body["Min"] == 1 and got.body["Max"] == 4 and got.body["Enabled"] is True
    assert got.body["Target"] == stub["Target"] and got.body["Path"] == "applied/gpu.hcl"
    policy = got.body["Policy"]
    assert policy["cooldown"] == "30s"
    assert policy["target"] == [{"fleet": {"fleet": "gpu", "node_selector_strategy": "empty"}}]
    assert call("GET", f"/v1/scaling/policy/{API_ID}").body["Max"] == 3  # still the state's


def test_apply_refuses_bad_files_naming_the_field_and_value(
    call: Client, backend: MemoryBackend
) -> None:
    status, body = apply(call)
    assert status == 503 and "no autoscaler" in str(body)
    backend.start_autoscaler()
    status, body = apply(call, GPU.replace("max     = 4", "max     = 0"))
    assert status == 400 and "min 1 is above max 0" in str(body)
    status, body = apply(call, GPU.replace('"empty"', '"fastest"'))
    assert status == 400 and "fastest" in str(body)
    status, body = apply(call, name="../etc/passwd")
    assert status == 400 and "Name" in str(body) and "../etc/passwd" in str(body)
    status, body = apply(call, GPU + "#" * MAX_POLICY_FILE_BYTES)
    assert status == 400 and "bytes, more than" in str(body)
    reply = call("POST", "/v1/scaling/policies", {"Name": "x.hcl", "Text": 3})
    assert reply.status == 400 and "Text" in reply.body
    assert call("GET", "/v1/scaling/policies").body == []  # nothing was applied


def test_reapply_replaces_and_delete_removes_the_applied_file(
    call: Client, backend: MemoryBackend
) -> None:
    files = backend.start_autoscaler()
    assert apply(call)[0] == 200
    two = GPU + GPU.replace('scaling "gpu"', 'scaling "gpu2"')
    status, body = apply(call, two)
    assert status == 200 and len(body["Policies"]) == 2  # type: ignore[index]
    assert len(call("GET", "/v1/scaling/policies").body) == 2
    assert call("DELETE", f"/v1/scaling/policy/{GPU_ID}").body == {
        "Removed": [GPU_ID, file_policy_id("applied/gpu.hcl", "gpu2")]
    }
    assert call("GET", "/v1/scaling/policies").body == []
    assert files.store.load() == {}
    assert call("GET", f"/v1/scaling/policy/{GPU_ID}").status == 404
    assert call("DELETE", f"/v1/scaling/policy/{GPU_ID}").status == 404
    files.registry.apply_file("/etc/policies/dir.hcl", GPU)  # a policy dir's file
    dir_id = file_policy_id("/etc/policies/dir.hcl", "gpu")
    reply = call("DELETE", f"/v1/scaling/policy/{dir_id}")
    assert reply.status == 400 and "remove the file" in reply.body
