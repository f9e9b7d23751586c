"""Client heartbeat deadlines: which nodes have gone quiet for too long.

Nomad's servers keep one TTL timer per node (`nomad/heartbeat.go`): every heartbeat resets
it, and when it fires the node is marked down and its allocations are rescheduled. Here
the deadlines sit on one heap instead of a timer each, so `expired` costs O(k log n) for
k expiries rather than a scan of every node. `grace_s` plays the part of Nomad's
heartbeat grace, the slack for a beat that is merely late (and, after a leader change, for
clients to find the new leader: call `beat` for every known node when taking over, as
Nomad's `initializeHeartbeatTimers` does).
"""

from __future__ import annotations

import heapq
import itertools


def rate_scaled_ttl(
    node_count: int, *, min_ttl_s: float = 10.0, max_per_second: float = 50.0
) -> float:
    """Nomad's heartbeat TTL: long enough that `node_count` clients beat at most
    `max_per_second` times a second in total, and never under `min_ttl_s`."""
    return max(min_ttl_s, node_count / max_per_second)


class HeartbeatTracker:
    """Last-beat deadlines per node; each expired node is reported once until it beats."""

    __slots__ = ("_heap", "_live", "_seq", "grace_s", "ttl_s")

    def __init__(self, ttl_s: float, grace_s: float = 0.0) -> None:
        if ttl_s <= 0 or grace_s < 0:
            raise ValueError("ttl_s must be positive and grace_s not negative")
        self.ttl_s = ttl_s
        self.grace_s = grace_s
        self._heap: list[tuple[float, int, str]] = []
        self._live: dict[str, tuple[float, int]] = {}  # node -> (deadline, seq of its entry)
        self._seq = itertools.count()

    def beat(self, node_id: str, now: float) -> None:
        self._arm(node_id, now + self.ttl_s + self.grace_s)
        if len(self._heap) > 2 * len(self._live) + 64:
            self._compact()

    def _arm(self, node_id: str, deadline: float) -> None:
        seq = next(self._seq)
        self._live[node_id] = (deadline, seq)
        heapq.heappush(self._heap, (deadline, seq, node_id))

    def overdue(self, node_ids: list[str], now: float) -> None:
        """Nodes `expired` reported whose handling failed (their commit did not go through):
        reported again by the next `expired`, unless they beat first."""
        for node_id in node_ids:
            if node_id not in self._live:  # else it beat meanwhile
                self._arm(node_id, now)

    def forget(self, node_id: str) -> None:
        """Stop tracking a node (deregistered, or already handled as down)."""
        self._live.pop(node_id, None)

    def expired(self, now: float) -> list[str]:
        """Nodes whose last beat is older than ttl + grace, earliest first; each once."""
        heap, live, out = self._heap, self._live, []
        while heap and heap[0][0] < now:
            deadline, seq, node_id = heapq.heappop(heap)
            if live.get(node_id) == (deadline, seq):
                del live[node_id]
                out.append(node_id)
        return out

    def deadline(self, node_id: str) -> float | None:
        """When the node expires unless it beats first; None if it is not tracked."""
        entry = self._live.get(node_id)
        return None if entry is None else entry[0]

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._live

    def __len__(self) -> int:
        return len(self._live)

    def _compact(self) -> None:
        """Drop the entries superseded by later beats, so frequent beats cannot grow the heap."""
        live = self._live
        self._heap = [e for e in self._heap if live.get(e[2]) == (e[0], e[1])]
        heapq.heapify(self._heap)
