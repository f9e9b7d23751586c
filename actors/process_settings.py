"""Process-wide settings that every drover process applies at start (actor shells, the
agent, benchmarks), and the garbage-collection policy for the records they keep.

The state store holds up to millions of long-lived, immutable records that form no reference
cycles and are freed by reference counting. CPython's cyclic collector walks every tracked
object at least twice (young, then middle generation) and the whole heap again every time it
grows by a quarter; for a store that grows by a record per placement, that was about 40% of
scheduling throughput in `bench.core` with the default thresholds, and still ~5% of every
actor's CPU (and a cache flush per collection) with raised ones.

So in an actor process (`pace_heap()`, called by the actor shells once their service has
loaded its state) records are kept away from the collector altogether: after a batch of state
is applied, `after_state_applied()` moves the young generation (by then mostly the batch's
records) into the permanent generation with `gc.freeze()`, an O(1) list splice. The collector
never walks frozen objects, which is only safe if they hold no garbage cycles: the scheduling
core and the store create none (tests/actors/test_process_settings.py checks that). Whatever
cycles other code left in a frozen batch are collected by a sweep (unfreeze, full collection,
freeze). A sweep walks the whole heap, so it waits for an idle turn (`when_idle()`, with no
state applied for QUIET_S) once a quarter as many objects as the last sweep left have been
frozen since (CPython's own rule for full collections); an actor that never idles sweeps
anyway at seven times that. Memory held by leaked cycles stays bounded, and a busy actor's
sweeps cost O(1) amortised per object.

A sweep is a stall: the process does nothing else until it ends, and an idle turn can be the
last before a burst. drover's own actors leak no cycles (in bench.stream seven sweeps of
1.0-1.5 M objects collected none, at 0.8-1.7 s of CPU and up to 3.9 s of wall time each), so
a sweep that finds next to nothing (under SWEEP_WORTH of what it kept) spaces the next one
out: it waits for SWEEP_BACKOFF times the growth, up to MAX_SWEEP_SPACING times; a sweep that
finds garbage brings back the pace above. A process that leaks is swept as before; one that
does not sweeps a few times over its life instead of at every quarter's growth.
"""

from __future__ import annotations

import gc
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

log = logging.getLogger(__name__)

GC_THRESHOLDS = (50_000, 20, 20)
# Every actor has threads that wait on Redis (a log follower, a reply reader, the HTTP
# server's) beside one that computes. A thread woken by its socket waits for the running
# one to give up the GIL, up to the switch interval: CPython's 5 ms made each hop between
# processes cost milliseconds whenever its receiver was busy (an API serving requests while
# its follower applies the entry that answers them). 0.5 ms: idle register-to-visible p50
# went from 7-88 ms to 5-7 ms with a client polling the API, with no loss of throughput
# in bench.stream's A/B pair (see the README's performance notes).
SWITCH_INTERVAL_S = 0.0005
# Young objects that make `after_state_applied` freeze them: below the first threshold, so
# that the collector does not get to walk a batch of records before they are frozen.
FREEZE_YOUNG = 20_000
# Sweeps: once the objects frozen since the last sweep outnumber what it left (never counted
# as less than SWEEP_FLOOR: a fresh process's heap is small) by these factors: when idle, a
# quarter (CPython's own rule for full collections); in any case, sevenfold.
IDLE_SWEEP_GROWTH = 0.25
BUSY_SWEEP_GROWTH = 7.0
SWEEP_FLOOR = 250_000
# Idle means no state applied for this long (a loop's idle turn alone can fall between two
# evaluations of a busy run, and a run of small batches may freeze nothing for a while).
QUIET_S = 1.0
# Garbage under this share of what a sweep kept does not pay for the walk: the next sweep
# waits for SWEEP_BACKOFF times the growth (compounding, up to MAX_SWEEP_SPACING).
SWEEP_WORTH = 0.01
SWEEP_BACKOFF = 4
MAX_SWEEP_SPACING = 256
# A sweep this long is logged as a warning: the process did nothing else meanwhile.
SLOW_SWEEP_S = 0.25


class HeapPacer:
    """Freezes applied records and sweeps the frozen heap as it grows (see module doc)."""

    def __init__(
        self,
        freeze_young: int = FREEZE_YOUNG,
        *,
        idle_growth: float = IDLE_SWEEP_GROWTH,
        busy_growth: float = BUSY_SWEEP_GROWTH,
        floor: int = SWEEP_FLOOR,
        backoff: int = SWEEP_BACKOFF,
        quiet_s: float = QUIET_S,
        clock: Callable[[], float] = time.monotonic,
        enabled: bool = True,
    ) -> None:
        self.enabled = enabled
        self.quiet_s = quiet_s
        self.clock = clock
        self.last_freeze = float("-inf")
        # Idle turns come between the evaluations of a steady stream of small jobs too; a
        # sweep (a walk of the whole heap) waits until no state was applied for `quiet_s`.
        self.last_applied = float("-inf")
        self.freeze_young = freeze_young
        self.idle_growth = idle_growth
        self.busy_growth = busy_growth
        self.floor = floor
        self.backoff = backoff
        self.spacing = 1  # the growth the next sweep waits for, in multiples of the above
        self.swept_size = 0  # frozen objects right after the last sweep
        # Young objects frozen since (some freed by now: counting the frozen heap instead,
        # gc.get_freeze_count, would walk all of it).
        self.frozen_since_sweep = 0
        self.freezes = 0
        self.sweeps = 0
        self.sweep_s = 0.0  # in all
        self.last_sweep_s = 0.0

    def after_state_applied(self) -> None:
        """Call after applying a batch of state changes (a log read, a committed plan)."""
        if not self.enabled:
            return
        self.last_applied = now = self.clock()
        young = gc.get_count()[0]
        if young < self.freeze_young:
            return
        self.frozen_since_sweep += young
        gc.freeze()
        self.freezes += 1
        self.last_freeze = now
        if self._grown(self.busy_growth):
            self.sweep()

    def when_idle(self) -> bool:
        """Call on the actor's idle turns: sweeps if no state was applied for `quiet_s` and
        the frozen heap has grown enough since the last sweep. True if it swept."""
        if not self.enabled or self.clock() - self.last_applied < self.quiet_s:
            return False
        if not self._grown(self.idle_growth):
            return False
        self.sweep()
        return True

    def _grown(self, factor: float) -> bool:
        return self.frozen_since_sweep > factor * self.spacing * max(self.swept_size, self.floor)

    def sweep(self) -> int:
        """Collect everything, frozen objects included, then freeze what survived (at start,
        after loading state, and as the frozen heap grows). Returns the objects collected."""
        started, cpu = time.perf_counter(), time.thread_time()
        gc.unfreeze()
        collected = gc.collect()
        gc.freeze()
        self.swept_size = gc.get_freeze_count()
        self.frozen_since_sweep = 0
        if collected < SWEEP_WORTH * self.swept_size:
            self.spacing = min(self.spacing * self.backoff, MAX_SWEEP_SPACING)
        else:
            self.spacing = 1
        self.sweeps += 1
        self.last_sweep_s = time.perf_counter() - started
        self.sweep_s += self.last_sweep_s
        log.log(
            logging.WARNING if self.last_sweep_s >= SLOW_SWEEP_S else logging.DEBUG,
            "heap sweep %d: %d objects kept, %d collected, %.3f s (%.3f s CPU); next at %dx",
            self.sweeps,
            self.swept_size,
            collected,
            self.last_sweep_s,
            time.thread_time() - cpu,
            self.spacing,
        )
        return collected


# Off until `pace_heap()`: services also run inside test processes, whose garbage (mocks,
# fixtures) is not the store's and should not wait for a sweep.
HEAP = HeapPacer(enabled=False)


def tune_process() -> None:
    """The collector's thresholds (above) and the interpreter's thread switch interval."""
    gc.set_threshold(*GC_THRESHOLDS)
    sys.setswitchinterval(switch_interval_s(os.environ))


def switch_interval_s(env: Mapping[str, str]) -> float:
    """SWITCH_INTERVAL_S, or DROVER_SWITCH_INTERVAL_US (for A/B runs)."""
    raw = env.get("DROVER_SWITCH_INTERVAL_US", "")
    try:
        return int(raw) / 1e6 if raw else SWITCH_INTERVAL_S
    except ValueError:
        raise ValueError(
            f"DROVER_SWITCH_INTERVAL_US: not a number of microseconds: {raw!r}"
        ) from None


def pace_heap() -> None:
    """Turn on this process's `HEAP` once its state is loaded: a sweep now freezes that
    state, so that later sweeps are paced by its size."""
    HEAP.enabled = True
    HEAP.sweep()


@contextmanager
def paced_heap() -> Iterator[HeapPacer]:
    """`pace_heap()` for a while (benchmarks in a process that goes on): afterwards the
    process is back to plain collection, its frozen objects included."""
    was_enabled = HEAP.enabled
    pace_heap()
    try:
        yield HEAP
    finally:
        HEAP.enabled = was_enabled
        if not was_enabled:
            gc.unfreeze()


def after_state_applied() -> None:
    """This process's `HeapPacer.after_state_applied` (a no-op until `pace_heap()`)."""
    HEAP.after_state_applied()


def when_idle() -> bool:
    """This process's `HeapPacer.when_idle` (a no-op until `pace_heap()`)."""
    return HEAP.when_idle()


def lower_thread_priority(niceness: int) -> bool:
    """Run the calling thread at nice `niceness` if that is a lower priority than it has.
    Linux keeps a nice value per thread (and a thread it starts inherits it), so this
    touches no other thread. Never raises the priority (an unprivileged process may not);
    quietly does nothing elsewhere than Linux. True if the thread's nice value changed."""
    if sys.platform != "linux":
        return False
    tid = threading.get_native_id()
    try:
        if os.getpriority(os.PRIO_PROCESS, tid) >= niceness:
            return False
        os.setpriority(os.PRIO_PROCESS, tid, niceness)
    except OSError:
        return False
    return True
