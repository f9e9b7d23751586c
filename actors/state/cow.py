"""Copy-on-write tables: O(shards) snapshots, and a write copies at most one small piece.

A `CowMap` is N plain dicts (shards). `snapshot()` bumps the map's generation and hands out
the current shard dicts as a read-only `FrozenMap`; the first write to a shard whose
generation is older copies just that shard (a C-level copy of references), so readers never
see later writes and nothing is ever deep-copied. Values must be immutable. The cost of a
write after a snapshot grows with shard size, so big tables get more shards.

Secondary indexes (key -> ordered set of members) built on these are in multimap.py.

Shards are chosen by a stable hash by default (crc32, not `hash()`, which is salted per
process), so iteration order depends only on the sequence of writes: replicas in different
processes that apply the same log iterate in the same order. Tables looked up several times
per allocation and never iterated for a decision (allocations, evaluations, the by-node
index) use the builtin `hash` instead: Python's own string hash, cached on the string
object, makes a lookup a third cheaper; their iteration order differs between processes, so
their listings sort (see actors/api).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

DEFAULT_SHARDS = 256


def stable_hash(key: object) -> int:
    """A process-independent hash for str, int and tuple-of-str keys."""
    if isinstance(key, str):
        return zlib.crc32(key.encode())
    if isinstance(key, tuple):
        return zlib.crc32("\x00".join(key).encode())
    if isinstance(key, int):
        return key
    raise TypeError(f"unsupported key type {type(key).__name__}")


def single_shard(key: object) -> int:
    """For one-shard maps: no hashing at all, and iteration stays in insertion order."""
    return 0


def str_hash(key: object) -> int:
    """stable_hash for maps keyed by str only (skips the type dispatch)."""
    return zlib.crc32(key.encode())  # type: ignore[attr-defined]


def job_key_hash(key: object) -> int:
    """stable_hash for maps keyed by (namespace, job id): the id alone picks the shard (no
    join, no type dispatch; a follower hashes a couple of dozen job keys per evaluation)."""
    return zlib.crc32(key[1].encode())  # type: ignore[index]


class ShardedView(Generic[K, V]):
    """Read operations shared by the live map and its snapshots."""

    __slots__ = ("_hash", "_len", "_mask", "_shards")

    _shards: Sequence[dict[K, V]]
    _mask: int
    _len: int
    _hash: Callable[[object], int]

    def get(self, key: K) -> V | None:
        return self._shards[self._hash(key) & self._mask].get(key)

    def lookup(self) -> Callable[[K], V | None]:
        """`get` without the per-call hashing when there is one shard: the dict's own get.
        Only valid on a snapshot (a live map may replace its shard on the next write)."""
        if len(self._shards) == 1:
            return self._shards[0].get
        return self.get

    def __getitem__(self, key: K) -> V:
        return self._shards[self._hash(key) & self._mask][key]

    def __contains__(self, key: K) -> bool:
        return key in self._shards[self._hash(key) & self._mask]

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[K]:
        for shard in self._shards:
            yield from shard

    def values(self) -> Iterator[V]:
        for shard in self._shards:
            yield from shard.values()

    def items(self) -> Iterator[tuple[K, V]]:
        for shard in self._shards:
            yield from shard.items()

    def to_dict(self) -> dict[K, V]:
        """A plain copy (O(n)); for tests and debugging."""
        return dict(self.items())

    def shard_identity(self) -> tuple[dict[K, V], ...]:
        """The shard dicts themselves. A dict a snapshot holds is never written again (the
        live map copies a shard before its first write after a snapshot), so together with
        the table's index these identify the content, for caches of data derived from it."""
        return tuple(self._shards)


class FrozenMap(ShardedView[K, V]):
    """A point-in-time, read-only view of a `CowMap`."""

    __slots__ = ()

    def __init__(
        self, shards: tuple[dict[K, V], ...], length: int, hash_fn: Callable[[object], int]
    ) -> None:
        self._shards = shards
        self._mask = len(shards) - 1
        self._len = length
        self._hash = hash_fn


class CowMap(ShardedView[K, V]):
    """A mutable sharded map whose snapshots are O(shards) and isolated from later writes."""

    __slots__ = ("_frozen", "_gen", "_gens")

    _shards: list[dict[K, V]]

    def __init__(
        self, shards: int = DEFAULT_SHARDS, hash_fn: Callable[[object], int] = stable_hash
    ) -> None:
        if shards < 1 or shards & (shards - 1):
            raise ValueError("shards must be a power of two")
        self._shards = [{} for _ in range(shards)]
        self._gens = [0] * shards
        self._gen = 0
        self._mask = shards - 1
        self._len = 0
        self._hash = single_shard if shards == 1 else hash_fn
        # The last snapshot, while nothing has been written since: handed out again.
        self._frozen: FrozenMap[K, V] | None = None

    def _writable_at(self, i: int) -> dict[K, V]:
        self._frozen = None
        if self._gens[i] != self._gen:
            self._shards[i] = self._shards[i].copy()
            self._gens[i] = self._gen
        return self._shards[i]

    def set(self, key: K, value: V) -> None:
        self.set_at(self._hash(key) & self._mask, key, value)

    __setitem__ = set

    # Hot paths that read then write one key hash it once: slot(), get_at(), set_at().

    def slot(self, key: K) -> int:
        return self._hash(key) & self._mask

    def get_at(self, slot: int, key: K) -> V | None:
        return self._shards[slot].get(key)

    def set_at(self, slot: int, key: K, value: V) -> None:
        self._frozen = None
        shard = self._shards[slot] if self._gens[slot] == self._gen else self._writable_at(slot)
        if key not in shard:
            self._len += 1
        shard[key] = value

    def pop(self, key: K) -> V | None:
        """Remove `key`; returns its value, or None if it was absent (no copy then)."""
        i = self._hash(key) & self._mask
        if key not in self._shards[i]:
            return None
        self._len -= 1
        return self._writable_at(i).pop(key)

    def snapshot(self) -> FrozenMap[K, V]:
        """O(shards), or O(1) when nothing was written since the last one (a store snapshot
        per evaluation takes one of each of its tables, most of them unchanged)."""
        frozen = self._frozen
        if frozen is None:
            self._gen += 1
            frozen = self._frozen = FrozenMap(tuple(self._shards), self._len, self._hash)
        return frozen
