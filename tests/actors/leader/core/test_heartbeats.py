"""HeartbeatTracker: Nomad's per-node heartbeat TTLs on one heap."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.leader.core.heartbeats import HeartbeatTracker, rate_scaled_ttl


def test_expires_after_ttl_plus_grace_once() -> None:
    hb = HeartbeatTracker(ttl_s=10.0, grace_s=5.0)
    hb.beat("n1", 100.0)
    assert "n1" in hb and len(hb) == 1 and hb.deadline("n1") == 115.0
    assert hb.expired(115.0) == []  # exactly ttl + grace old: not yet
    assert hb.expired(115.001) == ["n1"]
    assert hb.expired(200.0) == []  # reported once
    assert "n1" not in hb and hb.deadline("n1") is None
    hb.beat("n1", 300.0)  # it came back
    assert hb.expired(310.5) == []
    assert hb.expired(316.0) == ["n1"]


def test_beats_push_the_deadline() -> None:
    hb = HeartbeatTracker(ttl_s=10.0)
    hb.beat("n1", 0.0)
    hb.beat("n1", 8.0)
    assert hb.expired(12.0) == []
    assert hb.expired(18.5) == ["n1"]


def test_forget_and_order() -> None:
    hb = HeartbeatTracker(ttl_s=1.0)
    hb.beat("late", 5.0)
    hb.beat("early", 1.0)
    hb.beat("gone", 0.0)
    hb.forget("gone")
    hb.forget("never-seen")
    assert hb.expired(100.0) == ["early", "late"]


def test_frequent_beats_do_not_grow_the_heap() -> None:
    hb = HeartbeatTracker(ttl_s=10.0)
    for t in range(10_000):
        hb.beat(f"n{t % 10}", float(t))
    assert len(hb._heap) <= 2 * len(hb) + 65


def test_invalid_settings() -> None:
    with pytest.raises(ValueError):
        HeartbeatTracker(ttl_s=0.0)
    with pytest.raises(ValueError):
        HeartbeatTracker(ttl_s=1.0, grace_s=-1.0)


def test_rate_scaled_ttl() -> None:
    assert rate_scaled_ttl(10) == 10.0
    assert rate_scaled_ttl(5000) == 100.0
    assert rate_scaled_ttl(100, min_ttl_s=1.0, max_per_second=10.0) == 10.0


events = st.lists(
    st.tuples(
        st.sampled_from(["beat", "forget", "expired"]),
        st.sampled_from(["a", "b", "c", "d"]),
        st.floats(min_value=0.0, max_value=5.0),
    ),
    max_size=60,
)


@given(events)
def test_matches_a_naive_scan(ops: list[tuple[str, str, float]]) -> None:
    hb = HeartbeatTracker(ttl_s=2.0, grace_s=0.5)
    last: dict[str, float] = {}
    now = 0.0
    for op, node, step in ops:
        now += step
        if op == "beat":
            hb.beat(node, now)
            last[node] = now
        elif op == "forget":
            hb.forget(node)
            last.pop(node, None)
        else:
            want = sorted((t, n) for n, t in last.items() if t + 2.0 + 0.5 < now)
            got = hb.expired(now)
            assert sorted(got) == sorted(n for _, n in want)
            for n in got:
                del last[n]


def test_overdue_nodes_are_reported_again_unless_they_beat() -> None:
    """A node whose down-marking failed to commit is reported by the next `expired`."""
    hb = HeartbeatTracker(ttl_s=1.0)
    hb.beat("a", 0.0)
    hb.beat("b", 0.0)
    assert hb.expired(5.0) == ["a", "b"]
    hb.overdue(["a", "b"], 5.0)
    assert "a" in hb and hb.deadline("a") == 5.0
    hb.beat("b", 5.5)  # b came back before the retry
    assert hb.expired(5.6) == ["a"]
    assert hb.expired(5.7) == []
    hb.beat("c", 0.0)
    hb.overdue(["c"], 0.5)  # already tracked: its own deadline stands
    assert hb.deadline("c") == 1.0
