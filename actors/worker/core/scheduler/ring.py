"""A task group's feasible nodes, filtered from the base node set as placements reach them.

Feasibility does not change within an evaluation, so each node is checked once per group; the
ring keeps the nodes that pass, with their capacities (minus reserved) and the reciprocals the
inlined bin-packing score multiplies by. It grows in chunks, each twice the last, only when a
walk runs past its end (Nomad's iterator chain pulls nodes the same way): a one-allocation
evaluation on 5,000 nodes checks what one walk scores (its stack sizes the first chunk so),
a big one ends up checking them all. Positions never move once appended, so a walk's
exhaustion marks stay valid as the ring grows.
"""

from __future__ import annotations

from collections.abc import Sequence

from actors.worker.core.scheduler.feasible import FilterMetrics, GroupFeasibility
from actors.worker.core.scheduler.node_set import ShuffledNodes
from actors.worker.core.scheduler.phases import now_ns
from contracts import Node

# (node, cpu, memory_mb, disk_mb, 1/cpu, 1/memory)
RingEntry = tuple[Node, int, int, int, float, float]

FIRST_CHUNK = 32
MAX_CHUNK = 4096


class FeasibleRing:
    __slots__ = (
        "_base",
        "_chunk",
        "_feasibility",
        "build_ns",
        "complete",
        "entries",
        "metrics",
        "pulled",
    )

    def __init__(
        self,
        base: Sequence[Node],
        feasibility: GroupFeasibility,
        metrics: FilterMetrics,
        first_chunk: int = FIRST_CHUNK,
    ) -> None:
        self._base = base
        self._feasibility = feasibility
        self._chunk = max(1, first_chunk)
        self.entries: list[RingEntry] = []
        # Nodes filtered out are counted here as they are checked (for AllocMetric).
        self.metrics = metrics
        self.pulled = 0  # base positions checked so far
        self.complete = len(base) == 0
        self.build_ns = 0  # time spent checking, for the feasibility phase

    def extend(self) -> None:
        """Check the next chunk of base nodes and append the feasible ones."""
        if self.complete:
            return
        started = now_ns()
        base, start = self._base, self.pulled
        stop = min(start + self._chunk, len(base))
        self._chunk = min(self._chunk * 2, MAX_CHUNK)
        chunk = base.window(start, stop) if isinstance(base, ShuffledNodes) else base[start:stop]
        append = self.entries.append
        for node in self._feasibility.feasible_nodes(chunk, self.metrics):
            res, reserved = node.node_resources, node.reserved_resources
            cpu = res.cpu - reserved.cpu
            mem = res.memory_mb - reserved.memory_mb
            append(
                (
                    node,
                    cpu,
                    mem,
                    res.disk_mb - reserved.disk_mb,
                    1.0 / cpu if cpu > 0 else 0.0,
                    1.0 / mem if mem > 0 else 0.0,
                )
            )
        self.pulled = stop
        self.complete = stop >= len(base)
        self.build_ns += now_ns() - started

    def fill(self) -> None:
        """Check every remaining node (for callers that need the whole ring)."""
        while not self.complete:
            self.extend()
