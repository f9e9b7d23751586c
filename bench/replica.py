"""What a read replica pays per allocation: `python -m bench.replica`.

Every worker, the broker and each agent follow the leader's state log, so the cost of decoding
and applying an entry is paid once per follower for every allocation placed: with two workers
it is the largest cost the actor pipeline adds to the scheduler's own. This bench records the
log of `bench.core`'s workload (each plan's UpsertAllocs followed by the agents' "running"
reports for its allocations, as the running system writes them), encodes it as the leader
does, and replays it into a fresh store the way a worker does (decode, apply, take a snapshot
per entry). Prints one JSON line with microseconds per allocation for decoding and applying,
into the eager store (the leader's, the API's) and into the job-scoped one workers use
(applied as the log arrives, plus the settle: the records it builds and files later, when a
job is read or while idle; `job_scoped_total_us_per_alloc` counts all three). Every figure is
the median of `--repeat` replays into each store.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import orjson

from actors.process_settings import after_state_applied, paced_heap, tune_process
from actors.state import StateStore
from actors.state.job_scoped import JobScopedStore
from bench.core import register_workload, schedule_all
from contracts import ClientStatus
from contracts.codec import fast_path_fallbacks
from contracts.state_log import (
    AllocClientUpdate,
    LogEntry,
    UpdateAllocsClientStatus,
    UpdateClientStatusRows,
    UpsertAllocRows,
    UpsertAllocs,
    decode_entry,
    encode_entry,
)


class RecordingStore(StateStore):
    """A store that keeps every entry it applies (the log a leader would have written), and
    follows each committed plan with `reports` rounds of the agents' "running" reports for
    the allocations it placed (the first is the start; later ones stand for the restarts and
    health updates a live cluster's log is mostly made of)."""

    def __init__(self, reports: int = 1) -> None:
        super().__init__()
        self.entries: list[LogEntry] = []
        self.reports = reports

    def apply(self, entry: LogEntry) -> None:
        super().apply(entry)
        self.entries.append(entry)

    def commit(self, change: Any, term: int = 0) -> int:
        index = super().commit(change, term)
        if isinstance(change, UpsertAllocs) and change.allocs:
            placed = [a for a in change.allocs if a.client_status is ClientStatus.PENDING]
            for n in range(self.reports):
                description = f"report {n}" if n else ""
                running = tuple(
                    AllocClientUpdate(a.id, ClientStatus.RUNNING, description, 1, a.node_id)
                    for a in placed
                )
                index = super().commit(UpdateAllocsClientStatus(running), term)
        return index


def record_log(nodes: int, jobs: int, count: int, seed: int = 7) -> list[bytes]:
    store = RecordingStore()
    schedule_all(store, register_workload(store, nodes, jobs, count, seed))
    return [encode_entry(entry) for entry in store.entries]


def replay(raw_entries: list[bytes], store: StateStore | None = None) -> dict[str, float]:
    store = store if store is not None else StateStore()
    scoped = isinstance(store, JobScopedStore)
    decode_s = apply_s = 0.0
    allocs = updates = 0
    clock = time.perf_counter
    for raw in raw_entries:
        t0 = clock()
        entry = decode_entry(raw, compact=scoped)  # as workers read it
        t1 = clock()
        store.apply(entry)
        after_state_applied()  # as LogReplica does (see process_settings.HeapPacer)
        # A worker schedules on a fresh snapshot: writes after it copy.
        if scoped:
            assert isinstance(store, JobScopedStore)
            store.snapshot_for_job("default", "bench-none")
        else:
            store.snapshot()
        t2 = clock()
        decode_s += t1 - t0
        apply_s += t2 - t1
        change = entry.change
        if isinstance(change, UpsertAllocs):
            allocs += len(change.allocs)
        elif isinstance(change, UpsertAllocRows):
            allocs += sum(len(g.rows) for g in change.groups)
        elif isinstance(change, UpdateAllocsClientStatus):
            updates += len(change.updates)
        elif isinstance(change, UpdateClientStatusRows):
            updates += sum(len(g.rows) for g in change.groups)
    settle_s = 0.0
    if scoped:
        assert isinstance(store, JobScopedStore)
        t0 = clock()
        store.settle_all()  # what the worker files later, per job or while idle
        settle_s = clock() - t0
    return {
        "allocs": allocs,
        "client_updates": updates,
        "decode_s": decode_s,
        "apply_s": apply_s,
        "settle_s": settle_s,
    }


def run(nodes: int, jobs: int, count: int, repeat: int) -> dict[str, Any]:
    tune_process()
    raw = record_log(nodes, jobs, count)
    fallbacks_before = sum(fast_path_fallbacks().values())
    # Replayed under the actors' heap policy: applied records are frozen out of the
    # collector after each entry, as in every follower once its state is loaded. The two
    # stores alternate so that drift on a busy machine hits both.
    eager: list[dict[str, float]] = []
    scoped: list[dict[str, float]] = []
    with paced_heap():
        for _ in range(max(1, repeat)):
            eager.append(replay(raw))
            scoped.append(replay(raw, JobScopedStore()))
    fallbacks = sum(fast_path_fallbacks().values()) - fallbacks_before
    allocs = eager[0]["allocs"]
    per_alloc = 1e6 / allocs

    def us(runs: list[dict[str, float]], *parts: str) -> list[float]:
        """Each run's microseconds per allocation for the sum of `parts`."""
        return [round(sum(r[p] for p in parts) * per_alloc, 2) for r in runs]

    def median(runs: list[dict[str, float]], *parts: str) -> float:
        return round(statistics.median(us(runs, *parts)), 2)

    return {
        "bench": "replica",
        "nodes": nodes,
        "jobs": jobs,
        "count": count,
        "entries": len(raw),
        "log_bytes": sum(len(r) for r in raw),
        "allocs": allocs,
        "client_updates": eager[0]["client_updates"],
        # Medians over the repeats; a total is the median of the runs' totals.
        "decode_us_per_alloc": median(eager, "decode_s"),
        "apply_us_per_alloc": median(eager, "apply_s"),
        "total_us_per_alloc": median(eager, "decode_s", "apply_s"),
        "runs_total_us_per_alloc": us(eager, "decode_s", "apply_s"),
        # A worker's JobScopedStore, reading the log compact: decoded and applied as the
        # log arrives, and settled later (records built when a job is read, or while idle).
        # The settle is part of what the follower pays, so its total includes it.
        "job_scoped_decode_us_per_alloc": median(scoped, "decode_s"),
        "job_scoped_apply_us_per_alloc": median(scoped, "apply_s"),
        "job_scoped_settle_us_per_alloc": median(scoped, "settle_s"),
        "job_scoped_total_us_per_alloc": median(scoped, "decode_s", "apply_s", "settle_s"),
        "job_scoped_runs_total_us_per_alloc": us(scoped, "decode_s", "apply_s", "settle_s"),
        # Decodes the generated fast path handed to the validating one: 0 for our own log.
        "fast_decode_fallbacks": fallbacks,
        "repeat": max(1, repeat),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument(
        "--repeat", type=int, default=3, help="replays into each store; medians are reported"
    )
    args = parser.parse_args(argv)
    print(orjson.dumps(run(args.nodes, args.jobs, args.count, args.repeat)).decode())


if __name__ == "__main__":
    main()
