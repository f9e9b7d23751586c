"""The chunked copy-on-write map (chunked_cow.py): CowMap's behaviour, with a snapshot that
re-tuples only the chunks written since the last one.

Proven here:
- reads, writes, pops and iteration answer as CowMap's (and a plain dict) do, for shard
  counts below, at and above one chunk;
- no snapshot ever sees a later write, over many interleaved writes and snapshots (a
  hypothesis state machine against plain-dict models);
- a snapshot shares the tuple of every chunk not written since the one before, and the
  shard dicts of every shard not written; a snapshot with nothing written since is the same
  object;
- the store keeps its allocations in one, and its snapshots and reads work as before.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import settings

from actors.state import StateStore
from actors.state.chunked_cow import CHUNK_BITS, ChunkedCowMap
from actors.state.cow import CowMap, stable_hash
from tests.actors.state.test_cow import CowMapMachine


@pytest.mark.parametrize("shards", [1, 2, 64, 128, 256, 4096])
def test_it_answers_as_a_cow_map(shards: int) -> None:
    chunked: ChunkedCowMap[str, int] = ChunkedCowMap(shards)
    flat: CowMap[str, int] = CowMap(shards)
    for m in (chunked, flat):
        for i in range(500):
            m.set(f"k{i}", i)
        m["extra"] = -1
        for i in range(0, 500, 7):
            assert m.pop(f"k{i}") == i
        assert m.pop("missing") is None
        slot = m.slot("k1")
        m.set_at(slot, "k1", 100)
        assert m.get_at(slot, "k1") == 100
    assert list(chunked.items()) == list(flat.items())  # same shards, same order
    assert list(chunked) == list(flat) and list(chunked.values()) == list(flat.values())
    assert len(chunked) == len(flat) == 500 - 72 + 1
    assert chunked.get("k1") == chunked["k1"] == 100 and "k0" not in chunked
    assert chunked.lookup()("extra") == -1
    assert chunked.snapshot().to_dict() == flat.snapshot().to_dict()
    assert chunked.shard_identity() == flat.shard_identity()


def test_shards_must_be_a_power_of_two() -> None:
    for shards in (0, 3, 100):
        with pytest.raises(ValueError):
            ChunkedCowMap(shards)


def test_snapshot_never_sees_later_writes() -> None:
    m: ChunkedCowMap[str, int] = ChunkedCowMap(1024)
    for i in range(3000):
        m.set(f"k{i}", i)
    snap = m.snapshot()
    m.set("k0", -1)
    m.pop("k1")
    m.set("new", 7)
    m.set("new", 8)  # a shard already copied since the snapshot: written in place
    assert snap.get("k0") == 0 and snap.get("k1") == 1 and snap.get("new") is None
    assert len(snap) == 3000
    assert snap.to_dict() == {f"k{i}": i for i in range(3000)}
    assert m.get("k0") == -1 and "k1" not in m and m["new"] == 8 and len(m) == 3000


def test_a_snapshot_retuples_only_the_chunks_written_since() -> None:
    shards = 16 << CHUNK_BITS  # 16 chunks
    m: ChunkedCowMap[str, int] = ChunkedCowMap(shards, stable_hash)
    for i in range(5000):
        m.set(f"k{i}", i)
    first = m.snapshot()
    assert m.snapshot() is first  # nothing written: the same view
    m.set("k5", -5)
    second = m.snapshot()

    written = (stable_hash("k5") & (shards - 1)) >> CHUNK_BITS
    same_chunk = [first._chunks[c] is second._chunks[c] for c in range(16)]
    assert same_chunk.count(False) == 1 and not same_chunk[written]
    pairs = zip(first.shard_identity(), second.shard_identity(), strict=True)
    shared_shards = [a is b for a, b in pairs]
    assert shared_shards.count(False) == 1  # only the written shard was copied
    assert first.get("k5") == 5 and second.get("k5") == -5


class ChunkedMapMachine(CowMapMachine):
    def make_map(self) -> Any:
        return ChunkedCowMap(8)  # chunks of 8, below a full one


class WideChunkedMapMachine(CowMapMachine):
    def make_map(self) -> Any:
        return ChunkedCowMap(4 << CHUNK_BITS)  # four full chunks


TestChunkedMapProperties = ChunkedMapMachine.TestCase
TestChunkedMapProperties.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None
)
TestWideChunkedMapProperties = WideChunkedMapMachine.TestCase
TestWideChunkedMapProperties.settings = settings(
    max_examples=60, stateful_step_count=40, deadline=None
)


def test_the_store_keeps_allocations_in_chunks_and_its_snapshots_hold() -> None:
    from contracts import Allocation
    from contracts.state_log import UpsertAllocs

    store = StateStore()
    assert isinstance(store._allocs, ChunkedCowMap)
    allocs = tuple(
        Allocation(id=f"a{i}", eval_id="e", node_id=f"n{i % 7}", job_id="web", task_group="g")
        for i in range(50)
    )
    store.commit(UpsertAllocs(allocs[:30]))
    before = store.snapshot()
    store.commit(UpsertAllocs(allocs[30:]))
    after = store.snapshot()

    assert before.alloc_count() == 30 and after.alloc_count() == 50
    assert before.alloc("a40") is None and after.alloc("a40") is not None
    assert {a.id for a in before.allocs_by_job("default", "web")} == {f"a{i}" for i in range(30)}
    assert len(after.allocs_by_node("n0")) == len([i for i in range(50) if i % 7 == 0])
