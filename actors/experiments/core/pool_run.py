"""What a run on a pool of nodes keeps whichever way it places allocations (cluster.NodePool
counts slots, placement_core.CorePool asks drover's scheduler): the placed allocations by
ready time, idle-node removal after `node_idle_s` down to `min_nodes`, the points where the
run splits, and the node and blocked integrals behind `ClusterStats`."""

from __future__ import annotations

import bisect
import heapq
import math
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar


@dataclass(slots=True)
class ClusterStats:
    """What the cluster cost and what it held back, over the whole run."""

    node_hours: float = 0.0  # nodes (provisioning ones included: they are paid for) x time
    peak_nodes: int = 0
    blocked_alloc_hours: float = 0.0  # time-integral of the blocked allocations
    blocked_allocs: int = 0  # allocations that had to wait for room (each time one did)
    nodes_provisioned: int = 0  # beyond the initial ones
    nodes_removed: int = 0


class PoolRules(Protocol):
    @property
    def initial_nodes(self) -> int: ...
    @property
    def min_nodes(self) -> int: ...
    @property
    def max_nodes(self) -> int | None: ...
    @property
    def node_delay_s(self) -> float: ...
    @property
    def node_idle_s(self) -> float: ...


def check_rules(pool: PoolRules) -> None:
    """The bounds every pool shares; ValueError naming what is wrong."""
    if pool.node_delay_s < 0 or pool.node_idle_s < 0:
        raise ValueError("node_delay_s and node_idle_s must not be negative")
    top = math.inf if pool.max_nodes is None else pool.max_nodes
    if not 0 <= pool.min_nodes <= pool.initial_nodes <= top:
        raise ValueError("need 0 <= min_nodes <= initial_nodes <= max_nodes")


class PoolNode(Protocol):
    seq: int
    ready_s: float
    used: int
    idle_from: float  # when it last became empty (and ready); valid while used == 0


N = TypeVar("N", bound=PoolNode)
R = TypeVar("R", bound=PoolRules)


@dataclass(slots=True, kw_only=True)
class PoolRun(Generic[N, R]):
    """The shared half of a pool run; a subclass places and provisions (`_due`, and what
    `_blocked_now` and `_next_node_ready` read). `rules` is the pool it runs."""

    rules: R
    nodes: dict[int, N] = field(default_factory=dict)
    # Placed allocations sorted by ready time: ready counts bisect, scale-in takes from the
    # end (the latest ready first).
    ready_at: list[float] = field(default_factory=list)
    removals: list[tuple[float, int]] = field(default_factory=list)  # heap (time, node seq)
    node_s: float = 0.0  # integrals in seconds, hours in stats()
    blocked_s: float = 0.0
    totals: ClusterStats = field(default_factory=ClusterStats)
    seq: int = 0

    def ready(self, t: float) -> int:
        return bisect.bisect_right(self.ready_at, t)

    def next_point(self, t: float, end: float) -> float:
        i = bisect.bisect_right(self.ready_at, t)
        nxt = self.ready_at[i] if i < len(self.ready_at) and self.ready_at[i] < end else end
        joining = self._next_node_ready()
        if joining is not None and joining < nxt:
            nxt = joining
        removals = self.removals
        while removals and not self._removable(*removals[0]):
            heapq.heappop(removals)
        if removals and removals[0][0] < nxt:
            nxt = removals[0][0]
        return nxt

    def step(self, t: float, p: float) -> None:
        dt = p - t
        self.node_s += len(self.nodes) * dt
        self.blocked_s += self._blocked_now() * dt
        self._due(p)

    def stats(self) -> ClusterStats | None:
        self.totals.node_hours = self.node_s / 3600.0
        self.totals.blocked_alloc_hours = self.blocked_s / 3600.0
        return self.totals

    # -- nodes ------------------------------------------------------------------------------

    def _joined(self, node: N) -> None:
        """Count a new node and start its idle clock."""
        self.nodes[node.seq] = node
        self.totals.nodes_provisioned += 1
        self.totals.peak_nodes = max(self.totals.peak_nodes, len(self.nodes))
        self._idle(node)

    def _idle(self, node: N) -> None:
        heapq.heappush(self.removals, (node.idle_from + self.rules.node_idle_s, node.seq))

    def _emptied(self, t: float, node: N) -> None:
        node.used -= 1
        if node.used == 0:
            node.idle_from = max(t, node.ready_s)
            self._idle(node)

    def _removable(self, at: float, seq: int) -> bool:
        node = self.nodes.get(seq)
        return (
            node is not None
            and node.used == 0
            and node.idle_from + self.rules.node_idle_s == at
            and len(self.nodes) > self.rules.min_nodes
        )

    def _expired(self, p: float) -> list[N]:
        """Remove the idle nodes whose time is up at `p`; the removed ones."""
        gone = []
        while self.removals and self.removals[0][0] <= p:
            at, seq = heapq.heappop(self.removals)
            if self._removable(at, seq):
                gone.append(self.nodes.pop(seq))
                self.totals.nodes_removed += 1
        return gone

    # -- for the subclass -------------------------------------------------------------------

    def _next_node_ready(self) -> float | None:
        raise NotImplementedError

    def _blocked_now(self) -> int:
        raise NotImplementedError

    def _due(self, p: float) -> None:
        raise NotImplementedError
