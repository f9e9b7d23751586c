"""Copy-on-write tables: snapshots are isolated from later writes and cost O(shards)."""

from __future__ import annotations

import zlib
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from actors.state.cow import CowMap, FrozenMap, ShardedView, stable_hash


def test_basic_map_operations() -> None:
    m: CowMap[str, int] = CowMap(shards=8)
    m.set("a", 1)
    m["b"] = 2
    assert m.get("a") == 1 and m["b"] == 2 and m.get("zz") is None
    assert "a" in m and "zz" not in m
    assert len(m) == 2
    m.set("a", 10)
    assert len(m) == 2
    assert m.pop("a") == 10
    assert m.pop("a") is None
    assert len(m) == 1
    assert sorted(m) == ["b"] and list(m.values()) == [2] and list(m.items()) == [("b", 2)]


def test_shards_must_be_a_power_of_two() -> None:
    with pytest.raises(ValueError):
        CowMap(shards=3)
    with pytest.raises(ValueError):
        CowMap(shards=0)


def test_snapshot_never_sees_later_writes() -> None:
    m: CowMap[str, int] = CowMap(shards=4)
    for i in range(100):
        m.set(f"k{i}", i)
    snap = m.snapshot()
    m.set("k0", -1)  # overwrite
    m.pop("k1")  # delete
    m.set("new", 7)  # insert
    assert snap.get("k0") == 0
    assert snap.get("k1") == 1
    assert snap.get("new") is None
    assert len(snap) == 100
    assert snap.to_dict() == {f"k{i}": i for i in range(100)}
    assert m.get("k0") == -1 and "k1" not in m and len(m) == 100


def test_writes_after_many_snapshots() -> None:
    m: CowMap[str, int] = CowMap(shards=2)
    model: dict[str, int] = {}
    snaps: list[tuple[FrozenMap[str, int], dict[str, int]]] = []
    for step in range(50):
        key = f"k{step % 7}"
        if step % 5 == 4:
            m.pop(key)
            model.pop(key, None)
        else:
            m.set(key, step)
            model[key] = step
        snaps.append((m.snapshot(), dict(model)))
        snaps.append((m.snapshot(), dict(model)))  # back-to-back snapshots share shards
    for snap, expected in snaps:
        assert snap.to_dict() == expected
        assert len(snap) == len(expected)
    assert m.to_dict() == model


def test_snapshot_shares_untouched_shards() -> None:
    m: CowMap[str, int] = CowMap(shards=16)
    for i in range(1000):
        m.set(f"k{i}", i)
    snap = m.snapshot()
    m.set("k5", -5)
    touched = stable_hash("k5") & 15
    live_shards = m._shards
    frozen_shards = snap._shards
    shared = [live_shards[i] is frozen_shards[i] for i in range(16)]
    assert not shared[touched]
    assert sum(shared) == 15


def test_stable_hash_is_process_independent() -> None:
    assert stable_hash("node-1") == zlib.crc32(b"node-1")
    assert stable_hash(("default", "web")) == zlib.crc32(b"default\x00web")
    assert stable_hash(42) == 42
    with pytest.raises(TypeError):
        stable_hash(1.5)


def test_iteration_order_depends_only_on_writes() -> None:
    a: CowMap[str, int] = CowMap(shards=8)
    b: CowMap[str, int] = CowMap(shards=8)
    for m in (a, b):
        for i in range(200):
            m.set(f"id-{i}", i)
        for i in range(0, 200, 3):
            m.pop(f"id-{i}")
        m.snapshot()
        m.set("id-1", -1)
    assert list(a.items()) == list(b.items())


# ---------------------------------------------------------------------------------------------
# Property tests against plain-dict models

KEYS = st.sampled_from([f"k{i}" for i in range(12)])


class CowMapMachine(RuleBasedStateMachine):
    """CowMap against a dict model; test_chunked_cow.py runs it over ChunkedCowMap too."""

    def __init__(self) -> None:
        super().__init__()
        self.live = self.make_map()
        self.model: dict[str, int] = {}
        self.snaps: list[tuple[ShardedView[str, int], dict[str, int]]] = []

    def make_map(self) -> Any:
        return CowMap(shards=4)

    @rule(key=KEYS, value=st.integers())
    def set(self, key: str, value: int) -> None:
        self.live.set(key, value)
        self.model[key] = value

    @rule(key=KEYS)
    def pop(self, key: str) -> None:
        assert self.live.pop(key) == self.model.pop(key, None)

    @rule()
    def snapshot(self) -> None:
        self.snaps.append((self.live.snapshot(), dict(self.model)))

    @invariant()
    def matches_models(self) -> None:
        assert self.live.to_dict() == self.model
        assert len(self.live) == len(self.model)
        for snap, expected in self.snaps:
            assert snap.to_dict() == expected
            assert len(snap) == len(expected)
            for key in expected:
                assert snap.get(key) == expected[key] and key in snap


TestCowMapProperties = CowMapMachine.TestCase
TestCowMapProperties.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)


def test_a_snapshot_with_nothing_written_since_is_handed_out_again() -> None:
    m: CowMap[str, int] = CowMap(shards=4)
    m.set("a", 1)
    first = m.snapshot()
    assert m.snapshot() is first  # nothing written: the same view, no new generation
    m.set("b", 2)
    second = m.snapshot()
    assert second is not first and dict(second.items()) == {"a": 1, "b": 2}
    assert dict(first.items()) == {"a": 1}
    m.pop("a")
    third = m.snapshot()
    assert third is not second and dict(third.items()) == {"b": 2}
    assert m.pop("missing") is None and m.snapshot() is third  # a no-op pop writes nothing
    m.set("c", 3)  # a write to a shard already copied since the last snapshot
    assert dict(third.items()) == {"b": 2} and dict(m.snapshot().items()) == {"b": 2, "c": 3}


def test_job_keys_hash_by_their_id_the_same_in_every_process() -> None:
    from actors.state.cow import job_key_hash

    assert job_key_hash(("default", "web")) == zlib.crc32(b"web")
    assert job_key_hash(("other", "web")) == job_key_hash(("default", "web"))  # same shard
    m: CowMap[tuple[str, str], int] = CowMap(shards=8, hash_fn=job_key_hash)
    m.set(("default", "web"), 1)
    m.set(("other", "web"), 2)  # one shard, two keys: both kept
    assert m.get(("default", "web")) == 1 and m.get(("other", "web")) == 2
