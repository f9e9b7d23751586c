"""`drover scaling policy list | status | explain` against a canned server, whose decisions
are the ones the autoscaler's own pure pieces make (registry, handler, decision log), so the
output is checked on real decision bodies."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson
import pytest

from actors.autoscaler.core.decisions import DecisionLog, to_json
from actors.autoscaler.core.handler import PolicyHandler
from actors.autoscaler.core.registry import PolicyRegistry, group_policy_id
from actors.autoscaler.core.views import policy_json
from contracts.autoscaling import MetricPoint, MetricQuery, TargetStatus
from contracts.jobspec import parse_hcl

Cli = Callable[..., tuple[int, str, str]]
T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z
POLICY_ID = group_policy_id("default", "web", "api")
WEB = """
job "web" {
  group "api" {
    count = 2
    scaling {
      min = 1
      max = 6
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
}
"""
STUB = {
    "ID": POLICY_ID,
    "Enabled": True,
    "Type": "horizontal",
    "Target": {"Namespace": "default", "Job": "web", "Group": "api"},
    "CreateIndex": 5,
    "ModifyIndex": 9,
}
OTHER = {**STUB, "ID": "0f" + POLICY_ID[2:], "Enabled": False}
OTHER["Target"] = {"Group": "db", "Job": "web", "Namespace": "default"}
POLICY = {
    **STUB,
    "Namespace": "default",
    "Min": 1,
    "Max": 6,
    "Policy": {"cooldown": "1m", "check": [{"cpu": {"query": "avg_cpu"}}]},
}


def explained() -> dict[str, Any]:
    """web/api after a scale-up (2 -> 4 at T0) and an evaluation in its cooldown."""
    registry = PolicyRegistry()
    registry.apply_job("default", "web", parse_hcl(WEB), index=5)
    entry = registry.get(POLICY_ID)
    assert entry is not None and entry.policy is not None
    handler, log = PolicyHandler(POLICY_ID, entry.policy), DecisionLog()

    def reader(query: MetricQuery) -> Sequence[MetricPoint]:
        return [(query.end_s - 1, 100.0), (query.end_s, 100.0)]

    first = handler.tick(T0, TargetStatus(ready=True, count=2), reader)
    log.add(first)
    log.settle(first.decision_id, True, eval_id="1a2b3c4d-eval", index=12)
    handler.scale_succeeded(first.decision_id, T0)
    log.add(handler.tick(T0 + 10, TargetStatus(ready=True, count=4), reader))
    last = log.last(POLICY_ID, 1)[0]
    return {
        "ID": POLICY_ID,
        "Policy": policy_json(entry, handler, T0 + 20, last),
        "Decisions": [to_json(r) for r in log.last(POLICY_ID)],
    }


@pytest.fixture
def scaling_cli(cli: Cli, canned: Any, monkeypatch: pytest.MonkeyPatch) -> Cli:
    monkeypatch.setenv("DROVER_ADDR", canned.address)
    canned.answer("GET", "/v1/scaling/policies", [STUB, OTHER])
    canned.answer("GET", f"/v1/scaling/policy/{POLICY_ID}", POLICY)
    canned.answer("GET", f"/v1/scaling/policy/{POLICY_ID}/decisions", explained())
    return cli


def test_list_prints_nomads_table_sorted_by_target(scaling_cli: Cli, canned: Any) -> None:
    code, out, _ = scaling_cli("scaling", "policy", "list")
    assert code == 0
    assert out == (
        "ID        Enabled  Type        Target\n"
        f"{POLICY_ID[:8]}  true     horizontal  Namespace:default,Job:web,Group:api\n"
        f"{OTHER['ID'][:8]}  false    horizontal  Namespace:default,Job:web,Group:db\n"
    )
    code, out, _ = scaling_cli("scaling", "policy", "list", "-json", "-job", "web")
    assert orjson.loads(out) == [STUB, OTHER]
    assert canned.requests[-1].query == {"job": "web"}
    canned.answer("GET", "/v1/scaling/policies", [])
    assert scaling_cli("scaling", "policy", "list") == (0, "No policies found\n", "")


def test_status_shows_the_policy_and_the_autoscalers_state(scaling_cli: Cli, canned: Any) -> None:
    canned.answer("GET", "/v1/scaling/policies", [STUB])  # the server filters by prefix
    code, out, err = scaling_cli("scaling", "policy", "status", POLICY_ID[:6])
    assert code == 0, err
    assert canned.requests[0].query == {"prefix": POLICY_ID[:6]}
    assert out.startswith(
        f"ID      = {POLICY_ID[:8]}\n"
        "Enabled = true\n"
        "Target  = Namespace:default,Job:web,Group:api\n"
        "Min     = 1\n"
        "Max     = 6\n"
        "\nPolicy:\n"
    )
    assert '"cooldown": "1m"' in out
    assert out.endswith(
        "\nAutoscaler\n"
        "State               = cooldown\n"
        "Evaluation Interval = 10s\n"
        "Cooldown            = 60s (after a scale-up: 60s)\n"
        "Cooldown Until      = 2023-11-14T22:14:20Z\n"
        "Next Evaluation     = 2023-11-14T22:13:40Z\n"
        "Last Decision       = 2023-11-14T22:13:30Z cooldown: capped count from 8 to 6 to "
        "stay within limits; not scaling while the policy cools down\n"
    )
    body = orjson.loads(scaling_cli("scaling", "policy", "info", "-json", POLICY_ID)[1])
    assert body["ID"] == POLICY_ID and body["Autoscaler"]["Policy"]["State"] == "cooldown"


def test_status_without_an_autoscaler_and_ambiguous_or_unknown_ids(
    scaling_cli: Cli, canned: Any
) -> None:
    canned.answer("GET", "/v1/scaling/policies", [STUB])
    canned.answer("GET", f"/v1/scaling/policy/{POLICY_ID}/decisions", "no autoscaler", 503)
    code, out, _ = scaling_cli("scaling", "policy", "status", POLICY_ID)
    assert code == 0 and out.endswith(
        "\nAutoscaler\nnot evaluated (no autoscaler runs, or it does not know this policy)\n"
    )
    canned.answer("GET", "/v1/scaling/policies", [STUB, OTHER])
    code, _, err = scaling_cli("scaling", "policy", "status", "f")
    assert (code, err) == (1, "drover: Identifier must contain at least two characters.\n")
    code, _, err = scaling_cli("scaling", "policy", "status", "ab")
    assert code == 1 and err.startswith("drover: Prefix matched multiple scaling policies\n")
    canned.answer("GET", "/v1/scaling/policies", [])
    code, _, err = scaling_cli("scaling", "policy", "status", "abc")
    assert err == 'drover: No scaling policies with prefix or id "abc" found\n'


def test_explain_prints_each_decision_with_its_checks_and_call(
    scaling_cli: Cli, canned: Any
) -> None:
    code, out, err = scaling_cli("scaling", "policy", "explain", "web", "api")
    assert code == 0, err
    assert canned.requests[0].query == {"job": "web"}
    assert canned.requests[1].query == {"limit": "10"}
    assert out == (
        f"Policy          = {POLICY_ID[:8]} (Namespace:default,Job:web,Group:api)\n"
        "State           = cooldown\n"
        "Cooldown Until  = 2023-11-14T22:14:20Z\n"
        "Next Evaluation = 2023-11-14T22:13:40Z\n"
        "\n"
        '2023-11-14T22:13:30Z  cooldown  count 4 -> 6  (winner: check "cpu")\n'
        "  reason: capped count from 8 to 6 to stay within limits; not scaling while the "
        "policy cools down\n"
        '  check "cpu" (target-value): avg_cpu = 100 (2 points) -> 6 (up): capped count from '
        "8 to 6 to stay within limits\n"
        "  capped: 8 -> 6 (min/max)\n"
        "  cooldown until 2023-11-14T22:14:20Z\n"
        "\n"
        '2023-11-14T22:13:20Z  scale  count 2 -> 4  (winner: check "cpu")\n'
        "  reason: scaling up because factor is 2.000000\n"
        '  check "cpu" (target-value): avg_cpu = 100 (2 points) -> 4 (up): scaling up because '
        "factor is 2.000000\n"
        "  scale call: ok, evaluation 1a2b3c4d\n"
    )
    body = orjson.loads(
        scaling_cli("scaling", "policy", "explain", "-json", "-n", "1", "web", "api")[1]
    )
    assert [d["Outcome"] for d in body["Decisions"]] == ["cooldown", "scale"]  # canned: both
    assert canned.requests[-1].query == {"limit": "1"}
    code, _, err = scaling_cli("scaling", "policy", "explain", "web", "cache")
    assert (code, err) == (1, 'drover: no scaling policy for group "cache" of job "web"\n')
