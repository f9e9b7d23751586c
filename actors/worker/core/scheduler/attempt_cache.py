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

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from actors.worker.core.scheduler.feasible import (
    EvalEligibility,
    FilterMetrics,
    ready_nodes_in_pool,
)
from actors.worker.core.scheduler.stack import GroupStack, Ring
from contracts import Job, Node

if TYPE_CHECKING:
    from actors.state import StateReader

AttemptKey = tuple[int, str, str, int]


@dataclass(slots=True)
class AttemptCache:
    key: AttemptKey
    eligibility: EvalEligibility
    nodes: list[Node] | None = None
    by_dc: dict[str, int] = field(default_factory=dict)
    rings: dict[str, tuple[Ring, FilterMetrics]] = field(default_factory=dict)

    @staticmethod
    def key_for(state: StateReader, job: Job) -> AttemptKey:
        return (state.table_index("nodes"), job.namespace, job.id, job.job_modify_index)

    def base_nodes(
        self, state: StateReader, job: Job, seed: int
    ) -> tuple[list[Node], dict[str, int]]:
        """Ready nodes in the job's datacenters and pool, in a shuffled order."""
        if self.nodes is None:
            nodes, self.by_dc = ready_nodes_in_pool(state.nodes(), job)
            random.Random(seed).shuffle(nodes)
            self.nodes = nodes
        return self.nodes, self.by_dc

    def restore(self, stack: GroupStack) -> None:
        """Give a new attempt's stack the ring its group had (filter counts copied: the
        stack adds to them)."""
        kept = self.rings.get(stack.tg.name)
        if kept is not None:
            ring, metrics = kept
            stack.ring = ring
            stack.filter_metrics = metrics.copy()

    def keep(self, stack: GroupStack) -> None:
        if stack.ring is not None and stack.tg.name not in self.rings:
            self.rings[stack.tg.name] = (stack.ring, stack.filter_metrics.copy())
