"""Priority heaps of evaluation IDs (Nomad's ReadyEvaluations and PendingEvaluations).

Items are eval IDs; the sort key is computed once at push time from the record. A unique
sequence number ends every key, so records are never compared and ties stay FIFO.
Nothing is ever removed from the middle of these heaps, so no lazy deletion is needed.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator

from contracts.evaluation import Evaluation

_Item = tuple[int, int, int, str]


class _EvalHeap:
    __slots__ = ("_heap",)

    _seq = itertools.count()

    def __init__(self) -> None:
        self._heap: list[_Item] = []

    def _key(self, evaluation: Evaluation) -> tuple[int, int]:
        raise NotImplementedError

    def push(self, evaluation: Evaluation) -> None:
        first, second = self._key(evaluation)
        heapq.heappush(self._heap, (first, second, next(self._seq), evaluation.id))

    def pop(self) -> str:
        return heapq.heappop(self._heap)[3]

    def top_priority(self) -> int:
        """The priority of the next item; the heap must not be empty."""
        return -self._heap[0][0]

    def __len__(self) -> int:
        return len(self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)

    def __iter__(self) -> Iterator[str]:
        """All IDs, in no particular order."""
        return (item[3] for item in self._heap)


class ReadyQueue(_EvalHeap):
    """One scheduler type's ready evals: higher Priority first, then lower CreateIndex.

    Nomad's `ReadyEvaluations.Peek` returns the last slice element instead of the root;
    the reference notes it as a quirk not to copy, so `top_priority` reads the root.
    """

    __slots__ = ()

    def _key(self, evaluation: Evaluation) -> tuple[int, int]:
        return (-evaluation.priority, evaluation.create_index)


class PendingQueue(_EvalHeap):
    """A job's evals waiting behind its in-flight one: higher Priority, then newer ModifyIndex.

    On Ack Nomad keeps only the top of this heap (`MarkForCancel`); `drain` hands back
    the rest so the broker can mark them cancelable.
    """

    __slots__ = ()

    def _key(self, evaluation: Evaluation) -> tuple[int, int]:
        return (-evaluation.priority, -evaluation.modify_index)

    def drain(self) -> list[str]:
        """Remove and return every remaining ID, in heap order (deterministic)."""
        ids = [item[3] for item in sorted(self._heap)]
        self._heap.clear()
        return ids
