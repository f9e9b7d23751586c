"""The placement chain for one task group (Nomad's GenericStack / SystemStack).

    shuffled base nodes -> feasibility (class-cached) -> distinct_hosts / distinct_property
      -> fit (cpu, memory, disk, devices) -> score components -> limit -> max score

Feasibility does not change within an evaluation, so it runs once per node per group and
leaves a ring of feasible nodes, built as walks reach its end (ring.py); each placement walks
the ring from where the previous one stopped (Nomad's StaticIterator keeps its offset), so
successive placements look at fresh nodes. Fit and score depend on what this plan already
placed and run per placement.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from actors.state import EMPTY_USAGE, NodeUsage
from actors.worker.core.scheduler.context import EvalContext, NodeLoad, PropertySet
from actors.worker.core.scheduler.feasible import (
    FilterMetrics,
    GroupFeasibility,
    device_matches,
    group_constraints,
)
from actors.worker.core.scheduler.phases import PhaseLog
from actors.worker.core.scheduler.rank import (
    RESCHEDULE_PENALTY,
    job_anti_affinity,
    node_affinity,
    score_fit_binpack,
    score_fit_spread,
)
from actors.worker.core.scheduler.ring import FeasibleRing
from actors.worker.core.scheduler.select import (
    MAX_SKIP,
    SKIP_SCORE_THRESHOLD,
    RankedOption,
    placement_limit,
)
from actors.worker.core.scheduler.spread import SpreadScorer
from contracts import AllocMetric, Job, Node, TaskGroup
from contracts.resources import AllocatedDevice, DeviceRequest


class GroupStack:
    def __init__(
        self,
        ctx: EvalContext,
        job: Job,
        tg: TaskGroup,
        base_nodes: Sequence[Node],
        nodes_available: Mapping[str, int],
        *,
        batch: bool,
        algorithm: str = "binpack",
    ) -> None:
        self.ctx = ctx
        self.job = job
        self.tg = tg
        self.base_nodes = base_nodes
        self.nodes_available = nodes_available
        self.feasibility = GroupFeasibility(job, tg, ctx.eligibility)
        # Feasibility filtering is decided once per evaluation; distinct_hosts/property
        # filtering depends on what the plan placed so far and is counted per placement.
        self.filter_metrics = FilterMetrics()
        self.placement_metrics = FilterMetrics()
        self.ring: FeasibleRing | None = None
        self._feasibility_ns = 0  # this stack's share of the ring's build time
        # Ring positions known not to fit the group's ask: within an evaluation a node only
        # fills up (stops that free room clear the mark, see `EvalContext.freed`), so later
        # placements skip them without re-checking. Value: the exhausted dimension.
        self.exhausted: dict[int, str] = {}
        self.synced_generation = 0
        self.cursor = 0
        self.last_walked = 0
        # Exhausted dimensions of the nodes the system scheduler asked about one by one,
        # with each node's class.
        self.node_exhaustion: list[tuple[str, str]] = []
        ask = tg.combined_resources()
        self.ask_cpu, self.ask_mem, self.ask_disk = ask.cpu, ask.memory_mb, ask.disk_mb
        self.device_requests: tuple[DeviceRequest, ...] = ask.devices
        self.fit_score = score_fit_spread if algorithm == "spread" else score_fit_binpack
        self.affinities = (
            tuple(job.affinities)
            + tuple(tg.affinities)
            + tuple(a for t in tg.tasks for a in t.affinities)
        )
        has_spread = bool(job.spreads or tg.spreads)
        self.spread: SpreadScorer | None = None
        self._has_spread = has_spread
        self.limit = placement_limit(
            batch, len(base_nodes), tg.count, bool(self.affinities) or has_spread
        )
        self._distinct_job = any(c.operand == "distinct_hosts" for c in job.constraints)
        self._distinct_tg = any(c.operand == "distinct_hosts" for c in group_constraints(tg))
        self._distinct_props: list[tuple[PropertySet, int]] | None = None
        # Phase timings, recorded only when an observer set `phases` (see phases.py).
        self.phases: PhaseLog | None = None
        self._rank_walks = 0
        self._rank_nodes = 0

    # -- static part ------------------------------------------------------------------------

    def _distinct_property_sets(self) -> list[tuple[PropertySet, int]]:
        if self._distinct_props is None:
            sets = []
            for c in self.job.constraints:
                if c.operand == "distinct_property":
                    sets.append((self.ctx.property_set(c.l_target, None), _allowed(c.r_target)))
            for c in group_constraints(self.tg):
                if c.operand == "distinct_property":
                    sets.append(
                        (self.ctx.property_set(c.l_target, self.tg.name), _allowed(c.r_target))
                    )
            self._distinct_props = sets
        return self._distinct_props

    # -- per placement ----------------------------------------------------------------------

    def feasibility_ns(self) -> int:
        """Time this stack spent checking feasibility (growing its ring)."""
        return self._feasibility_ns

    def report_phases(self, start_ns: int, end_ns: int, feasibility_ns: int) -> None:
        """Record this group's feasibility and ranking phases. Both happen inside the one
        placement loop [start_ns, end_ns) (see phases.py): feasibility is this group's ring
        growth, ranking the loop less every group's ring growth."""
        if self.phases is None:
            return
        ring = self.ring
        if ring is not None and self._feasibility_ns:
            self.phases.add(
                "feasibility",
                start_ns,
                start_ns + self._feasibility_ns,
                group=self.tg.name,
                nodes=ring.pulled,
                feasible=len(ring.entries),
            )
        if self._rank_walks:
            self.phases.add(
                "ranking",
                start_ns,
                max(start_ns, end_ns - feasibility_ns),
                group=self.tg.name,
                placements=self._rank_walks,
                nodes_scored=self._rank_nodes,
            )

    def select(self, penalty_nodes: frozenset[str] = frozenset()) -> RankedOption | None:
        """Pick a node for one more allocation of the group and charge its resources to the
        plan's proposed load; None if nothing fits (see `failure_metric`).

        This loop is the scheduler's hottest code (about 20 nodes per placement, 100,000
        placements in the benchmark), hence the local aliases and the inlined bookkeeping."""
        self._rank_walks += 1
        grower = self.ring
        if grower is None:
            # The first chunk holds one walk's worth: `limit` options and the low scorers
            # set aside (a one-allocation job checks 16 of 5,000 nodes, not 32).
            grower = self.ring = FeasibleRing(
                self.base_nodes, self.feasibility, self.filter_metrics, self.limit + MAX_SKIP
            )
        ring = grower.entries
        size = len(ring)
        complete = grower.complete
        self.last_walked = 0
        if complete and size == 0:
            return None
        if self._has_spread and self.spread is None:
            self.spread = SpreadScorer(self.ctx, self.job, self.tg)
        # The limit and max-score stages, fused into the walk (see select.py for the rules).
        limit = self.limit
        seen = 0
        best: Node | None = None
        best_score = 0.0
        best_offer: tuple[AllocatedDevice, ...] = ()
        skipped: list[tuple[float, Node, tuple[AllocatedDevice, ...]]] = []
        ctx = self.ctx
        if ctx.free_generation != self.synced_generation:
            self._forget_exhaustion()
        exhausted = self.exhausted
        loads = ctx.loads  # nodes this plan already changed
        usage_of = ctx.usage_lookup  # everything else: the snapshot's immutable usage
        load_of = ctx.load
        on_node = ctx.group_allocs_on_node[self.tg.name]
        per_node = ctx.job_allocs_per_node
        count = self.tg.count
        ask_cpu, ask_mem, ask_disk = self.ask_cpu, self.ask_mem, self.ask_disk
        fit_score = self.fit_score
        binpack = fit_score is score_fit_binpack
        affinities = self.affinities
        spread = self.spread
        devices_wanted = self.device_requests
        distinct_job, distinct_tg = self._distinct_job, self._distinct_tg
        distinct_props = self._distinct_property_sets()
        self.placement_metrics = FilterMetrics()
        filtered = self.placement_metrics.filtered
        i = self.cursor
        walked = 0
        while True:
            if i >= size:
                if not complete:  # the walk ran past the ring's end: check more nodes
                    build_ns = grower.build_ns
                    grower.extend()
                    self._feasibility_ns += grower.build_ns - build_ns
                    size, complete = len(ring), grower.complete
                    continue
                if walked >= size:
                    break
                i = 0
            elif complete and walked >= size:
                break
            position = i
            i += 1
            walked += 1
            if position in exhausted:
                continue
            node, cap_cpu, cap_mem, cap_disk, inv_cpu, inv_mem = ring[position]
            node_id = node.id
            if distinct_job and per_node.get(node_id, 0) > 0:
                filtered(node, "distinct_hosts")
                continue
            if distinct_tg and on_node.get(node_id, 0) > 0:
                filtered(node, "distinct_hosts")
                continue
            if distinct_props and not _distinct_ok(distinct_props, node):
                filtered(node, "distinct_property")
                continue
            load = loads.get(node_id) or usage_of(node_id) or EMPTY_USAGE
            cpu = load.cpu + ask_cpu
            if cpu > cap_cpu:
                exhausted[position] = "cpu"
                continue
            mem = load.memory_mb + ask_mem
            if mem > cap_mem:
                exhausted[position] = "memory"
                continue
            if load.disk_mb + ask_disk > cap_disk:
                exhausted[position] = "disk"
                continue
            offer: tuple[AllocatedDevice, ...] = ()
            if devices_wanted:
                found = offer_devices(node, devices_wanted, load)
                if found is None:
                    exhausted[position] = "devices"
                    continue
                offer = found
            if binpack:
                # rank.score_fit_binpack, inlined: it runs for every scored node.
                total = 20.0 - (10.0 ** (1.0 - cpu * inv_cpu) + 10.0 ** (1.0 - mem * inv_mem))
                total = (18.0 if total > 18.0 else 0.0 if total < 0.0 else total) / 18.0
            else:
                total = fit_score(cap_cpu, cap_mem, cpu, mem)
            components = 1
            collisions = on_node.get(node_id, 0)
            if collisions > 0:
                total += job_anti_affinity(collisions, count)
                components += 1
            if penalty_nodes and node_id in penalty_nodes:
                total += RESCHEDULE_PENALTY
                components += 1
            if affinities:
                total += node_affinity(affinities, node)
                components += 1
            if spread is not None:
                boost = spread.score(node)
                if boost != 0.0:
                    total += boost
                    components += 1
            score = total / components
            if score <= SKIP_SCORE_THRESHOLD and len(skipped) < MAX_SKIP:
                skipped.append((score, node, offer))
                continue
            seen += 1
            if best is None or score > best_score:  # the first of equal scores wins
                best, best_score, best_offer = node, score, offer
            if seen >= limit:
                break
        self.cursor = i
        self.last_walked = walked
        self._rank_nodes += walked
        # The walk ran out before the limit: the set-aside candidates are used after all.
        for score, node, offer in skipped:
            if seen >= limit:
                break
            seen += 1
            if best is None or score > best_score:
                best, best_score, best_offer = node, score, offer
        if best is None:
            return None
        chosen = RankedOption(best, best_score, ask_cpu, ask_mem, ask_disk, best_offer)
        self._charge(load_of(best.id), chosen)
        return chosen

    def _forget_exhaustion(self) -> None:
        grower, since = self.ring, self.synced_generation
        freed_at = self.ctx.freed_at
        if self.ctx.all_freed_at > since:
            self.exhausted.clear()
        elif grower is not None:
            ring = grower.entries
            for position in [p for p in self.exhausted if freed_at.get(ring[p][0].id, 0) > since]:
                del self.exhausted[position]
        self.synced_generation = self.ctx.free_generation

    def select_on(self, node: Node) -> RankedOption | None:
        """The system scheduler's question: can this one node take the group?"""
        self.last_walked = 1
        exhaustion = self.node_exhaustion
        if not self.feasibility.check(node, self.filter_metrics):
            return None
        res, reserved = node.node_resources, node.reserved_resources
        load = self.ctx.load(node.id)
        cpu, mem = load.cpu + self.ask_cpu, load.memory_mb + self.ask_mem
        cap_cpu, cap_mem = res.cpu - reserved.cpu, res.memory_mb - reserved.memory_mb
        if cpu > cap_cpu:
            exhaustion.append(("cpu", node.node_class))
            return None
        if mem > cap_mem:
            exhaustion.append(("memory", node.node_class))
            return None
        if load.disk_mb + self.ask_disk > res.disk_mb - reserved.disk_mb:
            exhaustion.append(("disk", node.node_class))
            return None
        offer: tuple[AllocatedDevice, ...] = ()
        if self.device_requests:
            found = offer_devices(node, self.device_requests, load)
            if found is None:
                exhaustion.append(("devices", node.node_class))
                return None
            offer = found
        option = RankedOption(
            node,
            self.fit_score(cap_cpu, cap_mem, cpu, mem),
            self.ask_cpu,
            self.ask_mem,
            self.ask_disk,
            offer,
        )
        self._charge(load, option)
        return option

    def infeasible(self, node: Node) -> bool:
        return not self.feasibility.check(node, FilterMetrics())

    def _charge(self, load: NodeLoad, option: RankedOption) -> None:
        load.cpu += option.cpu
        load.memory_mb += option.memory_mb
        load.disk_mb += option.disk_mb
        for device in option.devices:
            load.claim_devices(device.device_ids)

    def failure_metric(self) -> AllocMetric:
        """AllocMetric for a placement that found no node, with reasons per dimension.

        A failed select walked the whole ring, so every exhausted mark is a node it could
        not use; select_on records its single node's dimension the same way.
        """
        static, dynamic = self.filter_metrics, self.placement_metrics
        constraint_filtered = dict(static.constraint_filtered)
        for reason, n in dynamic.constraint_filtered.items():
            constraint_filtered[reason] = constraint_filtered.get(reason, 0) + n
        class_filtered = dict(static.class_filtered)
        for cls, n in dynamic.class_filtered.items():
            class_filtered[cls] = class_filtered.get(cls, 0) + n
        dimensions: dict[str, int] = {}
        classes: dict[str, int] = {}  # Nomad's ClassExhausted: nodes with a class only
        ring = self.ring.entries if self.ring is not None else []
        exhausted = [(d, ring[p][0].node_class) for p, d in self.exhausted.items()]
        for dimension, node_class in exhausted + self.node_exhaustion:
            dimensions[dimension] = dimensions.get(dimension, 0) + 1
            if node_class:
                classes[node_class] = classes.get(node_class, 0) + 1
        return AllocMetric(
            # The walk covers the ring (dynamic filtering included); statically filtered
            # nodes never entered it.
            nodes_evaluated=self.last_walked + static.nodes_filtered,
            nodes_filtered=static.nodes_filtered + dynamic.nodes_filtered,
            nodes_in_pool=len(self.base_nodes),
            nodes_available=dict(self.nodes_available),
            class_filtered=class_filtered,
            constraint_filtered=constraint_filtered,
            nodes_exhausted=sum(dimensions.values()),
            class_exhausted=classes,
            dimension_exhausted=dimensions,
        )


def _allowed(r_target: str) -> int:
    try:
        return max(1, int(r_target))
    except ValueError:
        return 1


def _distinct_ok(sets: list[tuple[PropertySet, int]], node: Node) -> bool:
    for pset, allowed in sets:
        value, used = pset.used(node)
        if value is None or used >= allowed:
            return False
    return True


def offer_devices(
    node: Node, requests: Sequence[DeviceRequest], load: NodeLoad | NodeUsage
) -> tuple[AllocatedDevice, ...] | None:
    """Pick free healthy device instances for every request, or None if they don't fit."""
    taken = set(load.device_ids)
    offer = []
    for request in requests:
        for device in node.node_resources.devices:
            if not device_matches(device, request):
                continue
            free = [i for i in device.healthy_ids() if i not in taken]
            if len(free) >= request.count:
                chosen = tuple(free[: request.count])
                taken.update(chosen)
                offer.append(AllocatedDevice(device.vendor, device.type, device.name, chosen))
                break
        else:
            return None
    return tuple(offer)
