"""Process-wide settings that every drover process applies at start (actor shells, the
agent, benchmarks).

Garbage collection: the state store holds up to millions of long-lived, immutable records
that form no reference cycles and are freed by reference counting. With CPython's default
thresholds (700, 10, 10) the cyclic collector runs a full pass over all of them every
~70,000 allocations, which cost about 40% of scheduling throughput in `bench.core`. Raising
the thresholds keeps cycle collection (for the rare cycles) at a fraction of that cost.
"""

from __future__ import annotations

import gc

GC_THRESHOLDS = (50_000, 20, 20)


def tune_gc() -> None:
    gc.set_threshold(*GC_THRESHOLDS)


def freeze_loaded_state() -> None:
    """After loading a large state (a leader or replica restart), move everything alive into
    the permanent generation so later collections never walk it."""
    gc.collect()
    gc.freeze()
