"""The heap pacer freezes applied records and sweeps leaked cycles; and freezing is only
cheap because the store and the scheduling core make no reference cycles, checked here."""

from __future__ import annotations

import gc
import os
import sys
import threading
import weakref
from collections.abc import Iterator

import pytest

from actors.process_settings import (
    HEAP,
    MAX_SWEEP_SPACING,
    SWITCH_INTERVAL_S,
    HeapPacer,
    lower_thread_priority,
    paced_heap,
    switch_interval_s,
)
from actors.state import StateStore
from actors.state.job_scoped import JobScopedStore
from bench.core import register_workload, schedule_all
from bench.replica import record_log
from contracts.state_log import decode_entry


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Node:
    """Weak-referenceable and tracked by the collector."""

    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture(autouse=True)
def _restore_gc() -> Iterator[None]:
    gc.collect()
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.enable()
    gc.set_threshold(*thresholds)
    gc.set_debug(0)


def _young(n: int) -> list[list[int]]:
    """`n` tracked objects kept alive (and no collection on the way)."""
    return [[i] for i in range(n)]


def _cycle() -> weakref.ref[Node]:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_disabled_pacer_leaves_the_heap_alone() -> None:
    pacer = HeapPacer(freeze_young=100, enabled=False)
    kept = _young(1_000)
    before = gc.get_freeze_count()
    pacer.after_state_applied()
    assert gc.get_freeze_count() == before
    assert pacer.freezes == 0 and len(kept) == 1_000


def test_young_objects_are_frozen_once_there_are_enough() -> None:
    gc.disable()  # no collection between allocating and freezing
    pacer = HeapPacer(freeze_young=5_000, floor=10**9)
    few = _young(1_000)
    pacer.after_state_applied()
    assert pacer.freezes == 0
    many = _young(10_000)
    before = gc.get_freeze_count()
    pacer.after_state_applied()
    assert pacer.freezes == 1
    assert gc.get_freeze_count() >= before + 11_000
    assert gc.get_count()[0] == 0
    assert pacer.sweeps == 0  # far below the floor
    assert len(few) + len(many) == 11_000


def test_a_frozen_cycle_survives_collections_until_a_sweep() -> None:
    gc.disable()
    pacer = HeapPacer(freeze_young=1, floor=10**9)
    ref = _cycle()
    pacer.after_state_applied()
    gc.collect()
    assert ref() is not None  # frozen: the collector does not see it
    assert pacer.sweep() >= 2
    assert ref() is None
    assert pacer.swept_size > 0 and pacer.frozen_since_sweep == 0


def test_idle_sweep_waits_for_quiet_and_for_growth() -> None:
    gc.disable()
    clock = Clock()
    pacer = HeapPacer(
        freeze_young=100, floor=1_000, idle_growth=0.25, backoff=1, quiet_s=1.0, clock=clock
    )
    pacer.sweep()
    pacer.swept_size = 1_000  # pretend the heap is tiny, for round numbers
    ref = _cycle()
    kept = _young(200)
    pacer.after_state_applied()  # 200+ frozen: under a quarter of 1,000
    clock.now += 5
    assert not pacer.when_idle()
    kept += _young(300)
    pacer.after_state_applied()  # 500+ frozen since the sweep: enough
    assert not pacer.when_idle()  # but it just froze: not quiet yet
    clock.now += 0.5
    assert not pacer.when_idle()
    clock.now += 0.6
    assert pacer.when_idle()
    assert ref() is None and pacer.frozen_since_sweep == 0
    assert len(kept) == 500


def test_small_batches_that_freeze_nothing_still_keep_the_sweep_off() -> None:
    """A steady stream of small jobs applies a batch every few milliseconds, each too small
    to freeze: the loop's idle turns between them are not idle time, so no sweep (a walk of
    the whole heap) runs until the batches stop for `quiet_s`."""
    gc.disable()
    clock = Clock()
    pacer = HeapPacer(
        freeze_young=100, floor=1_000, idle_growth=0.25, backoff=1, quiet_s=1.0, clock=clock
    )
    pacer.sweep()
    pacer.swept_size = 1_000
    kept = _young(500)
    pacer.after_state_applied()  # frozen, and enough growth for an idle sweep
    for _ in range(30):  # 3 s of batches, 0.1 s apart, none big enough to freeze
        clock.now += 0.1
        gc.collect(0)  # keep the young generation under the freeze threshold
        pacer.after_state_applied()
        assert not pacer.when_idle()
    assert pacer.sweeps == 1
    clock.now += 1.1
    assert pacer.when_idle() and pacer.sweeps == 2
    assert len(kept) == 500


def test_a_busy_process_sweeps_at_the_busy_growth() -> None:
    gc.disable()
    pacer = HeapPacer(freeze_young=100, floor=1_000, busy_growth=2.0, backoff=1)
    pacer.sweep()
    pacer.swept_size = 1_000
    ref = _cycle()
    kept = _young(1_500)
    pacer.after_state_applied()  # 1,500 frozen since: under 2 x 1,000
    assert pacer.sweeps == 1 and ref() is not None
    kept += _young(600)
    pacer.after_state_applied()  # 2,100: over, and no idle turn needed
    assert pacer.sweeps == 2 and ref() is None
    assert len(kept) == 2_100


def test_a_sweep_that_finds_nothing_spaces_the_next_one_out() -> None:
    gc.disable()
    pacer = HeapPacer(freeze_young=100, floor=1_000, busy_growth=2.0, backoff=4)
    assert pacer.sweep() < 10 and pacer.spacing == 4  # the fixture collected everything
    pacer.swept_size = 1_000
    kept = _young(2_500)
    pacer.after_state_applied()  # over 2 x 1,000, but not over 4 x 2 x 1,000
    assert pacer.sweeps == 1
    kept += _young(6_000)
    pacer.after_state_applied()  # 8,500 frozen since: over 8,000
    assert pacer.sweeps == 2 and pacer.spacing == 16  # nothing found again
    assert len(kept) == 8_500


def test_a_sweep_that_finds_garbage_brings_the_pace_back() -> None:
    gc.disable()
    pacer = HeapPacer(freeze_young=100, floor=1_000, backoff=4)
    pacer.sweep()
    pacer.sweep()
    assert pacer.spacing == 16
    # Cycles leaked into the frozen heap: more than 1% of what the next sweep keeps.
    refs = [_cycle() for _ in range(gc.get_freeze_count() // 50)]
    pacer.after_state_applied()
    collected = pacer.sweep()
    assert collected >= 2 * len(refs) and all(ref() is None for ref in refs)
    assert pacer.spacing == 1


def test_sweeps_never_space_out_past_the_limit() -> None:
    gc.disable()
    pacer = HeapPacer(freeze_young=100, floor=1_000, backoff=4)
    for _ in range(10):
        pacer.sweep()
    assert pacer.spacing == MAX_SWEEP_SPACING


def test_paced_heap_turns_pacing_off_and_unfreezes_afterwards() -> None:
    assert not HEAP.enabled
    with paced_heap() as pacer:
        assert pacer is HEAP and HEAP.enabled
        assert gc.get_freeze_count() > 0
    assert not HEAP.enabled
    assert gc.get_freeze_count() == 0


def _garbage_cycles_made_by(work: object) -> list[object]:
    """Objects in garbage cycles left by calling `work` (the collector off meanwhile)."""
    assert callable(work)
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        work()
        gc.collect()
        return list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def test_scheduling_and_committing_make_no_reference_cycles() -> None:
    store = StateStore()
    evals = register_workload(store, nodes=200, jobs=6, count=40)
    assert _garbage_cycles_made_by(lambda: schedule_all(store, evals)) == []
    assert sum(1 for _ in store.allocs()) == 6 * 40


def test_following_the_log_makes_no_reference_cycles() -> None:
    raw = record_log(nodes=200, jobs=6, count=40)
    eager, scoped = StateStore(), JobScopedStore()

    def follow() -> None:
        for data in raw:
            entry = decode_entry(data)
            eager.apply(entry)
            scoped.apply(entry)
        scoped.settle_all()

    assert _garbage_cycles_made_by(follow) == []
    assert eager.alloc_count() == scoped.alloc_count() == 6 * 40


def test_the_switch_interval_is_half_a_millisecond_unless_the_environment_says() -> None:
    assert switch_interval_s({}) == SWITCH_INTERVAL_S == 0.0005
    assert switch_interval_s({"DROVER_SWITCH_INTERVAL_US": "5000"}) == 0.005
    with pytest.raises(ValueError, match=r"DROVER_SWITCH_INTERVAL_US.*'fast'"):
        switch_interval_s({"DROVER_SWITCH_INTERVAL_US": "fast"})


@pytest.mark.skipif(sys.platform != "linux", reason="a nice value per thread is Linux's")
def test_a_thread_lowers_its_own_priority_only_and_never_raises_it() -> None:
    seen: dict[str, tuple[bool, int]] = {}
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    def lower(name: str, niceness: int) -> None:
        changed = lower_thread_priority(niceness)
        seen[name] = (changed, os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))

    def lower_then_ask_for_more() -> None:
        lower("lowered", min(19, mine + 2))
        lower("raised", mine)  # back up: refused, whatever the process may do

    thread = threading.Thread(target=lower_then_ask_for_more)
    thread.start()
    thread.join()
    lowered = min(19, mine + 2)  # 19 is the lowest priority there is
    assert seen["lowered"] == (lowered > mine, lowered)
    assert seen["raised"] == (False, lowered)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == mine  # not this one
