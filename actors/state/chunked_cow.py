"""A copy-on-write map for tables of thousands of shards: its snapshot copies a chunk list.

`CowMap.snapshot()` hands out a tuple of every shard dict: O(shards), and each shard's
reference count is touched twice (the tuple made, then freed with the snapshot). For the
allocation table's 16,384 shards that was a quarter of a millisecond per snapshot on the
leader, whose local scheduling takes one every few small evaluations, nearly all of it
cache misses on dicts nobody else was reading.

Here the shards are kept in chunks of up to 2**CHUNK_BITS. A snapshot is a tuple of one
tuple per chunk, and a chunk's tuple is made again only if one of its shards was replaced
since the last snapshot: a snapshot after a few placements re-tuples a few chunks, not every
shard.
The rules are CowMap's: the first write to a shard after a snapshot copies that shard (and
marks its chunk), so no snapshot ever sees a later write. Reads cost one more index.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

from actors.state.cow import K, ShardedView, stable_hash

V = TypeVar("V")

CHUNK_BITS = 7  # 128 shards a chunk: 16,384 shards make 128 chunks


class ChunkedView(ShardedView[K, V]):
    """Reads over shards kept in chunks (shard i is chunk i >> bits, position i & low).
    A ShardedView to its readers (the store's tables are typed so); every read is its own,
    and the flat `_shards` is left unset."""

    __slots__ = ("_bits", "_chunks", "_low")

    _chunks: list[list[dict[K, V]]] | tuple[tuple[dict[K, V], ...], ...]
    _bits: int
    _low: int

    def _shard_of(self, key: K) -> dict[K, V]:
        i = self._hash(key) & self._mask
        return self._chunks[i >> self._bits][i & self._low]

    def get(self, key: K) -> V | None:
        i = self._hash(key) & self._mask
        return self._chunks[i >> self._bits][i & self._low].get(key)

    def lookup(self) -> Callable[[K], V | None]:
        return self.get

    def __getitem__(self, key: K) -> V:
        return self._shard_of(key)[key]

    def __contains__(self, key: K) -> bool:
        return key in self._shard_of(key)

    def __iter__(self) -> Iterator[K]:
        for chunk in self._chunks:
            for shard in chunk:
                yield from shard

    def values(self) -> Iterator[V]:
        for chunk in self._chunks:
            for shard in chunk:
                yield from shard.values()

    def items(self) -> Iterator[tuple[K, V]]:
        for chunk in self._chunks:
            for shard in chunk:
                yield from shard.items()

    def shard_identity(self) -> tuple[dict[K, V], ...]:
        return tuple(shard for chunk in self._chunks for shard in chunk)


class ChunkedFrozenMap(ChunkedView[K, V]):
    """A point-in-time, read-only view of a `ChunkedCowMap`."""

    __slots__ = ()

    def __init__(
        self,
        chunks: tuple[tuple[dict[K, V], ...], ...],
        length: int,
        hash_fn: Callable[[object], int],
        mask: int,
        bits: int,
    ) -> None:
        self._chunks = chunks
        self._len = length
        self._hash = hash_fn
        self._mask = mask
        self._bits = bits
        self._low = (1 << bits) - 1


class ChunkedCowMap(ChunkedView[K, V]):
    """A mutable map of `shards` shards (a power of two), in chunks of up to 2**CHUNK_BITS;
    the same API as `CowMap`."""

    __slots__ = ("_changed", "_frozen", "_gen", "_gens", "_tuples")

    _chunks: list[list[dict[K, V]]]

    def __init__(self, shards: int, hash_fn: Callable[[object], int] = stable_hash) -> None:
        if shards < 1 or shards & (shards - 1):
            raise ValueError("shards must be a power of two")
        self._bits = min(CHUNK_BITS, shards.bit_length() - 1)
        self._low = (1 << self._bits) - 1
        size = 1 << self._bits
        self._chunks = [[{} for _ in range(size)] for _ in range(shards // size)]
        self._gens = [0] * shards  # the generation each shard was last copied in
        self._gen = 0
        self._mask = shards - 1
        self._len = 0
        self._hash = hash_fn
        # Each chunk's tuple as the last snapshot took it, () once one of its shards was
        # replaced since (a chunk is never empty); `_changed` lists those chunks.
        self._tuples: list[tuple[dict[K, V], ...]] = [()] * len(self._chunks)
        self._changed: set[int] = set(range(len(self._chunks)))
        self._frozen: ChunkedFrozenMap[K, V] | None = None

    def _writable_at(self, i: int) -> dict[K, V]:
        self._frozen = None
        chunk = i >> self._bits
        if self._gens[i] != self._gen:
            shards = self._chunks[chunk]
            shards[i & self._low] = shards[i & self._low].copy()
            self._gens[i] = self._gen
            if self._tuples[chunk]:
                self._tuples[chunk] = ()
                self._changed.add(chunk)
        return self._chunks[chunk][i & self._low]

    def slot(self, key: K) -> int:
        return self._hash(key) & self._mask

    def get_at(self, slot: int, key: K) -> V | None:
        return self._chunks[slot >> self._bits][slot & self._low].get(key)

    def set_at(self, slot: int, key: K, value: V) -> None:
        if self._gens[slot] == self._gen:  # copied since the last snapshot: its own
            self._frozen = None
            shard = self._chunks[slot >> self._bits][slot & self._low]
        else:
            shard = self._writable_at(slot)
        if key not in shard:
            self._len += 1
        shard[key] = value

    def set(self, key: K, value: V) -> None:
        self.set_at(self._hash(key) & self._mask, key, value)

    __setitem__ = set

    def pop(self, key: K) -> V | None:
        """Remove `key`; returns its value, or None if it was absent (no copy then)."""
        i = self._hash(key) & self._mask
        if key not in self._chunks[i >> self._bits][i & self._low]:
            return None
        self._len -= 1
        return self._writable_at(i).pop(key)

    def snapshot(self) -> ChunkedFrozenMap[K, V]:
        """O(chunks changed since the last one); O(1) when nothing was written since."""
        frozen = self._frozen
        if frozen is None:
            self._gen += 1
            tuples = self._tuples
            for chunk in self._changed:
                tuples[chunk] = tuple(self._chunks[chunk])
            self._changed.clear()
            frozen = self._frozen = ChunkedFrozenMap(
                tuple(tuples),
                self._len,
                self._hash,
                self._mask,
                self._bits,
            )
        return frozen
