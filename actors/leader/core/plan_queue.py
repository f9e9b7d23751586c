"""The leader's plan queue: highest priority first, FIFO within a priority (Nomad's PlanQueue)."""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from contracts import Plan

T = TypeVar("T")


@dataclass(order=True, slots=True)
class _Entry(Generic[T]):
    neg_priority: int
    seq: int
    plan: Plan = field(compare=False)
    handle: T = field(compare=False)


class PlanQueue(Generic[T]):
    """`handle` is whatever the caller needs to answer the submitter (a reply stream, a future)."""

    def __init__(self) -> None:
        self._heap: list[_Entry[T]] = []
        self._seq = itertools.count()

    def push(self, plan: Plan, handle: T) -> None:
        heapq.heappush(self._heap, _Entry(-plan.priority, next(self._seq), plan, handle))

    def pop(self) -> tuple[Plan, T] | None:
        if not self._heap:
            return None
        entry = heapq.heappop(self._heap)
        return entry.plan, entry.handle

    def __len__(self) -> int:
        return len(self._heap)
