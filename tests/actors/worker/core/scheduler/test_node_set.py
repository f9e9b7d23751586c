"""An evaluation's base node set (node_set.py) and the nodes-table version that keys it.

Proven here:
- `ShuffledNodes` is a permutation of its input, fixed by its seed whatever way it is read
  (position by position, `window`, iteration, mixed), drawn only as far as it is read, and
  roughly uniform over seeds; a short draw copies nothing of its input, and the order is
  a plain Fisher-Yates shuffle's whether the draw stayed short, went past the copy point
  midway, or read everything at once;
- `ReadyNodeCache` computes a (pool, datacenters) set once per nodes-table content, sees
  every node write (snapshots and the live store alike), never shares an entry between two
  stores, and evicts the least recently used key past its capacity;
- `StateReader.nodes_version` (with `same_version`) is equal for readers of the same nodes
  table content and differs after a node write, while older snapshots keep their nodes.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from actors.state import StateStore
from actors.worker.core.scheduler.node_set import (
    READY_NODES,
    ReadyNodeCache,
    ShuffledNodes,
    same_version,
)
from contracts import DrainStrategy, NodeEligibility, NodeStatus
from contracts.node import Node
from contracts.state_log import UpsertAllocs, UpsertNodes


def plain_nodes(n: int) -> list[Node]:
    return [Node(id=f"n{i:03d}") for i in range(n)]


def ids(nodes: Any) -> list[str]:
    return [n.id for n in nodes]


# -- ShuffledNodes ----------------------------------------------------------------------------


def test_shuffle_is_a_permutation_of_its_input_and_leaves_the_input_alone() -> None:
    nodes = plain_nodes(50)
    before = list(nodes)
    shuffled = ShuffledNodes(nodes, seed=7)

    out = list(shuffled)

    assert len(shuffled) == 50 and len(out) == 50
    assert sorted(ids(out)) == sorted(ids(nodes))
    assert all(any(o is n for n in nodes) for o in out)  # the same objects, not copies
    assert out != nodes  # 50! orders: the identity permutation is not what seed 7 gives
    assert nodes == before  # the draw swaps in its own copy


def test_shuffle_accepts_a_tuple() -> None:
    nodes = tuple(plain_nodes(10))
    assert sorted(ids(ShuffledNodes(nodes, seed=3))) == sorted(ids(nodes))


def test_same_seed_same_order_however_it_is_read() -> None:
    nodes = plain_nodes(100)
    expected = ids(ShuffledNodes(nodes, seed=42))  # by iteration

    by_position = ShuffledNodes(nodes, seed=42)
    assert [by_position[i].id for i in range(100)] == expected

    by_window = ShuffledNodes(nodes, seed=42)
    windows = [by_window.window(start, min(start + 7, 100)) for start in range(0, 100, 7)]
    assert [n.id for w in windows for n in w] == expected

    mixed = ShuffledNodes(nodes, seed=42)
    assert mixed[10].id == expected[10]  # draws 0..10
    assert mixed[3].id == expected[3]  # already drawn
    assert ids(mixed.window(5, 40)) == expected[5:40]
    assert mixed[-1].id == expected[-1]  # draws everything
    assert ids(mixed.window(0, 100)) == expected
    assert ids(mixed) == expected
    assert ids(mixed) == expected  # reading again changes nothing


def fisher_yates(nodes: list[Node], seed: int) -> list[str]:
    """The order a whole in-place shuffle gives, drawing as ShuffledNodes draws."""
    order, rand = list(nodes), random.Random(seed).random
    for i in range(len(order)):
        j = i + int(rand() * (len(order) - i))
        order[i], order[j] = order[j], order[i]
    return ids(order)


@pytest.mark.parametrize("seed", [0, 1, 99, 2**40 + 3])
def test_order_is_fisher_yates_whichever_way_it_is_drawn(seed: int) -> None:
    nodes = plain_nodes(400)
    expected = fisher_yates(nodes, seed)
    sparse_upto = int(len(nodes) * ShuffledNodes.SPARSE_UPTO)  # 50 of 400

    short = ShuffledNodes(nodes, seed)
    assert ids(short.window(0, 16)) == expected[:16]
    assert short[sparse_upto - 1].id == expected[sparse_upto - 1]
    assert short._displaced is not None  # still sparse: the input was not copied

    crossing = ShuffledNodes(nodes, seed)
    assert ids(crossing.window(0, 30)) == expected[:30]
    assert ids(crossing.window(30, 200)) == expected[30:200]  # copied out midway
    assert crossing._displaced is None
    assert ids(crossing) == expected

    at_once = ShuffledNodes(nodes, seed)
    assert ids(at_once) == expected
    assert short.window(0, 400) and ids(short) == expected  # the short one, read to the end


def test_a_short_draw_reads_its_input_and_never_writes_it() -> None:
    nodes = tuple(plain_nodes(5000))
    shuffled = ShuffledNodes(nodes, seed=11)

    drawn = shuffled.window(0, 16)

    assert shuffled._base is nodes  # shared, not copied
    assert shuffled._displaced is not None and len(shuffled._displaced) <= 16
    assert len({n.id for n in drawn}) == 16
    assert ids(drawn) == fisher_yates(list(nodes), 11)[:16]


def test_different_seeds_give_different_orders() -> None:
    nodes = plain_nodes(100)
    orders = {tuple(ids(ShuffledNodes(nodes, seed))) for seed in range(20)}
    assert len(orders) == 20
    # Not just a rotation or a swap: the first positions differ too.
    firsts = {tuple(ids(ShuffledNodes(nodes, seed).window(0, 5))) for seed in range(20)}
    assert len(firsts) == 20


def test_reading_position_k_draws_only_up_to_k() -> None:
    shuffled = ShuffledNodes(plain_nodes(1000), seed=1)
    assert shuffled.drawn() == 0

    shuffled[9]
    assert shuffled.drawn() == 10
    shuffled[4]  # below what is drawn: nothing more
    assert shuffled.drawn() == 10

    shuffled.window(10, 42)
    assert shuffled.drawn() == 42
    shuffled.window(0, 20)
    assert shuffled.drawn() == 42

    shuffled.draw(30)  # never backwards
    assert shuffled.drawn() == 42
    shuffled.window(990, 5000)  # clamped to the length
    assert shuffled.drawn() == 1000


def test_negative_index_reads_from_the_end() -> None:
    nodes = plain_nodes(30)
    expected = ids(ShuffledNodes(nodes, seed=5))

    shuffled = ShuffledNodes(nodes, seed=5)
    assert shuffled[-1].id == expected[-1]
    assert shuffled.drawn() == 30  # the last position needs the whole draw
    assert shuffled[-30].id == expected[0]
    assert [n.id for n in reversed(ShuffledNodes(nodes, seed=5))] == expected[::-1]


def test_index_past_the_end_raises() -> None:
    shuffled = ShuffledNodes(plain_nodes(5), seed=5)
    with pytest.raises(IndexError):
        shuffled[5]


def test_negative_index_past_the_start_raises() -> None:
    shuffled = ShuffledNodes(plain_nodes(5), seed=5)
    with pytest.raises(IndexError):
        shuffled[-6]


def test_a_slice_reads_the_shuffled_order() -> None:
    nodes = plain_nodes(50)
    expected = [n.id for n in ShuffledNodes(nodes, seed=3)]
    shuffled = ShuffledNodes(nodes, seed=3)
    assert [n.id for n in shuffled[10:20]] == expected[10:20]
    assert [n.id for n in shuffled[::-1]] == expected[::-1]


def test_empty_input() -> None:
    shuffled = ShuffledNodes([], seed=9)
    assert len(shuffled) == 0
    assert list(shuffled) == []
    assert shuffled.window(0, 10) == []
    assert shuffled.drawn() == 0
    with pytest.raises(IndexError):
        shuffled[0]


def test_first_position_is_roughly_uniform_over_seeds() -> None:
    """Each of 5 nodes comes first about 1/5 of the time over 5,000 fixed seeds (the
    binomial standard deviation is ~28, the tolerance 150)."""
    nodes = plain_nodes(5)
    firsts: dict[str, int] = {}
    lasts: dict[str, int] = {}
    for seed in range(5000):
        shuffled = ShuffledNodes(nodes, seed)
        first = shuffled[0].id
        firsts[first] = firsts.get(first, 0) + 1
        last = shuffled[-1].id
        lasts[last] = lasts.get(last, 0) + 1
    assert set(firsts) == set(ids(nodes)) and set(lasts) == set(ids(nodes))
    assert all(850 <= n <= 1150 for n in firsts.values()), firsts
    assert all(850 <= n <= 1150 for n in lasts.values()), lasts


# -- ReadyNodeCache ---------------------------------------------------------------------------


def test_snapshots_without_a_node_change_share_one_computation(h: Any, build: Any) -> None:
    h.nodes(5)
    job = build.job("web")
    cache = ReadyNodeCache()

    first = cache.get(h.store.snapshot(), job)
    # Writes to other tables leave the nodes table (index and shards) as it was.
    h.register(job)
    h.add_allocs(build.alloc(job, "node-0", 0))
    second = cache.get(h.store.snapshot(), job)

    assert (cache.misses, cache.hits) == (1, 1)
    assert second is first
    assert ids(first.nodes) == [f"node-{i}" for i in range(5)]  # table order
    assert first.by_dc == {"dc1": 5}


def test_a_node_write_recomputes_and_shows_the_change(h: Any, build: Any) -> None:
    h.nodes(4)
    job = build.job("web")
    cache = ReadyNodeCache()
    before = cache.get(h.store.snapshot(), job)
    assert ids(before.nodes) == ["node-0", "node-1", "node-2", "node-3"]

    h.update_node("node-0", scheduling_eligibility=NodeEligibility.INELIGIBLE)
    h.update_node("node-1", drain_strategy=DrainStrategy())
    h.update_node("node-2", status=NodeStatus.DOWN)
    h.add_nodes(build.node("fresh", datacenter="dc2"))
    after = cache.get(h.store.snapshot(), job)

    assert (cache.misses, cache.hits) == (2, 0)
    assert ids(after.nodes) == ["node-3", "fresh"]
    assert after.by_dc == {"dc1": 1, "dc2": 1}
    # The old result is untouched (an evaluation still holding it keeps its view).
    assert ids(before.nodes) == ["node-0", "node-1", "node-2", "node-3"]

    again = cache.get(h.store.snapshot(), job)
    assert again is after and cache.hits == 1


def test_a_changed_node_record_is_the_new_one(h: Any, build: Any) -> None:
    h.nodes(2)
    job = build.job("web")
    cache = ReadyNodeCache()
    cache.get(h.store.snapshot(), job)

    h.update_node("node-1", meta={"rack": "r9"})
    ready = cache.get(h.store.snapshot(), job)

    node = next(n for n in ready.nodes if n.id == "node-1")
    assert node.meta == {"rack": "r9"}
    assert node is h.store.node("node-1")


def test_two_stores_with_identical_nodes_never_share_an_entry(build: Any) -> None:
    stores = [StateStore(), StateStore()]
    for store in stores:
        store.commit(UpsertNodes(tuple(build.node(f"node-{i}") for i in range(3))))
    job = build.job("web")
    cache = ReadyNodeCache()

    a = cache.get(stores[0].snapshot(), job)
    b = cache.get(stores[1].snapshot(), job)

    assert (cache.misses, cache.hits) == (2, 0)
    assert a is not b and ids(a.nodes) == ids(b.nodes)
    for store, ready in zip(stores, (a, b), strict=True):
        assert all(n is store.node(n.id) for n in ready.nodes)  # each store's own records
    assert all(x is not y for x, y in zip(a.nodes, b.nodes, strict=True))
    # Both stores' entries are distinct and each keeps hitting its own.
    assert cache.get(stores[1].snapshot(), job) is b
    assert cache.get(stores[0].snapshot(), job) is not b


def test_keys_by_pool_and_datacenters(h: Any, build: Any) -> None:
    h.add_nodes(
        build.node("d1"),
        build.node("d2", datacenter="dc2"),
        build.node("g1", node_pool="gpu"),
        build.node("g2", node_pool="gpu", datacenter="dc2"),
    )
    snap = h.store.snapshot()
    cache = ReadyNodeCache()

    default = cache.get(snap, build.job("a"))
    gpu = cache.get(snap, build.job("b", node_pool="gpu"))
    gpu_dc2 = cache.get(snap, build.job("c", node_pool="gpu", datacenters=("dc2",)))
    every = cache.get(snap, build.job("d", node_pool="all"))
    assert cache.misses == 4 and cache.hits == 0

    assert ids(default.nodes) == ["d1", "d2"]
    assert ids(gpu.nodes) == ["g1", "g2"]
    assert ids(gpu_dc2.nodes) == ["g2"] and gpu_dc2.by_dc == {"dc2": 1}
    assert sorted(ids(every.nodes)) == ["d1", "d2", "g1", "g2"]
    assert every.by_dc == {"dc1": 2, "dc2": 2}

    # "all" and "" are the same key; a second job in the same pool and DCs hits.
    assert cache.get(snap, build.job("e", node_pool="")) is every
    assert cache.get(snap, build.job("f", node_pool="gpu")) is gpu
    assert (cache.misses, cache.hits) == (4, 2)


def test_capacity_evicts_the_least_recently_used(h: Any, build: Any) -> None:
    h.add_nodes(build.node("a", datacenter="a"), build.node("b", datacenter="b"))
    h.add_nodes(build.node("c", datacenter="c"))
    snap = h.store.snapshot()
    cache = ReadyNodeCache(capacity=2)
    job_a, job_b, job_c = (build.job(dc, datacenters=(dc,)) for dc in "abc")

    a = cache.get(snap, job_a)
    cache.get(snap, job_b)
    assert cache.get(snap, job_a) is a  # a is now the most recently used
    cache.get(snap, job_c)  # evicts b
    assert (cache.misses, cache.hits) == (3, 1)

    assert cache.get(snap, job_a) is a
    assert cache.get(snap, job_c).nodes[0].id == "c"
    assert (cache.misses, cache.hits) == (3, 3)
    assert ids(cache.get(snap, job_b).nodes) == ["b"]  # recomputed
    assert cache.misses == 4

    cache.clear()
    cache.get(snap, job_a)
    assert cache.misses == 5


def test_the_live_store_as_reader(h: Any, build: Any) -> None:
    h.nodes(3)
    job = build.job("web")
    cache = ReadyNodeCache()

    first = cache.get(h.store, job)
    assert cache.get(h.store, job) is first
    assert cache.get(h.store.snapshot(), job) is first  # same table content
    assert (cache.misses, cache.hits) == (1, 2)

    # A write with no snapshot in between mutates the live shard dict in place.
    h.update_node("node-0", status=NodeStatus.DOWN)
    h.add_nodes(build.node("node-9"))
    live = cache.get(h.store, job)
    assert ids(live.nodes) == ["node-1", "node-2", "node-9"]
    assert cache.misses == 2
    assert ids(first.nodes) == ["node-0", "node-1", "node-2"]

    # And once more after a snapshot (the write then copies the shard).
    snap = h.store.snapshot()
    assert cache.get(snap, job) is live
    h.update_node("node-1", scheduling_eligibility=NodeEligibility.INELIGIBLE)
    assert ids(cache.get(h.store, job).nodes) == ["node-2", "node-9"]
    assert cache.misses == 3


def test_the_process_wide_cache_is_a_ready_node_cache() -> None:
    assert isinstance(READY_NODES, ReadyNodeCache)
    assert READY_NODES.capacity >= 1


# -- nodes_version ----------------------------------------------------------------------------


def test_nodes_version_tracks_the_nodes_table(h: Any, build: Any) -> None:
    h.nodes(3)
    s1, s2 = h.store.snapshot(), h.store.snapshot()
    assert same_version(s1.nodes_version(), s2.nodes_version())
    assert same_version(s1.nodes_version(), h.store.nodes_version())
    assert s1.nodes_version()[0] == h.store.table_index("nodes")

    # Other tables moving leaves it alone.
    job, _ = h.register(build.job("web"))
    h.add_allocs(build.alloc(job, "node-0", 0))
    s3 = h.store.snapshot()
    assert s3.latest_index() > s1.latest_index()
    assert same_version(s1.nodes_version(), s3.nodes_version())

    old = s1.node("node-1")
    h.update_node("node-1", meta={"changed": "yes"})
    s4 = h.store.snapshot()
    assert not same_version(s1.nodes_version(), s4.nodes_version())
    assert not same_version(s1.nodes_version(), h.store.nodes_version())
    assert same_version(s4.nodes_version(), h.store.nodes_version())
    # The older snapshots still read the old nodes, and still agree with each other.
    assert s1.node("node-1") is old and old is not None and old.meta == {}
    assert s2.node("node-1") is old
    assert same_version(s1.nodes_version(), s2.nodes_version())
    node = s4.node("node-1")
    assert node is not None and node.meta == {"changed": "yes"}


def test_nodes_version_differs_between_stores_and_shard_counts(build: Any) -> None:
    a, b = StateStore(), StateStore()
    for store in (a, b):
        store.commit(UpsertNodes((build.node("n"),)))
    assert a.nodes_version()[0] == b.nodes_version()[0]
    assert not same_version(a.snapshot().nodes_version(), b.snapshot().nodes_version())

    sharded = StateStore(node_shards=4)
    sharded.commit(UpsertNodes(tuple(build.node(f"n{i}") for i in range(8))))
    version = sharded.snapshot().nodes_version()
    assert len(version) == 5  # the index and four shard dicts
    assert same_version(version, sharded.snapshot().nodes_version())
    assert not same_version(version, a.nodes_version())  # lengths differ
    sharded.commit(UpsertAllocs(()))
    assert same_version(version, sharded.snapshot().nodes_version())
    sharded.commit(UpsertNodes((build.node("n0", cpu=1),)))
    assert not same_version(version, sharded.snapshot().nodes_version())


def test_same_version_compares_the_index_by_value_and_shards_by_identity() -> None:
    shard: dict[str, int] = {}
    assert same_version((3, shard), (3, shard))
    assert not same_version((3, shard), (4, shard))
    assert not same_version((3, shard), (3, {}))  # equal but not the same dict
    assert not same_version((3, shard), (3, shard, shard))
