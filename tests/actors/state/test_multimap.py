"""Copy-on-write secondary indexes, over a CowMap and over a ChunkedCowMap (the store's
job-keyed indexes): snapshots never see later writes, and a write copies one key's set."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from actors.state.chunked_cow import ChunkedCowMap
from actors.state.multimap import CowMultiMap, FrozenMultiMap

Make = Callable[[int], CowMultiMap[Any, Any]]


def over_cow_map(shards: int) -> CowMultiMap[Any, Any]:
    return CowMultiMap(shards)


def over_chunked_map(shards: int) -> CowMultiMap[Any, Any]:
    return CowMultiMap(outer=ChunkedCowMap(shards))


OUTERS = pytest.mark.parametrize("make", [over_cow_map, over_chunked_map])


@OUTERS
def test_multimap_add_discard_and_isolation(make: Make) -> None:
    mm: CowMultiMap[str, str] = make(4)
    mm.add("n1", "a1")
    mm.add("n1", "a2")
    mm.add("n1", "a2")  # duplicate is a no-op
    mm.add("n2", "b1")
    assert list(mm.get("n1")) == ["a1", "a2"]
    assert mm.count("n1") == 2 and mm.count("zz") == 0
    assert list(mm.get("zz")) == []
    snap = mm.snapshot()
    mm.add("n1", "a3")
    mm.discard("n1", "a1")
    mm.discard("n2", "b1")  # last member: the key goes away
    mm.discard("n2", "nope")
    assert list(snap.get("n1")) == ["a1", "a2"]
    assert list(snap.get("n2")) == ["b1"]
    assert list(mm.get("n1")) == ["a2", "a3"]
    assert list(mm.get("n2")) == []
    assert sorted(mm.keys()) == ["n1"]
    assert snap.to_dict() == {"n1": ["a1", "a2"], "n2": ["b1"]}


@OUTERS
def test_multimap_copies_only_the_written_key(make: Make) -> None:
    mm: CowMultiMap[str, int] = make(1)
    for key in ("a", "b"):
        for i in range(100):
            mm.add(key, i)
    snap = mm.snapshot()
    mm.add("a", 1000)
    mm.add("a", 1001)  # second write after the snapshot mutates the same (owned) copy
    assert snap._outer.get("b") is mm._outer.get("b")
    assert snap._outer.get("a") is not mm._outer.get("a")
    assert 1000 not in snap.get("a") and 1001 in mm.get("a")


@OUTERS
def test_multimap_many_snapshots(make: Make) -> None:
    mm: CowMultiMap[str, int] = make(2)
    model: dict[str, list[int]] = {}
    snaps: list[tuple[FrozenMultiMap[str, int], dict[str, list[int]]]] = []
    for step in range(60):
        key = f"k{step % 3}"
        if step % 4 == 3 and model.get(key):
            victim = model[key][0]
            mm.discard(key, victim)
            model[key].remove(victim)
            if not model[key]:
                del model[key]
        else:
            mm.add(key, step)
            model.setdefault(key, []).append(step)
        snaps.append((mm.snapshot(), {k: list(v) for k, v in model.items()}))
    for snap, expected in snaps:
        assert snap.to_dict() == expected


@OUTERS
def test_add_many_writes_a_key_once_and_keeps_snapshots_isolated(make: Make) -> None:
    m: CowMultiMap[str, str] = make(4)
    m.add("n1", "a")
    before = m.snapshot()
    m.add_many("n1", ["b", "c", "a"])  # copied once; a member already there stays put
    m.add_many("n2", ["x"])
    m.add_many("n2", ["y"])  # created since the snapshot: written in place
    m.add_many("n3", [])  # nothing to add: no key
    assert list(before.get("n1")) == ["a"] and list(before.get("n2")) == []
    assert list(m.get("n1")) == ["a", "b", "c"]
    assert list(m.get("n2")) == ["x", "y"]
    assert "n3" not in list(m.keys())
    after = m.snapshot()
    m.add_many("n2", ["z"])
    assert list(after.get("n2")) == ["x", "y"]


@OUTERS
def test_a_handed_out_again_multimap_snapshot_never_sees_later_writes(make: Make) -> None:
    mm: CowMultiMap[str, str] = make(2)
    mm.add("k", "a")
    mm.add("k", "b")  # created since the last snapshot: changed in place
    first = mm.snapshot()
    assert mm.snapshot().to_dict() == first.to_dict() == {"k": ["a", "b"]}
    for write in (
        lambda: mm.add("k", "c"),
        lambda: mm.add("k", "d"),  # in place now, on the copy the first add made
        lambda: mm.add_many("k", ["e"]),
        lambda: mm.discard("k", "a"),
    ):
        before = mm.snapshot()
        frozen = before.to_dict()
        write()
        assert before.to_dict() == frozen
    assert first.to_dict() == {"k": ["a", "b"]}
    assert mm.snapshot().to_dict() == {"k": ["b", "c", "d", "e"]}


# ---------------------------------------------------------------------------------------------
# Property tests against a plain-dict model

KEYS = st.sampled_from([f"k{i}" for i in range(12)])


class CowMultiMapMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.live: CowMultiMap[str, int] = self.make_multimap()
        self.model: dict[str, dict[int, None]] = {}
        self.snaps: list[tuple[FrozenMultiMap[str, int], dict[str, list[int]]]] = []

    def make_multimap(self) -> CowMultiMap[str, int]:
        return CowMultiMap(shards=2)

    @rule(key=KEYS, member=st.integers(0, 5))
    def add(self, key: str, member: int) -> None:
        self.live.add(key, member)
        self.model.setdefault(key, {})[member] = None

    @rule(key=KEYS, members=st.lists(st.integers(0, 5), max_size=3))
    def add_many(self, key: str, members: list[int]) -> None:
        self.live.add_many(key, members)
        if members:
            self.model.setdefault(key, {}).update(dict.fromkeys(members))

    @rule(key=KEYS, member=st.integers(0, 5))
    def discard(self, key: str, member: int) -> None:
        self.live.discard(key, member)
        inner = self.model.get(key)
        if inner is not None:
            inner.pop(member, None)
            if not inner:
                del self.model[key]

    @rule()
    def snapshot(self) -> None:
        self.snaps.append((self.live.snapshot(), self._expected()))

    def _expected(self) -> dict[str, list[int]]:
        return {k: list(v) for k, v in self.model.items()}

    @invariant()
    def matches_models(self) -> None:
        assert self.live.to_dict() == self._expected()
        for snap, expected in self.snaps:
            assert snap.to_dict() == expected
            for key, members in expected.items():
                assert list(snap.get(key)) == members
                assert snap.count(key) == len(members)


class ChunkedCowMultiMapMachine(CowMultiMapMachine):
    def make_multimap(self) -> CowMultiMap[str, int]:
        return CowMultiMap(outer=ChunkedCowMap(4))


PROPERTY_SETTINGS = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestCowMultiMapProperties = CowMultiMapMachine.TestCase
TestCowMultiMapProperties.settings = PROPERTY_SETTINGS
TestChunkedCowMultiMapProperties = ChunkedCowMultiMapMachine.TestCase
TestChunkedCowMultiMapProperties.settings = PROPERTY_SETTINGS
