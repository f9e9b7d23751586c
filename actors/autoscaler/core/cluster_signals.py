"""Scheduler signals for cluster policies: the `drover` source's answers about fleets.

A fleet is the set of nodes whose attribute `drover.fleet` (FLEET_ATTRIBUTE) names it.
Queries (source "drover", or Nomad's "nomad-apm", read the same), each optionally suffixed
`/<fleet>`; without it they read the policy's target fleet:

    percentage-allocated_cpu     CPU allocated on the fleet's ready instances, percent of
                                 what they offer (Nomad APM's node query of the same name)
    percentage-allocated_memory  the same for memory
    blocked_allocs               placements waiting for capacity the fleet could give (below)
    ready_instances              instances ready: up, eligible, not draining
    draining_instances           instances draining on their way out

`blocked_allocs`: each blocked evaluation counts its failed placements (one per failed task
group, plus its coalesced failures). It counts for a fleet when the fleet is the only one,
or when the scheduler marked one of the fleet's computed node classes eligible for the job
(`class_eligibility`), or when it could not tell (an escaped computed class, no
eligibility recorded): capacity of that fleet could have taken the placement. A job that
cannot run on a fleet whatever its size (its classes are all ineligible) does not grow it.

The allocated percentages come from the autoscaler's allocation table (AllocCounts'
`node_load`: its replica keeps no allocation records) over the fleet's ready instances;
a fleet without ready instances reads 0.

Each answer is one point at the query's end: these are instant state, as Nomad's APM
answers. Work: `ClusterView` scans the nodes once and the evaluations once, on first use,
and is built once per evaluation tick, shared by every cluster policy evaluated in it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from actors.autoscaler.core.alloc_counts import NodeLoad
from contracts.autoscaling import MetricPoint, MetricQuery, MetricReadError
from contracts.evaluation import EvalStatus, Evaluation
from contracts.node import Node
from contracts.share import FLEET_ATTRIBUTE

SOURCES = ("drover", "nomad-apm")
METRICS = (
    "percentage-allocated_cpu",
    "percentage-allocated_memory",
    "blocked_allocs",
    "ready_instances",
    "draining_instances",
)
LoadLookup = Callable[[str], NodeLoad]


@dataclass(frozen=True, slots=True)
class Instance:
    """One instance of a fleet as the selectors and the signals read it."""

    node_id: str
    name: str
    create_index: int
    cpu: int  # offered: the node's resources less what it reserves
    memory_mb: int
    load: NodeLoad
    ready: bool
    draining: bool
    computed_class: str = ""


@dataclass(frozen=True, slots=True)
class FleetState:
    name: str
    instances: tuple[Instance, ...]

    @property
    def ready(self) -> list[Instance]:
        return [i for i in self.instances if i.ready]

    @property
    def draining(self) -> list[Instance]:
        return [i for i in self.instances if i.draining]

    @property
    def classes(self) -> frozenset[str]:
        return frozenset(i.computed_class for i in self.instances)

    def allocated_percent(self, dimension: str) -> float:
        ready = self.ready
        if dimension == "cpu":
            offered = sum(i.cpu for i in ready)
            used = sum(i.load.cpu for i in ready)
        else:
            offered = sum(i.memory_mb for i in ready)
            used = sum(i.load.memory_mb for i in ready)
        return 100.0 * used / offered if offered > 0 else 0.0


def instance_of(node: Node, load: NodeLoad) -> Instance:
    res, reserved = node.node_resources, node.reserved_resources
    return Instance(
        node_id=node.id,
        name=node.name,
        create_index=node.create_index,
        cpu=max(0, res.cpu - reserved.cpu),
        memory_mb=max(0, res.memory_mb - reserved.memory_mb),
        load=load,
        ready=node.ready(),
        draining=node.drain_strategy is not None,
        computed_class=node.computed_class,
    )


def fleet_states(nodes: Iterable[Node], load: LoadLookup) -> dict[str, FleetState]:
    """Every fleet's instances, from one scan of the nodes."""
    found: dict[str, list[Instance]] = {}
    for node in nodes:
        fleet = node.attributes.get(FLEET_ATTRIBUTE)
        if fleet:
            found.setdefault(fleet, []).append(instance_of(node, load(node.id)))
    return {name: FleetState(name, tuple(found[name])) for name in sorted(found)}


def failed_placements(ev: Evaluation) -> int:
    return sum(1 + m.coalesced_failures for m in ev.failed_tg_allocs.values()) or 1


def blocked_allocs(evals: Iterable[Evaluation], fleets: Mapping[str, FleetState]) -> dict[str, int]:
    """Failed placements waiting in blocked evaluations, per fleet that could take them."""
    out = dict.fromkeys(fleets, 0)
    classes = {name: fleet.classes for name, fleet in fleets.items()}
    only = len(fleets) == 1
    for ev in evals:
        if ev.status is not EvalStatus.BLOCKED:
            continue
        waiting = failed_placements(ev)
        eligible = {c for c, ok in ev.class_eligibility.items() if ok}
        unknown = only or ev.escaped_computed_class or not ev.class_eligibility
        for name in out:
            if unknown or classes[name] & eligible:
                out[name] += waiting
    return out


@dataclass(frozen=True, slots=True)
class ClusterQuery:
    metric: str
    fleet: str = ""  # "": the policy's target fleet


def parse_cluster_query(text: str) -> ClusterQuery | None:
    """The query, or None when it is not a cluster signal (a group query, say)."""
    metric, _, fleet = text.partition("/")
    if metric not in METRICS or "/" in fleet:
        return None
    return ClusterQuery(metric, fleet)


class ClusterView:
    """One evaluation tick's view of the fleets, computed on first use."""

    def __init__(
        self,
        nodes: Callable[[], Iterable[Node]],
        evals: Callable[[], Iterable[Evaluation]],
        load: LoadLookup,
    ) -> None:
        self._nodes = nodes
        self._evals = evals
        self._load = load

    @cached_property
    def fleets(self) -> dict[str, FleetState]:
        return fleet_states(self._nodes(), self._load)

    @cached_property
    def blocked(self) -> dict[str, int]:
        return blocked_allocs(self._evals(), self.fleets)

    def fleet(self, name: str) -> FleetState | None:
        return self.fleets.get(name)

    def value(self, query: ClusterQuery, default_fleet: str) -> float:
        name = query.fleet or default_fleet
        if not name:
            raise MetricReadError(f'"{query.metric}" names no fleet: add "/<fleet>"')
        fleet = self.fleets.get(name)
        if query.metric == "blocked_allocs":
            return float(self.blocked.get(name, 0))
        if fleet is None:  # a fleet scaled to nothing (or not declared yet) is empty
            return 0.0
        if query.metric == "ready_instances":
            return float(len(fleet.ready))
        if query.metric == "draining_instances":
            return float(len(fleet.draining))
        return fleet.allocated_percent(query.metric.rpartition("_")[2])

    def reader(
        self,
        default_fleet: str,
        fallback: Callable[[MetricQuery], Sequence[MetricPoint]] | None = None,
    ) -> Callable[[MetricQuery], Sequence[MetricPoint]]:
        """A policy's metric reader: cluster signals here, anything else to `fallback`."""

        def read(query: MetricQuery) -> Sequence[MetricPoint]:
            parsed = parse_cluster_query(query.query) if query.source in SOURCES else None
            if parsed is not None:
                return [(query.end_s, self.value(parsed, default_fleet))]
            if fallback is None:
                raise MetricReadError(
                    f'unknown query "{query.query}" for a cluster policy: one of '
                    f"{', '.join(METRICS)}, optionally /<fleet>"
                )
            return fallback(query)

        return read
