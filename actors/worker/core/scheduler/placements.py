"""The reconciler's placements, with a group's new allocations named on demand.

A group's count can be far larger than what the cluster holds (`count = 1000000000` is a
valid job up to the server's limit). Building one placement record per missing allocation
would make an evaluation's memory and time follow the count; instead the missing ones are a
run: `count` placements that come into being as the scheduler asks for the next one. When a
placement of the group fails, the scheduler stops there (Nomad's coalesced failures) and
`drop_rest` says how many were never attempted, without making them. Items already made are
kept, so the placements can be iterated more than once (tests, the rebase pass)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(slots=True)
class _Run(Generic[T]):
    group: str
    count: int
    source: Iterator[T]
    made: list[T] = field(default_factory=list)
    dropped: bool = False

    def items(self) -> Iterator[T]:
        i = 0
        while True:
            if i < len(self.made):
                yield self.made[i]
            elif self.dropped or len(self.made) >= self.count:
                return
            else:
                item = next(self.source)
                self.made.append(item)
                yield item
            i += 1

    @property
    def size(self) -> int:
        return len(self.made) if self.dropped else self.count


class Placements(Generic[T]):
    """Placements in the reconciler's order: single ones (`append`) and runs (`add_run`)."""

    __slots__ = ("_segments",)

    def __init__(self) -> None:
        self._segments: list[list[T] | _Run[T]] = []

    def append(self, item: T) -> None:
        last = self._segments[-1] if self._segments else None
        if isinstance(last, list):
            last.append(item)
        else:
            self._segments.append([item])

    def add_run(self, group: str, count: int, source: Iterator[T]) -> None:
        """`count` placements of `group`, each made by `source` when first reached."""
        if count > 0:
            self._segments.append(_Run(group, count, source))

    def drop_rest(self, group: str) -> int:
        """Stop the group's runs where they are: the number of placements never made."""
        dropped = 0
        for segment in self._segments:
            if isinstance(segment, _Run) and segment.group == group and not segment.dropped:
                dropped += segment.count - len(segment.made)
                segment.dropped = True
        return dropped

    def __iter__(self) -> Iterator[T]:
        for segment in self._segments:
            if isinstance(segment, list):
                yield from segment
            else:
                yield from segment.items()

    def __len__(self) -> int:
        return sum(len(s) if isinstance(s, list) else s.size for s in self._segments)

    def __bool__(self) -> bool:
        return len(self) > 0

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Placements | list):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Placements({len(self)} placements)"
