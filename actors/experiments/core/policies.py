"""Out-of-the-box policies, one interface: `decide(now, state) -> target count | None`.

- `NomadPolicy`: any Nomad Autoscaler policy (target-value, threshold, ...) run by the live
  autoscaler's `PolicyHandler`, built with `parse_group_policy` from the policy's dict; a
  due Scale is answered with `scale_succeeded` at once, so cooldowns are the live ones.
- `hpa_like`: a `NomadPolicy` with the HPA's algorithm as drover expresses it: target-value
  with threshold 0.1 (HPA's tolerance), scale-down stabilisation 300 s (the highest
  recommendation of the window), the HPA's default rate rules, and no cooldown.
- `DstackPolicy`: dstack's service autoscaler (RPS): ceil(mean RPS over the window / target),
  clamped; from zero at once, else 5 min after the last scaling before scaling up and 10 min
  before scaling down.
- `KeepAlivePolicy`: scale-to-zero with a fixed keep-alive: up to the needed count when
  there is demand, to zero once idle for `keep_alive_s` (600 s as AWS, 1,200 s as Azure).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from actors.autoscaler.core.handler import PolicyHandler
from actors.experiments.core.state import SimState
from contracts.autoscaling import Policy, TargetStatus, parse_group_policy


class SimPolicy(Protocol):
    @property
    def interval_s(self) -> float: ...

    @property
    def wakes_on_demand(self) -> bool:
        """True when demand arriving at zero allocations triggers a decision at once."""
        ...

    def decide(self, now: float, state: SimState) -> int | None: ...


class NomadPolicy:
    wakes_on_demand = False

    def __init__(self, policy: Policy, policy_id: str = "sim") -> None:
        self.policy = policy
        self.handler = PolicyHandler(policy_id, policy)
        self.last_event_s: float | None = None

    @classmethod
    def from_dict(cls, body: dict[str, Any], *, min: int, max: int) -> NomadPolicy:
        policy = parse_group_policy(body, min=min, max=max, where="experiment", job="sim")
        return cls(policy)

    @property
    def interval_s(self) -> float:
        return self.policy.evaluation_interval_s

    def decide(self, now: float, state: SimState) -> int | None:
        status = TargetStatus(
            ready=True,
            count=state.ready,
            starting=state.starting,
            last_event_s=self.last_event_s,
        )
        decision = self.handler.tick(now, status, state.read)
        if not decision.scale_due or decision.action is None:
            return None
        self.handler.scale_succeeded(decision.decision_id, now)
        self.last_event_s = now
        return decision.action.count


def nomad_policy_dict(
    *,
    query: str,
    strategy: str,
    settings: dict[str, Any],
    interval: str = "10s",
    cooldown: str = "5m",
    behavior: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A one-check policy as a job file's `scaling { policy { ... } }` leaves it."""
    body: dict[str, Any] = {
        "evaluation_interval": interval,
        "cooldown": cooldown,
        "check": [{"sim": {"query": query, "strategy": [{strategy: settings}]}}],
    }
    if behavior is not None:
        body["behavior"] = [behavior]
    return body


HPA_BEHAVIOR: dict[str, Any] = {
    "scale_up": [
        {
            "select_policy": "max",
            "rate": [
                {"type": "percent", "value": 100, "period": "15s"},
                {"type": "pods", "value": 4, "period": "15s"},
            ],
        }
    ],
    "scale_down": [
        {
            "stabilization_window": "5m",
            "rate": [{"type": "percent", "value": 100, "period": "15s"}],
        }
    ],
}


def hpa_like(
    *, query: str, target: float, min: int, max: int, interval: str = "15s"
) -> NomadPolicy:
    body = nomad_policy_dict(
        query=query,
        strategy="target-value",
        settings={"target": target, "threshold": 0.1},
        interval=interval,
        behavior=HPA_BEHAVIOR,
    )
    policy = parse_group_policy(body, min=min, max=max, where="experiment", job="sim")
    # The HPA has no cooldown; a zero duration in a policy means "the default", so set it.
    return NomadPolicy(replace(policy, cooldown_s=0.0, cooldown_on_scale_up_s=0.0))


@dataclass(slots=True)
class DstackPolicy:
    target_rps: float
    min: int
    max: int
    window_s: float = 60.0
    scale_up_delay_s: float = 300.0
    scale_down_delay_s: float = 600.0
    interval_s: float = 10.0
    wakes_on_demand: bool = True
    last_scaled_s: float | None = field(default=None)

    def decide(self, now: float, state: SimState) -> int | None:
        mean = state.mean_demand(self.window_s)
        if state.count == 0:
            mean = max(mean, state.demand_rps)  # a request waiting at zero replicas
        wanted = min(self.max, max(self.min, math.ceil(mean / self.target_rps)))
        current = state.count
        if wanted == current:
            return None
        since = math.inf if self.last_scaled_s is None else now - self.last_scaled_s
        if wanted > current and current > 0 and since < self.scale_up_delay_s:
            return None
        if wanted < current and since < self.scale_down_delay_s:
            return None
        self.last_scaled_s = now
        return wanted


@dataclass(slots=True)
class KeepAlivePolicy:
    keep_alive_s: float = 600.0
    per_alloc_rps: float | None = None  # None: one allocation serves any demand
    max: int = 1_000_000
    interval_s: float = 10.0
    wakes_on_demand: bool = True

    def decide(self, now: float, state: SimState) -> int | None:
        if state.demand_rps > 0:
            need = 1
            if self.per_alloc_rps is not None:
                need = math.ceil(state.demand_rps / self.per_alloc_rps)
            need = min(self.max, need)
            return need if need > state.count else None
        if state.count == 0 or state.last_busy_s is None:
            return None
        return 0 if now - state.last_busy_s >= self.keep_alive_s else None
