"""Deadlines by eval ID on one heap: the broker's stand-in for Go's `time.AfterFunc` timers.

Re-arming or cancelling a deadline leaves its old heap entry behind (lazy deletion): a
popped entry counts only if it is still the key's live generation. Stale entries are
compacted away once they outnumber live ones, so frequent `OutstandingReset` calls cannot
grow the heap without bound.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator


class TimerHeap:
    """Arm, re-arm and cancel deadlines in O(log n); pop them in deadline order."""

    __slots__ = ("_gen", "_heap", "_live")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, str]] = []
        self._live: dict[str, tuple[float, int]] = {}
        self._gen = itertools.count()

    def arm(self, key: str, deadline: float) -> None:
        """Set (or move) `key`'s deadline."""
        gen = next(self._gen)
        self._live[key] = (deadline, gen)
        heapq.heappush(self._heap, (deadline, gen, key))
        if len(self._heap) > 2 * len(self._live) + 64:
            live = self._live
            self._heap = [t for t in self._heap if live.get(t[2], (0.0, -1))[1] == t[1]]
            heapq.heapify(self._heap)

    def cancel(self, key: str) -> None:
        self._live.pop(key, None)

    def deadline(self, key: str) -> float | None:
        live = self._live.get(key)
        return None if live is None else live[0]

    def pop_due(self, now: float) -> tuple[str, float] | None:
        """Remove and return the earliest (key, deadline) at or before `now`, if any."""
        heap, live = self._heap, self._live
        while heap and heap[0][0] <= now:
            deadline, gen, key = heapq.heappop(heap)
            if live.get(key, (0.0, -1))[1] == gen:
                del live[key]
                return key, deadline
        return None

    def __iter__(self) -> Iterator[str]:
        """The keys with a live deadline, in no particular order."""
        return iter(self._live)

    def heap_size(self) -> int:
        """Live plus stale entries (for tests of the compaction)."""
        return len(self._heap)

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, key: object) -> bool:
        return key in self._live
