"""What a retry of the same evaluation keeps from the attempt before it.

A partially rejected plan makes the scheduler refresh its state and compute again (Nomad's
retry loop); with concurrent workers most evaluations retry once, to re-place the handful
of allocations whose nodes another plan filled. The base node set (ready nodes in the job's
datacenters and pool, shuffled), each group's feasible ring with its filter counts, and the
class eligibility depend on the nodes and the job only, not on usage: while neither changed
(same nodes table index, same job modify index) a retry reuses them and pays only for what
it places. Usage, which is what the other plan changed, is read from the refreshed snapshot
as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from actors.worker.core.scheduler.feasible import EvalEligibility
from actors.worker.core.scheduler.node_set import READY_NODES, ShuffledNodes
from actors.worker.core.scheduler.ring import FeasibleRing
from actors.worker.core.scheduler.stack import GroupStack
from contracts import Job

if TYPE_CHECKING:
    from actors.state import StateReader

AttemptKey = tuple[int, str, str, int]


@dataclass(slots=True)
class AttemptCache:
    key: AttemptKey
    eligibility: EvalEligibility
    nodes: ShuffledNodes | None = None
    by_dc: Mapping[str, int] = field(default_factory=dict)
    rings: dict[str, FeasibleRing] = field(default_factory=dict)

    @staticmethod
    def key_for(state: StateReader, job: Job) -> AttemptKey:
        return (state.table_index("nodes"), job.namespace, job.id, job.job_modify_index)

    def base_nodes(
        self, state: StateReader, job: Job, seed: int
    ) -> tuple[ShuffledNodes, Mapping[str, int]]:
        """Ready nodes in the job's datacenters and pool, in a shuffled order (drawn as
        the rings reach them, see node_set.py)."""
        if self.nodes is None:
            ready = READY_NODES.get(state, job)
            self.nodes, self.by_dc = ShuffledNodes(ready.nodes, seed), ready.by_dc
        return self.nodes, self.by_dc

    def restore(self, stack: GroupStack) -> None:
        """Give a new attempt's stack the ring its group had, with its filter counts (only
        the ring adds to them, as it grows)."""
        kept = self.rings.get(stack.tg.name)
        if kept is not None:
            stack.ring = kept
            stack.filter_metrics = kept.metrics

    def keep(self, stack: GroupStack) -> None:
        if stack.ring is not None and stack.tg.name not in self.rings:
            self.rings[stack.tg.name] = stack.ring
