"""`drover scaling policy list | status | explain | apply | delete` for file (cluster)
policies against a canned server, whose bodies are the autoscaler's own views of a policy
file parsed by the real registry."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actors.autoscaler.core.applied import applied_path
from actors.autoscaler.core.registry import PolicyRegistry, file_policy_id
from actors.autoscaler.core.views import policy_json

Cli = Callable[..., tuple[int, str, str]]

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
GPU_ID = file_policy_id(applied_path("gpu.hcl"), "gpu")


def view() -> dict[str, Any]:
    registry = PolicyRegistry()
    registry.apply_file(applied_path("gpu.hcl"), GPU)
    entry = registry.get(GPU_ID)
    assert entry is not None
    return {**policy_json(entry), "Policy": dict(entry.raw)}


STUB = {k: view()[k] for k in ("ID", "Enabled", "Type", "Target", "CreateIndex", "ModifyIndex")}


@pytest.fixture
def files_cli(cli: Cli, canned: Any, monkeypatch: pytest.MonkeyPatch) -> Cli:
    monkeypatch.setenv("DROVER_ADDR", canned.address)
    canned.answer("GET", "/v1/scaling/policies", [STUB])
    body = {**STUB, "Namespace": "", "Min": 1, "Max": 4, "Policy": view()["Policy"]}
    canned.answer("GET", f"/v1/scaling/policy/{GPU_ID}", body)
    canned.answer(
        "GET", f"/v1/scaling/policy/{GPU_ID}/decisions", {"Policy": view(), "Decisions": []}
    )
    return cli


def test_list_status_and_explain_show_a_fleet_policy(files_cli: Cli) -> None:
    code, out, _ = files_cli("scaling", "policy", "list")
    assert code == 0
    assert f"{GPU_ID[:8]}  true     cluster  Fleet:gpu,NodeSelectorStrategy:empty\n" in out
    code, out, err = files_cli("scaling", "policy", "status", GPU_ID[:6])
    assert code == 0, err
    assert "Target  = Fleet:gpu,NodeSelectorStrategy:empty\nMin     = 1\nMax     = 4\n" in out
    assert '"cooldown": "30s"' in out and '"node_selector_strategy": "empty"' in out
    code, out, err = files_cli("scaling", "policy", "explain", GPU_ID[:6])
    assert code == 0, err
    assert f"Policy          = {GPU_ID[:8]} (Fleet:gpu,NodeSelectorStrategy:empty)\n" in out
    assert out.endswith("No decisions yet\n")


def test_apply_sends_the_file_and_prints_its_policies(
    files_cli: Cli, canned: Any, tmp_path: Path
) -> None:
    path = tmp_path / "gpu.hcl"
    path.write_text(GPU)
    canned.answer("POST", "/v1/scaling/policies", {"Name": "gpu.hcl", "Policies": [STUB]})
    code, out, err = files_cli("scaling", "policy", "apply", str(path))
    assert code == 0, err
    assert canned.requests[-1].body == {"Name": "gpu.hcl", "Text": GPU}
    assert out.startswith('Applied policy file "gpu.hcl"\n\nID ')
    assert "Fleet:gpu,NodeSelectorStrategy:empty" in out
    files_cli("scaling", "policy", "apply", "-name", "other.hcl", str(path))
    assert canned.requests[-1].body["Name"] == "other.hcl"
    refusal = 'applied/gpu.hcl: scaling "gpu" > min 1 is above max 0'
    canned.answer("POST", "/v1/scaling/policies", refusal, 400)
    code, _, err = files_cli("scaling", "policy", "apply", str(path))
    assert code == 1 and refusal in err
    code, _, err = files_cli("scaling", "policy", "apply", str(tmp_path / "missing.hcl"))
    assert code == 1 and "missing.hcl" in err


def test_delete_resolves_the_prefix_and_removes_the_file(files_cli: Cli, canned: Any) -> None:
    canned.answer("DELETE", f"/v1/scaling/policy/{GPU_ID}", {"Removed": [GPU_ID]})
    code, out, err = files_cli("scaling", "policy", "delete", GPU_ID[:6])
    assert code == 0, err
    assert canned.requests[-1].method == "DELETE"
    assert out == f"Removed 1 policy (the applied file)\n  {GPU_ID[:8]}\n"
