"""An evaluation's base node set: the ready nodes in the job's datacenters and pool, shuffled.

Nomad builds it for every evaluation (readyNodesInDCsAndPool, then shuffleNodes). That is
O(nodes) each time: at 5,000 nodes about 5 ms in Python, most of what a one-allocation
evaluation costs. Here neither part is paid per evaluation:

- `ReadyNodeCache` shares the filtered list between the evaluations that read the same
  nodes table (its index and shard dicts identify the content, see
  `StateReader.nodes_version`), one entry per (pool, datacenters);
- `ShuffledNodes` is a uniform random permutation drawn lazily, one Fisher-Yates step per
  position the first time a placement walk reaches it (stack.py pulls feasibility the same
  way, as Nomad's iterator chain does), so an evaluation that looks at twenty nodes shuffles
  twenty, and one that places a thousand allocations shuffles them all, as before.
"""

from __future__ import annotations

import random
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, overload

from actors.worker.core.scheduler.feasible import ready_nodes_in_pool
from contracts import Job, Node

if TYPE_CHECKING:
    from actors.state import StateReader

NodeSetKey = tuple[str, tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class ReadyNodes:
    """Ready nodes of one pool and datacenter list, in table order, and the count per DC."""

    nodes: tuple[Node, ...]
    by_dc: Mapping[str, int]  # read-only: every evaluation that hits the cache shares it


def same_version(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    """Index equal, shard dicts identical (see `StateReader.nodes_version`)."""
    return (
        len(a) == len(b) and a[0] == b[0] and all(x is y for x, y in zip(a[1:], b[1:], strict=True))
    )


class ReadyNodeCache:
    """The latest ready-node set per (pool, datacenters), recomputed when the nodes table
    moves. Bounded: the least recently used key goes past `capacity` (an entry holds
    references to its table's shards, so old tables live only as long as their entry)."""

    def __init__(self, capacity: int = 32) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[NodeSetKey, tuple[tuple[object, ...], ReadyNodes]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, state: StateReader, job: Job) -> ReadyNodes:
        key: NodeSetKey = (
            "" if job.node_pool in ("", "all") else job.node_pool,
            tuple(sorted(set(job.datacenters))),
        )
        version = state.nodes_version()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and same_version(entry[0], version):
                self._entries.move_to_end(key)
                self.hits += 1
                return entry[1]
        nodes, by_dc = ready_nodes_in_pool(state.nodes(), job)
        ready = ReadyNodes(tuple(nodes), MappingProxyType(by_dc))
        with self._lock:
            self.misses += 1
            self._entries[key] = (version, ready)
            self._entries.move_to_end(key)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)
        return ready

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


# One per process: every scheduler of a worker reads through it (stores in one process,
# as in tests, differ by their shard dicts, so they never share an entry).
READY_NODES = ReadyNodeCache()


class ShuffledNodes(Sequence[Node]):
    """A uniformly random permutation of `nodes` for `seed`, fixed position by position as
    it is read (Fisher-Yates from the front: position i takes a random one of the nodes not
    yet placed). The same seed gives the same order however it is read.

    A short draw (a one-allocation evaluation reads sixteen positions of thousands)
    copies nothing: the positions a swap displaced are kept in a dict over the shared input.
    Past `SPARSE_UPTO` of the input the nodes are copied once and swapped in place, as the
    dict would cost more than the copy. Both draws consume the same random numbers, so the
    order does not depend on which one ran."""

    __slots__ = ("_base", "_displaced", "_drawn", "_nodes", "_random")

    # The share of the input a draw may fix before the input is copied.
    SPARSE_UPTO = 0.125

    def __init__(self, nodes: Sequence[Node], seed: int) -> None:
        self._base = nodes
        # Positions [0, _drawn) fixed, in order; once copied, every position (see draw).
        self._nodes: list[Node] = []
        self._displaced: dict[int, Node] | None = {}  # position -> node a swap moved there
        self._drawn = 0
        self._random = random.Random(seed).random

    def __len__(self) -> int:
        return len(self._base)

    def draw(self, end: int) -> None:
        """Fix the order of positions below `end`."""
        n = len(self._base)
        end = min(end, n)
        i = self._drawn
        if i >= end:
            return
        rand = self._random
        displaced = self._displaced
        if displaced is not None and end > n * self.SPARSE_UPTO:
            self._copy_out(displaced)
            displaced = None
        if displaced is None:
            nodes = self._nodes
            while i < end:
                # A float draw is a third of randrange's cost; its bias (2**-53) is immaterial.
                j = i + int(rand() * (n - i))
                nodes[i], nodes[j] = nodes[j], nodes[i]
                i += 1
        else:
            base, fixed = self._base, self._nodes
            while i < end:
                j = i + int(rand() * (n - i))
                current = displaced.pop(i, None)
                if current is None:
                    current = base[i]
                if j == i:
                    fixed.append(current)
                else:
                    chosen = displaced.get(j)
                    fixed.append(base[j] if chosen is None else chosen)
                    displaced[j] = current
                i += 1
        self._drawn = end

    def _copy_out(self, displaced: dict[int, Node]) -> None:
        """Switch to the dense draw: every position's node in a list of its own."""
        nodes = list(self._base)
        nodes[: self._drawn] = self._nodes
        for position, node in displaced.items():
            nodes[position] = node
        self._nodes = nodes
        self._displaced = None

    def drawn(self) -> int:
        return self._drawn

    @overload
    def __getitem__(self, index: int) -> Node: ...
    @overload
    def __getitem__(self, index: slice) -> list[Node]: ...
    def __getitem__(self, index: int | slice) -> Node | list[Node]:
        if isinstance(index, slice):
            self.draw(len(self._base))
            return self._nodes[index]
        n = len(self._base)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("ShuffledNodes index out of range")
        if index >= self._drawn:
            self.draw(index + 1)
        return self._nodes[index]

    def window(self, start: int, stop: int) -> list[Node]:
        """Positions [start, stop) in their shuffled order."""
        self.draw(stop)
        return self._nodes[start:stop]

    def __iter__(self) -> Iterator[Node]:
        self.draw(len(self._base))
        return iter(self._nodes)
