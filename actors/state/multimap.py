"""Copy-on-write secondary indexes: key -> an ordered set of members (a job's allocations,
a node's allocations, a job's evaluations).

The outer map is a copy-on-write table (cow.py's `CowMap`, or chunked_cow.py's
`ChunkedCowMap` for indexes keyed by job, which grow with the cluster): a snapshot of the
index is a snapshot of it. One level down, a key's member set (a dict used as an ordered
set) is copied on its first write after a snapshot, so a snapshot never sees a later add.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable, Iterator
from typing import Generic, TypeVar

from actors.state.chunked_cow import ChunkedCowMap
from actors.state.cow import DEFAULT_SHARDS, CowMap, K, ShardedView, stable_hash

M = TypeVar("M", bound=Hashable)

_EMPTY: tuple[()] = ()


class MultiView(Generic[K, M]):
    """Read side of a secondary index: key -> members in insertion order."""

    __slots__ = ("_outer",)

    _outer: ShardedView[K, dict[M, None]]

    def get(self, key: K) -> Collection[M]:
        inner = self._outer.get(key)
        return _EMPTY if inner is None else inner.keys()

    def count(self, key: K) -> int:
        inner = self._outer.get(key)
        return 0 if inner is None else len(inner)

    def keys(self) -> Iterator[K]:
        return iter(self._outer)

    def to_dict(self) -> dict[K, list[M]]:
        return {k: list(v) for k, v in self._outer.items()}


class FrozenMultiMap(MultiView[K, M]):
    __slots__ = ()

    def __init__(self, outer: ShardedView[K, dict[M, None]]) -> None:
        self._outer = outer


class CowMultiMap(MultiView[K, M]):
    """A mutable index; a key's member set is copied on its first write after a snapshot.
    Its outer map is a `CowMap` of `shards` (by `hash_fn`), or the table given as `outer`."""

    __slots__ = ("_owned",)

    _outer: CowMap[K, dict[M, None]] | ChunkedCowMap[K, dict[M, None]]

    def __init__(
        self,
        shards: int = DEFAULT_SHARDS,
        hash_fn: Callable[[object], int] = stable_hash,
        *,
        outer: ChunkedCowMap[K, dict[M, None]] | None = None,
    ) -> None:
        self._outer = CowMap(shards, hash_fn) if outer is None else outer
        # Keys whose inner dict was created since the last snapshot (safe to mutate).
        self._owned: set[K] = set()

    def add(self, key: K, member: M) -> None:
        outer = self._outer
        i = outer.slot(key)
        inner = outer.get_at(i, key)
        if inner is None:
            inner = {member: None}
            outer._len += 1
        elif member in inner:
            return
        elif key in self._owned:
            inner[member] = None  # created since the last snapshot: no reader holds it
            return
        else:
            inner = inner.copy()
            inner[member] = None
        outer._writable_at(i)[key] = inner
        self._owned.add(key)

    def add_many(self, key: K, members: Iterable[M]) -> None:
        """`add` for each member, hashing the key and copying its member set at most once."""
        outer = self._outer
        i = outer.slot(key)
        inner = outer.get_at(i, key)
        if inner is not None and key in self._owned:
            inner.update(dict.fromkeys(members))
            return
        if inner is None:
            inner = dict.fromkeys(members)
            if not inner:
                return
            outer._len += 1
        else:
            inner = {**inner, **dict.fromkeys(members)}
        outer._writable_at(i)[key] = inner
        self._owned.add(key)

    def discard(self, key: K, member: M) -> None:
        outer = self._outer
        i = outer.slot(key)
        inner = outer.get_at(i, key)
        if inner is None or member not in inner:
            return
        if len(inner) == 1:
            del outer._writable_at(i)[key]
            outer._len -= 1
            self._owned.discard(key)
        elif key in self._owned:
            del inner[member]
        else:
            inner = inner.copy()
            del inner[member]
            outer._writable_at(i)[key] = inner
            self._owned.add(key)

    def snapshot(self) -> FrozenMultiMap[K, M]:
        self._owned = set()
        return FrozenMultiMap(self._outer.snapshot())
