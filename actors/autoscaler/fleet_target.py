"""A simulated fleet as the autoscaler's target (Nomad's cluster target plugins, for drover's
fleets). The pure parts are core/cluster_signals.py (what a fleet holds) and
core/node_selector.py (which instances go).

    status: count = the fleet's ready instances; starting = instances asked for and not
        registered yet; ready = no scale-out unregistered and no scale-in drain in flight,
        so a policy waits until its last scaling is done (never drains more at once than
        it asked, never counts the same missing capacity twice)
    scale-out to N: the agent hosting simulated fleets adds instances (`scale_fleet`)
    scale-in to N: `node_selector_strategy` picks count - N ready instances; the agent
        drains each with `node_drain_deadline` and removes it once drained (`retire`)

The policy's min / max are narrowed by the fleet's own `nodes` range when its declared spec
has one (`drover fleet apply`: the spec stored in Redis). A wait that never ends (an
instance that never registers, a drain stuck past its deadline) is given up after a grace
period, so the policy cannot stall for good. Ray-backed fleets (`backend: ray`) ask Ray's
autoscaler for capacity instead (ray_fleet.py); their target block's settings shape the ask.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import orjson

from actors.autoscaler.core.checks import MetricReader
from actors.autoscaler.core.cluster_signals import ClusterView, FleetState
from actors.autoscaler.core.handler import PolicyHandler
from actors.autoscaler.core.node_selector import select_for_removal
from actors.autoscaler.core.registry import PolicyEntry
from actors.autoscaler.persist import last_scaled_s
from actors.autoscaler.ray_fleet import LiveRayCluster, RayFleets
from contracts.autoscaling import DRY_RUN_COUNT, Decision, Policy, TargetStatus

log = logging.getLogger(__name__)
_UNREAD = object()  # status() reads the fleet's stored spec itself

FLEET_AGENT_ACTOR = "drover-agent-sim"  # launch/system.py: drover-agent-<FLEETS_AGENT>
REGISTER_GRACE_S = 60.0  # instances asked for and never registered: given up after this
DRAIN_GRACE_S = 60.0  # past the drain deadline, for the agent to see the drain end
AGENT_CALL_TIMEOUT_S = 30.0


class FleetAgent(Protocol):
    """The agent that hosts simulated fleets, as the fleet target calls it."""

    def scale_fleet(self, name: str, count: int) -> list[str]: ...
    def retire_instances(self, node_ids: list[str], deadline_s: float) -> int: ...


class RayFleetAgent:
    """The agent actor, found by name in the system's Ray namespace on first use."""

    def __init__(self, namespace: str | None, name: str = FLEET_AGENT_ACTOR) -> None:
        self.namespace = namespace
        self.name = name
        self._handle: Any = None

    def _actor(self) -> Any:
        if self._handle is None:
            import ray

            try:
                self._handle = ray.get_actor(self.name, namespace=self.namespace)
            except ValueError:
                raise LookupError(f'no agent hosts simulated fleets ("{self.name}")') from None
        return self._handle

    def _get(self, ref: Any) -> Any:
        import ray

        return ray.get(ref, timeout=AGENT_CALL_TIMEOUT_S)

    def scale_fleet(self, name: str, count: int) -> list[str]:
        added: list[str] = self._get(self._actor().scale_fleet.remote(name, count))
        return added

    def retire_instances(self, node_ids: list[str], deadline_s: float) -> int:
        return int(self._get(self._actor().retire_instances.remote(node_ids, deadline_s)))


@dataclass
class _Pending:
    adding: dict[str, float] = field(default_factory=dict)  # node id -> give up at
    retiring: dict[str, float] = field(default_factory=dict)


SpecLookup = Callable[[str], dict[str, Any] | None]


def redis_spec_lookup(client: Any, key: str) -> SpecLookup:
    """A declared fleet's spec (its JSON fields) from the fleets hash launch/system.py keeps."""

    def lookup(name: str) -> dict[str, Any] | None:
        raw = client.hget(key, name)
        return orjson.loads(raw) if raw else None

    return lookup


def fleet_bounds(policy: Policy, spec: dict[str, Any] | None) -> Policy:
    """The policy with its min / max narrowed to the fleet's `nodes` range."""
    if spec is None:
        return policy
    low, high = policy.min, policy.max
    if spec.get("nodes_min") is not None:
        low = max(low, int(spec["nodes_min"]))
    if spec.get("nodes_max") is not None:
        high = min(high, int(spec["nodes_max"]))
    low = min(low, high)
    return policy if (low, high) == (policy.min, policy.max) else replace(policy, min=low, max=high)


class FleetTargets:
    def __init__(
        self,
        agent: FleetAgent,
        spec_of: SpecLookup = lambda name: None,
        clock: Callable[[], float] = time.time,
        ray_fleets: RayFleets | None = None,
    ) -> None:
        self.agent = agent
        self.spec_of = spec_of
        self.clock = clock
        namespace = getattr(agent, "namespace", None)  # the real agents' namespace too
        self.ray_fleets = ray_fleets or RayFleets(LiveRayCluster(namespace), clock)
        self._extras: dict[str, dict[str, str]] = {}  # a fleet target's other settings
        self._pending: dict[str, _Pending] = {}
        self._lock = threading.Lock()  # scale calls run on the scaler's pool

    def spec(self, fleet: str) -> dict[str, Any] | None:
        try:
            return self.spec_of(fleet)
        except Exception as exc:  # Redis away: no range known this time
            log.debug("fleet %s spec unreadable: %s", fleet, exc)
            return None

    def inputs(
        self, entry: PolicyEntry, handler: PolicyHandler, view: ClusterView
    ) -> tuple[TargetStatus | None, MetricReader]:
        """What a fleet policy's evaluation reads: its target's status and the signals; the
        handler's min / max are narrowed to the fleet's `nodes` range first."""
        fleet = entry.target.fleet
        self._extras[fleet] = dict(entry.target.extras)  # read by scale(), which lacks them
        spec = self.spec(fleet)  # read once an evaluation: bounds and status both use it
        bounded = fleet_bounds(entry.policy or handler.policy, spec)
        if bounded != handler.policy:
            handler.update_policy(bounded)
        return self.status(fleet, view, spec), view.reader(fleet)

    def status(
        self, fleet_name: str, view: ClusterView, spec: dict[str, Any] | object | None = _UNREAD
    ) -> TargetStatus | None:
        """The fleet's ready instances, those starting, and when a policy last scaled it
        (its stored `last_scaled_s`: a restarted autoscaler resumes the cooldown from it, as
        it does from a group's scaling event). `spec`: the stored spec if already read."""
        if spec is _UNREAD:
            spec = self.spec(fleet_name)
        assert spec is None or isinstance(spec, dict)
        fleet = view.fleet(fleet_name)
        if spec is not None and spec.get("backend") == "ray":
            ray_status = self.ray_fleets.status(fleet_name, fleet)
            return replace(ray_status, last_event_s=last_scaled_s(spec))
        if fleet is None and spec is None and fleet_name not in self._pending:
            return None
        registered = {i.node_id for i in fleet.instances} if fleet is not None else set()
        now = self.clock()
        with self._lock:
            pending = self._pending.get(fleet_name) or _Pending()
            pending.adding = {
                n: t for n, t in pending.adding.items() if n not in registered and now < t
            }
            pending.retiring = {
                n: t for n, t in pending.retiring.items() if n in registered and now < t
            }
            waiting = len(pending.adding) + len(pending.retiring)
            starting = len(pending.adding)
            if not waiting:
                self._pending.pop(fleet_name, None)
        ready = len(fleet.ready) if fleet is not None else 0
        return TargetStatus(
            ready=waiting == 0, count=ready, starting=starting, last_event_s=last_scaled_s(spec)
        )

    def scale(
        self,
        fleet_name: str,
        strategy: str,
        deadline_s: float,
        decision: Decision,
        fleet: FleetState | None,
    ) -> str:
        """Apply the decision's action; returns a note of what was done. Raises on failure."""
        action = decision.action
        if action is None or action.error or action.count == DRY_RUN_COUNT:
            return "nothing to do"
        spec = self.spec(fleet_name)
        backend = spec.get("backend", "simulated") if spec is not None else "simulated"
        if backend == "ray":
            extras = self._extras.get(fleet_name, {})
            return self.ray_fleets.scale(
                fleet_name, action.count, strategy, deadline_s, fleet, extras
            )
        if backend != "simulated":
            raise ValueError(f'fleet "{fleet_name}": unknown backend "{backend}"')
        ready = fleet.ready if fleet is not None else []
        now = self.clock()
        if action.count > len(ready):
            added = self.agent.scale_fleet(fleet_name, action.count)
            with self._lock:
                pending = self._pending.setdefault(fleet_name, _Pending())
                pending.adding.update(dict.fromkeys(added, now + REGISTER_GRACE_S))
            return f"added {len(added)} instance(s)"
        chosen = select_for_removal(ready, len(ready) - action.count, strategy)
        if not chosen:
            return f'no instance fits node_selector_strategy "{strategy}"'
        ids = [i.node_id for i in chosen]
        with self._lock:  # before the call: the next status must already wait for them
            pending = self._pending.setdefault(fleet_name, _Pending())
            pending.retiring.update(dict.fromkeys(ids, now + deadline_s + DRAIN_GRACE_S))
        try:
            self.agent.retire_instances(ids, deadline_s)
        except Exception:
            with self._lock:
                for node_id in ids:
                    pending.retiring.pop(node_id, None)
            raise
        return f"draining {', '.join(i.name for i in chosen)}"
