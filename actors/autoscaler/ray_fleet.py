"""A Ray-backed fleet (`backend: ray`) as the autoscaler's target: the Ray cluster's nodes
are the fleet's instances, so capacity is asked of Ray's autoscaler.

    scale-out to N: `ray.autoscaler.sdk.request_resources(bundles=[shape] * N)`. The ask is
        absolute (it replaces the last one), so asking again never stacks up nodes.
    scale-in to N: `node_selector_strategy` picks count - N instances; each one's agent
        drains it (`node_drain_deadline`) and removes it once drained; only then is the ask
        lowered to N bundles, and Ray's autoscaler removes idle nodes after its
        `idle_timeout_minutes`. Ray, not drover, decides which idle node goes.
    status: count = the fleet's ready instances; starting = instances asked for and not
        registered by an agent yet (Ray still launching them, or up without an agent).

The shape of one instance (one bundle) is what makes the autoscaler launch a node per
instance of the right type: by default the CPU and GPU of the fleet's worker instances as
Ray sees them, so each bundle fills one node of that type. Target settings override it:
`ray_instance_cpu`, `ray_instance_gpu`, `ray_instance_memory` (MB) and
`ray_instance_resource` (a custom resource name, asked 1 unit: give each node type its own
to pin bundles to it). Memory is left out unless set: node types often declare no `memory`,
and a bundle asking for it is then infeasible and launches nothing.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from actors.autoscaler.core.cluster_signals import FleetState
from actors.autoscaler.core.node_selector import select_for_removal
from contracts.autoscaling import TargetStatus

log = logging.getLogger(__name__)

_MB = 1024 * 1024
HEAD_RESOURCE = "node:__internal_head__"  # Ray never removes the head: never picked
REAL_AGENT_ACTOR = "drover-agent-node-"  # launch/system.py: drover-agent-node-<NodeID[:12]>
LAUNCH_GRACE_S = 600.0  # an ask Ray never fills (max_workers, infeasible): given up after
DRAIN_GRACE_S = 60.0
AGENT_CALL_TIMEOUT_S = 30.0
EXTRA_KEYS = {
    "ray_instance_cpu": "CPU",
    "ray_instance_gpu": "GPU",
    "ray_instance_memory": "memory",
}


@dataclass(frozen=True, slots=True)
class InstanceShape:
    """One instance as Ray resources (CPU / GPU counts, memory in bytes, custom units)."""

    resources: Mapping[str, float] = field(default_factory=dict)

    def bundle(self) -> dict[str, float]:
        return {k: float(v) for k, v in sorted(self.resources.items()) if v > 0}


def shape_of_node(resources: Mapping[str, float]) -> InstanceShape:
    """A Ray node's CPU and GPU as one instance's shape (memory: see the module's note)."""
    return InstanceShape({k: float(resources[k]) for k in ("CPU", "GPU") if k in resources})


def instance_shape(extras: Mapping[str, str], nodes: Sequence[Mapping[str, Any]]) -> InstanceShape:
    """The target's settings over the most common shape of the fleet's worker nodes (Ray's
    `ray.nodes()` entries). ValueError when neither gives one: a fleet scaled from zero
    workers needs `ray_instance_cpu` (or gpu) on its target."""
    shapes = Counter(
        tuple(sorted(shape_of_node(n.get("Resources") or {}).bundle().items()))
        for n in nodes
        if HEAD_RESOURCE not in (n.get("Resources") or {})
    )
    shapes.pop((), None)
    resources: dict[str, float] = dict(shapes.most_common(1)[0][0]) if shapes else {}
    for key, name in EXTRA_KEYS.items():
        if key in extras:
            value = float(extras[key])
            resources[name] = value * _MB if name == "memory" else value
    if extras.get("ray_instance_resource"):
        resources[extras["ray_instance_resource"]] = 1.0
    shape = InstanceShape(resources)
    if not shape.bundle():
        raise ValueError(
            "no worker node to take an instance's shape from: set ray_instance_cpu "
            "(or ray_instance_gpu / ray_instance_resource) in the fleet target"
        )
    return shape


def ray_status(ready: int, registered: int, asked: int | None, retiring: int) -> TargetStatus:
    """`registered`: the fleet's instances not on their way out (ready or not); `asked`: the
    live ask (None: none made). Instances asked for and not registered are starting."""
    starting = max(0, asked - registered) if asked is not None else 0
    return TargetStatus(ready=starting == 0 and retiring == 0, count=ready, starting=starting)


class RayCluster(Protocol):
    """What a Ray fleet needs from Ray: the live nodes, the ask, and the nodes' agents."""

    def nodes(self) -> list[Mapping[str, Any]]: ...
    def request(self, bundles: list[dict[str, float]]) -> None: ...
    def retire(self, node_id: str, deadline_s: float) -> int: ...


class LiveRayCluster:
    """The Ray cluster this process is connected to; agents found by name."""

    def __init__(self, namespace: str | None) -> None:
        self.namespace = namespace

    def nodes(self) -> list[Mapping[str, Any]]:
        import ray

        nodes: list[Mapping[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
        return [n for n in nodes if n.get("Alive")]

    def request(self, bundles: list[dict[str, float]]) -> None:
        from ray.autoscaler.sdk import request_resources

        request_resources(bundles=bundles)

    def retire(self, node_id: str, deadline_s: float) -> int:
        import ray

        try:
            agent: Any = ray.get_actor(
                f"{REAL_AGENT_ACTOR}{node_id[:12]}", namespace=self.namespace
            )
        except ValueError:
            raise LookupError(f"no drover agent runs on Ray node {node_id}") from None
        ref = agent.retire_instances.remote([node_id], deadline_s)
        return int(ray.get(ref, timeout=AGENT_CALL_TIMEOUT_S))


@dataclass
class _Ask:
    count: int  # bundles asked of Ray now
    shape: InstanceShape  # of each bundle
    give_up_at: float  # instances still missing then are no longer counted as starting
    retiring: dict[str, float] = field(default_factory=dict)  # node id -> give up at
    lower_to: int | None = None  # the ask once the retiring instances are gone


class RayFleets:
    """Ray-backed fleets' asks, kept per fleet. Thread-safe: scale calls run on a pool."""

    def __init__(self, cluster: RayCluster, clock: Callable[[], float]) -> None:
        self.cluster = cluster
        self.clock = clock
        self._asks: dict[str, _Ask] = {}
        self._lock = threading.Lock()

    def status(self, name: str, fleet: FleetState | None) -> TargetStatus:
        instances = fleet.instances if fleet is not None else ()
        registered = {i.node_id for i in instances}
        now = self.clock()
        lower: _Ask | None = None
        with self._lock:
            ask = self._asks.get(name)
            if ask is not None:
                ask.retiring = {
                    n: t for n, t in ask.retiring.items() if n in registered and now < t
                }
                if not ask.retiring and ask.lower_to is not None:
                    ask.count, ask.lower_to = ask.lower_to, None
                    lower = ask
            retiring = set(ask.retiring) if ask is not None else set()
            asked = ask.count if ask is not None and now < ask.give_up_at else None
        if lower is not None:  # drained and removed: now Ray may take the capacity back
            self._request(name, lower.count, lower.shape)
        staying = len(registered - retiring)
        ready = len(fleet.ready) if fleet is not None else 0
        return ray_status(ready, staying, asked, len(retiring))

    def scale(
        self,
        name: str,
        count: int,
        strategy: str,
        deadline_s: float,
        fleet: FleetState | None,
        extras: Mapping[str, str],
    ) -> str:
        ready = fleet.ready if fleet is not None else []
        ids = {i.node_id for i in fleet.instances} if fleet is not None else set()
        now = self.clock()
        nodes = self.cluster.nodes()
        if count >= len(ready):  # more, or none registered to drain (still starting)
            with self._lock:
                ask = self._asks.get(name)
            mine = [n for n in nodes if n["NodeID"] in ids]
            shape = ask.shape if ask and count <= len(ready) else instance_shape(extras, mine)
            with self._lock:
                self._asks[name] = _Ask(count, shape, now + LAUNCH_GRACE_S)
            self._request(name, count, shape)
            return f"asked Ray's autoscaler for {count} instance(s) of {shape.bundle()}"
        heads = {n["NodeID"] for n in nodes if HEAD_RESOURCE in (n.get("Resources") or {})}
        chosen = select_for_removal(
            [i for i in ready if i.node_id not in heads], len(ready) - count, strategy
        )
        if not chosen:
            return f'no instance fits node_selector_strategy "{strategy}"'
        with self._lock:  # before the calls: the next status must already wait for them
            ask = self._asks.get(name)
            if ask is None:
                shape = instance_shape(extras, [n for n in nodes if n["NodeID"] in ids])
                ask = self._asks[name] = _Ask(len(ready), shape, now + LAUNCH_GRACE_S)
            ask.retiring.update({i.node_id: now + deadline_s + DRAIN_GRACE_S for i in chosen})
            ask.lower_to = count
        for instance in chosen:
            try:
                self.cluster.retire(instance.node_id, deadline_s)
            except Exception:
                with self._lock:
                    ask.retiring.pop(instance.node_id, None)
                raise
        names = ", ".join(i.name for i in chosen)
        return f"draining {names}; then asking Ray's autoscaler for {count} instance(s)"

    def _request(self, name: str, count: int, shape: InstanceShape) -> None:
        log.info("fleet %s: request_resources(%d x %s)", name, count, shape.bundle())
        self.cluster.request([shape.bundle() for _ in range(count)])
