"""Where the simulator's allocations run: unlimited room, or a pool of nodes.

The simulator asks a `ClusterModel` (a frozen description) to `start` a run's `Allocations`
(its mutable state) and then only talks to those: the target count changes (`scale`), the
ready count at a time (`ready`), the next time something changes (`next_point`) and the
accounting of each piece of the run (`step`). `Unlimited` is the simulator's own rule (every
allocation ready after its start delay, with room for all); `NodePool` adds nodes, their
provisioning delay, a fleet limit and idle-node removal, as a cluster autoscaler (Nomad
Autoscaler's cluster policies, Kubernetes' cluster-autoscaler) would, so that waiting for a
node and allocations blocked by the fleet limit are part of the run.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from actors.experiments.core.pool_run import ClusterStats, PoolRun, check_rules

__all__ = ["Allocations", "ClusterModel", "ClusterStats", "DelayFn", "NodePool", "Unlimited"]

DelayFn = Callable[[], float]


class Allocations(Protocol):
    """One run's allocations. Times passed in never decrease."""

    @property
    def count(self) -> int:
        """Allocations asked for: ready, starting or blocked."""
        ...

    def ready(self, t: float) -> int: ...

    def scale(self, t: float, target: int, delay: DelayFn) -> None:
        """Set the target at `t`; `delay()` draws one new allocation's start delay."""
        ...

    def next_point(self, t: float, end: float) -> float:
        """The first time in (t, end] where the ready count or the cluster changes."""
        ...

    def step(self, t: float, p: float) -> None:
        """Account [t, p) (nothing changes inside it) and apply what happens at `p`."""
        ...

    def stats(self) -> ClusterStats | None: ...


class ClusterModel(Protocol):
    def start(self, count: int) -> Allocations:
        """A run's state with `count` allocations ready at 0."""
        ...


class Unlimited:
    """Room for every allocation: each is ready its start delay after it is asked for."""

    __slots__ = ("ready_at",)

    def __init__(self, count: int = 0) -> None:
        # Sorted: the ready count at t is a bisection, the next ready time the entry after
        # it, and removing the latest-ready (starting ones first) is a truncation.
        self.ready_at: list[float] = [0.0] * count

    @property
    def count(self) -> int:
        return len(self.ready_at)

    def ready(self, t: float) -> int:
        return bisect.bisect_right(self.ready_at, t)

    def scale(self, t: float, target: int, delay: DelayFn) -> None:
        count = len(self.ready_at)
        if target > count:
            for _ in range(target - count):
                bisect.insort(self.ready_at, t + delay())
        else:
            del self.ready_at[target:]

    def next_point(self, t: float, end: float) -> float:
        i = bisect.bisect_right(self.ready_at, t)
        return self.ready_at[i] if i < len(self.ready_at) and self.ready_at[i] < end else end

    def step(self, t: float, p: float) -> None:
        return None

    def stats(self) -> ClusterStats | None:
        return None


@dataclass(frozen=True, slots=True)
class NodePool:
    """Identical nodes, each with room for `allocs_per_node` allocations.

    A node asked for at t is usable at t + `node_delay_s`; the fleet (provisioning nodes
    included) never exceeds `max_nodes` (None: no limit) nor goes below `min_nodes`; a node
    empty for `node_idle_s` (counted from when it is both empty and ready) is removed.
    Allocations that find no room make the pool ask for as many nodes as they need; what the
    limit leaves without room is blocked (asked for, never ready) until room appears, oldest
    first. An allocation is ready at max(placement + its start delay, its node's ready time):
    the start delay runs while its node provisions. The run starts settled: `start_count`
    allocations ready at 0 on `initial_nodes` nodes, or on as many more ready nodes as they
    need (within `max_nodes`)."""

    allocs_per_node: int = 1
    initial_nodes: int = 0
    min_nodes: int = 0
    max_nodes: int | None = None
    node_delay_s: float = 0.0
    node_idle_s: float = 300.0

    def __post_init__(self) -> None:
        if self.allocs_per_node < 1:
            raise ValueError("allocs_per_node must be at least 1")
        check_rules(self)

    def start(self, count: int) -> Allocations:
        return _PoolRun(count, rules=self)


@dataclass(slots=True)
class _Node:
    seq: int
    ready_s: float
    used: int = 0
    idle_from: float = 0.0  # when it last became empty (and ready); valid while used == 0


@dataclass(slots=True)
class _PoolRun(PoolRun[_Node, NodePool]):
    start_count: int
    room: dict[int, _Node] = field(default_factory=dict)  # nodes with a free slot
    node_of: list[int] = field(default_factory=list)  # the node of each `ready_at` entry
    blocked: deque[float] = field(default_factory=deque)  # start delays, oldest first
    provisioning: list[float] = field(default_factory=list)  # heap of node ready times
    counted: int = 0  # the oldest blocked ones already counted in `blocked_allocs`

    def __post_init__(self) -> None:
        per = self.rules.allocs_per_node
        need = -(-self.start_count // per)
        top = need if self.rules.max_nodes is None else min(need, self.rules.max_nodes)
        for _ in range(max(self.rules.initial_nodes, top)):
            self._add_node(0.0, 0.0)
        self.totals.nodes_provisioned = 0
        for _ in range(self.start_count):
            self.blocked.append(0.0)
        self._place_blocked(0.0)

    # -- the protocol -----------------------------------------------------------------------

    @property
    def count(self) -> int:
        return len(self.ready_at) + len(self.blocked)

    def scale(self, t: float, target: int, delay: DelayFn) -> None:
        count = self.count
        if target > count:
            for _ in range(target - count):
                self.blocked.append(delay())
            self._place_blocked(t)
        else:
            # Blocked first (newest first), then placed ones, the latest ready first.
            drop = count - target
            while drop and self.blocked:
                self.blocked.pop()
                drop -= 1
            self.counted = min(self.counted, len(self.blocked))
            for _ in range(drop):
                self.ready_at.pop()
                node = self.nodes[self.node_of.pop()]
                self.room[node.seq] = node
                self._emptied(t, node)
            self._place_blocked(t)
        self._due(t)

    def _next_node_ready(self) -> float | None:
        return self.provisioning[0] if self.provisioning else None

    def _blocked_now(self) -> int:
        return len(self.blocked)

    # -- nodes ------------------------------------------------------------------------------

    def _add_node(self, t: float, ready_s: float) -> _Node:
        self.seq += 1
        node = _Node(self.seq, ready_s, idle_from=ready_s)
        self.room[node.seq] = node
        if ready_s > t:
            heapq.heappush(self.provisioning, ready_s)
        self._joined(node)
        return node

    def _due(self, p: float) -> None:
        """Nodes that are ready at `p`, and idle nodes whose time is up."""
        while self.provisioning and self.provisioning[0] <= p:
            heapq.heappop(self.provisioning)
        for node in self._expired(p):
            del self.room[node.seq]
        # A node becoming ready or leaving gives no room to the blocked here (they are blocked
        # only while every node, provisioning ones too, is full), but other models may.

    # -- placement --------------------------------------------------------------------------

    def _place_blocked(self, t: float) -> None:
        """Place the blocked allocations, oldest first, asking for the nodes they need."""
        if not self.blocked:
            return
        per = self.rules.allocs_per_node
        free = sum(per - n.used for n in self.room.values())
        short = len(self.blocked) - free
        if short > 0:
            limit = math.inf if self.rules.max_nodes is None else self.rules.max_nodes
            for _ in range(int(min(-(-short // per), limit - len(self.nodes)))):
                self._add_node(t, t + self.rules.node_delay_s)
        while self.blocked and self.room:
            self._place(t, self._best(t), self.blocked.popleft())
            self.counted = max(0, self.counted - 1)
        if len(self.blocked) > self.counted:
            self.totals.blocked_allocs += len(self.blocked) - self.counted
            self.counted = len(self.blocked)

    def _best(self, t: float) -> _Node:
        """The node ready soonest; among ready ones the fullest (best fit), then the oldest,
        so that the newest nodes empty first and go."""
        return min(self.room.values(), key=lambda n: (max(n.ready_s, t), -n.used, n.seq))

    def _place(self, t: float, node: _Node, delay: float) -> None:
        node.used += 1
        if node.used == self.rules.allocs_per_node:
            del self.room[node.seq]
        ready_s = max(t + delay, node.ready_s)
        i = bisect.bisect_right(self.ready_at, ready_s)
        self.ready_at.insert(i, ready_s)
        self.node_of.insert(i, node.seq)
