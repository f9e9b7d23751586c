"""The autoscaler's policies as JSON-ready dicts (the actor's `policies()` / `policy(id)`),
in the API's PascalCase: the registry's entry plus the handler's live state."""

from __future__ import annotations

from typing import Any

from actors.autoscaler.core.decisions import DecisionRecord, to_json
from actors.autoscaler.core.handler import HandlerState, PolicyHandler
from actors.autoscaler.core.registry import PolicyEntry


def target_json(entry: PolicyEntry) -> dict[str, str]:
    t = entry.target
    if t.kind == "fleet":
        return {"Fleet": t.fleet, "NodeSelectorStrategy": t.node_selector_strategy}
    return {"Namespace": t.namespace, "Job": t.job, "Group": t.group}


def policy_json(
    entry: PolicyEntry,
    handler: PolicyHandler | None = None,
    next_evaluation_s: float | None = None,
    last: DecisionRecord | None = None,
) -> dict[str, Any]:
    policy = entry.policy
    return {
        "ID": entry.id,
        "Origin": entry.origin,
        "Type": entry.type,
        "Target": target_json(entry),
        "Min": entry.min,
        "Max": entry.max,
        "Enabled": entry.enabled,
        "Evaluated": handler is not None,
        "Error": entry.error,
        "Note": entry.note,
        "Path": entry.path,
        "Name": entry.name,
        "CreateIndex": entry.create_index,
        "ModifyIndex": entry.modify_index,
        "EvaluationInterval": policy.evaluation_interval_s if policy is not None else None,
        "Cooldown": policy.cooldown_s if policy is not None else None,
        "CooldownOnScaleUp": policy.cooldown_on_scale_up_s if policy is not None else None,
        "DryRun": policy.dry_run if policy is not None else False,
        "Checks": [c.name for c in policy.checks] if policy is not None else [],
        "State": handler.state.value if handler is not None else None,
        "CooldownUntil": (
            handler.cooldown_until_s
            if handler is not None and handler.state is HandlerState.COOLDOWN
            else None
        ),
        "NextEvaluation": next_evaluation_s,
        "LastDecision": to_json(last) if last is not None else None,
    }
