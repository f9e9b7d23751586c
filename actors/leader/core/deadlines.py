"""The leader's timers: moments at which it must decide something nobody asks for.

The kinds: a node drain's deadline (the allocations still on the node are then forced off,
as Nomad's drainer does), a draining job's next health (its next batch may migrate then,
drainer.py), a run's wait limit (dstack's `retry.duration` for no-capacity: a
run still waiting then fails), a periodic job's next launch (periodic.py) and a deployment's
health and progress deadlines (deployment_watcher.py). Each is pushed
when the decision that starts it is made, and rebuilt from the state once after a reload, so
the loop never scans the nodes or jobs to find what is due. An entry is only a reminder: when
it comes due the state is read again, and an entry whose cause went away (drain cancelled,
run started, job registered again) decides nothing.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from enum import Enum


class DeadlineKind(Enum):
    DRAIN = "drain"  # key: (node_id, the drain's started_at)
    MIGRATE = "migrate"  # key: (namespace, job_id): a draining job's next batch may be due
    RUN_WAIT = "run-wait"  # key: (namespace, job_id, version)
    PERIODIC = "periodic"  # key: (namespace, job_id, submit_time): a periodic job's next launch
    # key: (deployment_id, alloc_id, "healthy" | "deadline"): an allocation's health is due
    ALLOC_HEALTH = "alloc-health"
    PROGRESS = "progress"  # key: (deployment_id, require_progress_by)


@dataclass(frozen=True, slots=True, order=True)
class Due:
    at_ns: int
    kind: DeadlineKind
    key: tuple[str | int, ...]


# A burst of deadlines is decided over several turns so that one turn stays short.
MAX_DUE_PER_TURN = 256


class Deadlines:
    def __init__(self) -> None:
        self._heap: list[tuple[int, str, tuple[str | int, ...]]] = []
        self._known: set[tuple[int, str, tuple[str | int, ...]]] = set()

    def add(self, at_ns: int, kind: DeadlineKind, key: tuple[str | int, ...]) -> None:
        item = (at_ns, kind.value, key)
        if item in self._known:  # a decision re-made on retry pushes nothing twice
            return
        self._known.add(item)
        heapq.heappush(self._heap, item)

    def times(self, kind: DeadlineKind) -> list[int]:
        """When each pending reminder of `kind` comes due, soonest first."""
        return sorted(at for at, k, _key in self._heap if k == kind.value)

    def next_at(self) -> int | None:
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now_ns: int, limit: int = MAX_DUE_PER_TURN) -> list[Due]:
        due: list[Due] = []
        while self._heap and self._heap[0][0] <= now_ns and len(due) < limit:
            item = heapq.heappop(self._heap)
            self._known.discard(item)
            due.append(Due(item[0], DeadlineKind(item[1]), item[2]))
        return due

    def __len__(self) -> int:
        return len(self._heap)
