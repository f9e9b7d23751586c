"""The placement chain of a run's group (`TaskGroup.share`): GroupStack's counterpart.

- One rank (`select`): on each candidate instance, the smallest k whose share fits among its
  free blocks (share.py); the instance left fullest wins (best fit keeps whole instances for
  gangs), an exact fill ending the walk.
- A gang (`select_gang`): N whole, fully idle instances of one `placement: cluster` fleet,
  or nothing. Among fleets with enough, the one with the fewest idle instances wins (best
  fit again).

Gangs must not starve. A gang that cannot be placed holds N instances of one cluster fleet
(`reservation`: its idle instances first, then those with the fewest busy blocks, which free
soonest), written on its blocked evaluation (`Evaluation.reserved_nodes`). Single ranks of
other runs at or below its priority are not placed on held instances, so those drain and the
gang starts within about one run length of the instances it waits for; everything not held
stays open to them (backfill). A later gang does not take what an earlier or higher-priority
gang holds. Each time the blocked gang is evaluated again (an instance of its fleet freed
up), it places if it can, or renews its hold. Holds are a scheduling policy, not a fence: a
worker reading a snapshot older than the hold may still place a single rank there once.

`SharePolicy(best_fit=False, hold_for_gangs=False)` is plain first fit, for comparison
(bench/gang.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from actors.state import EMPTY_USAGE, NodeUsage
from actors.worker.core.scheduler.context import EvalContext, NodeLoad
from actors.worker.core.scheduler.feasible import FilterMetrics, GroupFeasibility
from actors.worker.core.scheduler.select import RankedOption
from actors.worker.core.scheduler.share import (
    HELD,
    NO_FIT,
    NO_FREE_BLOCKS,
    NOT_CLUSTER,
    NOT_IDLE,
    NOT_IN_FLEETS,
    Instance,
    busy_blocks,
    count_reason,
    fits_some_share,
    instance_of,
    share_option,
    smallest_share,
)
from contracts import AllocMetric, EvalStatus, Job, Node, TaskGroup
from contracts.share import ShareRequest


@dataclass(frozen=True, slots=True)
class SharePolicy:
    best_fit: bool = True  # pack the fullest instance that fits; else the first, in node order
    hold_for_gangs: bool = True  # blocked gangs hold instances; else nothing is held


FIRST_FIT = SharePolicy(best_fit=False, hold_for_gangs=False)


class ShareStack:
    def __init__(
        self,
        ctx: EvalContext,
        job: Job,
        tg: TaskGroup,
        base_nodes: Sequence[Node],
        policy: SharePolicy = SharePolicy(),
    ) -> None:
        assert tg.share is not None
        self.ctx = ctx
        self.job = job
        self.tg = tg
        self.request: ShareRequest = tg.share
        self.base_nodes = base_nodes
        self.policy = policy
        self.feasibility = GroupFeasibility(job, tg, ctx.eligibility)
        self.filter_metrics = FilterMetrics()
        self.phases = None
        self._candidates: list[Instance] | None = None
        self._static_reasons: dict[str, int] = {}  # instances no share of could ever fit
        self._reasons: dict[str, int] = {}  # instances the last walk passed over
        self._walked = 0
        self._yields_to: dict[str, bool] = {}  # holder eval id -> does this run yield to it

    # -- GroupStack's reporting interface ---------------------------------------------------

    def feasibility_ns(self) -> int:
        return 0

    def report_phases(self, start_ns: int, end_ns: int, feasibility_ns: int) -> None:
        return None

    # -- candidates ------------------------------------------------------------------------

    def candidates(self) -> list[Instance]:
        """Feasible instances (drivers, constraints, datacenters, pool) of the requested
        fleets whose whole share could fit the ranges at all: decided once per evaluation."""
        if self._candidates is None:
            fleets = set(self.request.fleets)
            found = []
            for node in self.base_nodes:
                instance = instance_of(node)
                if instance is None:
                    continue
                if not self.feasibility.check(node, self.filter_metrics):
                    continue
                if fleets and instance.fleet not in fleets:
                    count_reason(self._static_reasons, NOT_IN_FLEETS)
                    continue
                if not fits_some_share(self.request, instance):
                    count_reason(self._static_reasons, NO_FIT)
                    continue
                found.append(instance)
            if not self.policy.best_fit:
                found.sort(key=lambda i: i.node.name)  # first fit: in one fixed order
            self._candidates = found
        return self._candidates

    def _used(self, node_id: str) -> NodeLoad | NodeUsage:
        """What the node holds: this plan's load on it if it changed it, else the snapshot's."""
        ctx = self.ctx
        return ctx.loads.get(node_id) or ctx.usage_lookup(node_id) or EMPTY_USAGE

    def _held(self, node_id: str, *, gang: bool) -> bool:
        """Is the instance held by a blocked gang this run yields to? A single rank yields
        to every other run's gang of its priority or higher; a gang only to those ahead of
        it (higher priority, or the same and submitted first)."""
        if not self.policy.hold_for_gangs:
            return False
        state = self.ctx.state
        for eval_id in state.node_holds(node_id):
            yields = self._yields_to.get(eval_id)
            if yields is None:
                holder = state.eval(eval_id)
                yields = holder is not None and self._yields(
                    holder.namespace, holder.job_id, holder.priority, holder.status, gang
                )
                self._yields_to[eval_id] = yields
            if yields:
                return True
        return False

    def _yields(
        self, namespace: str, job_id: str, priority: int, status: EvalStatus, gang: bool
    ) -> bool:
        job = self.job
        if status is not EvalStatus.BLOCKED or (namespace, job_id) == (job.namespace, job.id):
            return False
        if priority != job.priority:
            return priority > job.priority
        if not gang:
            return True
        holder_job = self.ctx.state.job(namespace, job_id)
        return holder_job is not None and holder_job.create_index < job.create_index

    # -- one rank --------------------------------------------------------------------------

    def select(self, penalty_nodes: frozenset[str] = frozenset()) -> RankedOption | None:
        best: RankedOption | None = None
        candidates = self.candidates()
        self._walked, self._reasons = 0, {}
        for instance in candidates:
            node_id = instance.node.id
            self._walked += 1
            if self._held(node_id, gang=False):
                count_reason(self._reasons, HELD)
                continue
            used = self._used(node_id)
            k = smallest_share(self.request, instance, busy_blocks(instance, used.device_ids))
            option = share_option(instance, k, used) if k is not None else None
            if option is None:
                count_reason(self._reasons, NO_FREE_BLOCKS)
                continue
            if node_id in penalty_nodes:
                option.final_score -= 1.0
            if not self.policy.best_fit:
                best = option
                break
            if best is None or option.final_score > best.final_score:
                best = option
                if option.final_score >= 1.0:
                    break  # fills the instance exactly: nothing packs better
        if best is not None:
            self._charge(best)
        return best

    # -- a gang ----------------------------------------------------------------------------

    def _gang_instances(self) -> dict[str, list[tuple[int, Instance]]]:
        """Per cluster fleet, the instances a gang rank could take whole, with their busy
        blocks now (0: idle), leaving out those held for gangs ahead of this one."""
        found: dict[str, list[tuple[int, Instance]]] = {}
        candidates = self.candidates()
        self._walked, self._reasons = 0, {}
        for instance in candidates:
            self._walked += 1
            if not instance.cluster:
                count_reason(self._reasons, NOT_CLUSTER)
                continue
            if smallest_share(self.request, instance, 0, whole=True) is None:
                count_reason(self._reasons, NO_FIT)
                continue
            node_id = instance.node.id
            if self._held(node_id, gang=True):
                count_reason(self._reasons, HELD)
                continue
            used = self._used(node_id)
            busy = busy_blocks(instance, used.device_ids)
            if used.device_ids or used.cpu or used.memory_mb:
                busy = max(busy, 1)  # other tenants (devices, a plain job) count as busy
            found.setdefault(instance.fleet, []).append((busy, instance))
        return found

    def select_gang(self, ranks: int) -> list[RankedOption] | None:
        """`ranks` whole idle instances of one cluster fleet, charged to the plan; None,
        with nothing charged, if no fleet has them."""
        idle: dict[str, list[Instance]] = {}
        for name, members in self._gang_instances().items():
            idle[name] = [instance for busy, instance in members if busy == 0]
            if len(idle[name]) < len(members):
                count_reason(self._reasons, NOT_IDLE, len(members) - len(idle[name]))
        fitting = [(len(members), name) for name, members in idle.items() if len(members) >= ranks]
        if not fitting:
            return None
        _, chosen = min(fitting) if self.policy.best_fit else fitting[0]
        options = []
        for instance in idle[chosen][:ranks]:
            option = share_option(instance, instance.total_blocks, EMPTY_USAGE)
            assert option is not None  # an idle instance holds its whole share
            options.append(option)
        for option in options:
            self._charge(option)
        return options

    def reservation(self, ranks: int) -> tuple[str, ...]:
        """The instances a gang that could not be placed holds: in the cluster fleet where it
        is closest to starting (most idle instances, then fewest busy blocks), its idle
        instances and then those with the fewest busy blocks, `ranks` in all."""
        if not self.policy.hold_for_gangs:
            return ()
        best: tuple[tuple[int, int, str], list[tuple[int, Instance]]] | None = None
        for name, members in self._gang_instances().items():
            if len(members) < ranks:
                continue
            # The same instances each time the hold is renewed, ties broken by name.
            chosen = sorted(members, key=lambda m: (m[0], m[1].node.name))[:ranks]
            idle = sum(1 for busy, _ in chosen if busy == 0)
            key = (-idle, sum(busy for busy, _ in chosen), name)
            if best is None or key < best[0]:
                best = (key, chosen)
        if best is None:
            return ()
        return tuple(instance.node.id for _, instance in best[1])

    def _charge(self, option: RankedOption) -> None:
        load = self.ctx.load(option.node.id)
        load.cpu += option.cpu
        load.memory_mb += option.memory_mb
        for device in option.devices:
            load.claim_devices(device.device_ids)

    def failure_metric(self) -> AllocMetric:
        static = self.filter_metrics
        reasons = dict(self._static_reasons)
        for reason, n in self._reasons.items():
            count_reason(reasons, reason, n)
        return AllocMetric(
            nodes_evaluated=self._walked + static.nodes_filtered,
            nodes_filtered=static.nodes_filtered,
            nodes_in_pool=len(self.base_nodes),
            class_filtered=dict(static.class_filtered),
            constraint_filtered=dict(static.constraint_filtered),
            nodes_exhausted=sum(reasons.values()),
            dimension_exhausted=reasons,
        )
