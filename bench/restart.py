"""Restart time and Redis memory with snapshots and a bounded log: `python -m bench.restart`.

A log of `--jobs` x `--count` single-task allocations placed by drover's scheduler on
`--nodes` nodes is recorded in-process (the core alone: nodes, jobs with their evaluations,
one plan per job, then `--reports` client reports per allocation, as agents send them) and
committed to an embedded Redis (AOF on) through the leader's durable log, in batches, as a
leader commits it. Then, on that Redis:

1. a leader starts on the whole log, with no snapshot (`replay_restart_seconds`: the start
   before snapshots existed), and writes a snapshot, trimming the log before a tail of
   `--keep-tail` entries (`snapshot_write_seconds`, `snapshot_bytes`, `snapshot_chunks`);
2. that leader stops and a new one starts from the snapshot and the tail, and answers a
   job registration (`restart_seconds`: from its construction to that answer);
3. a scheduler worker's replica (job-scoped store, compact reads) loads from scratch
   (`follower_load_seconds`).

`redis_used_memory_bytes` is Redis's `used_memory` at the end, against
`redis_used_memory_before_bytes` with the whole log and no snapshot; `log_entries` is the
stream's length after the trim. One JSON line.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from actors.leader.durable_log import DurableLog
from actors.leader.service import LeaderService
from actors.leader.snapshots import SnapshotPolicy
from actors.process_settings import tune_process
from actors.runtime.replica import LogReplica
from actors.state.job_scoped import JobScopedStore
from actors.streams.client import connect
from actors.streams.names import StreamNames
from bench.core import make_nodes, schedule_all
from bench.replica import RecordingStore
from contracts import (
    Evaluation,
    Job,
    NodeResources,
    Resources,
    Task,
    TaskGroup,
    TriggeredBy,
)
from contracts.messages import LeaderRequest, RequestKind
from contracts.state_log import (
    LogEntry,
    UpsertJob,
    UpsertNodes,
    decode_entry,
)
from launch.redis_server import EmbeddedRedis

NAMES = StreamNames("restart")
COMMIT_BATCH = 64  # entries per commit.lua call while the log is written


def _job(i: int, count: int) -> Job:
    task = Task(name="srv", driver="mock", resources=Resources(cpu=10, memory_mb=16))
    return Job(
        id=f"restart-{i:05d}",
        name=f"restart-{i:05d}",
        datacenters=("dc1", "dc2", "dc3"),  # every node of bench.core's fleet
        task_groups=(TaskGroup("app", count, tasks=(task,)),),
    )


def record(nodes: int, jobs: int, count: int, reports: int) -> list[LogEntry]:
    store = RecordingStore(reports)
    resources = NodeResources(cpu=40_000, memory_mb=65_536, disk_mb=1_000_000)
    fleet = [replace(n, node_resources=resources) for n in make_nodes(nodes, seed=7)]
    store.commit(UpsertNodes(tuple(fleet)))
    eval_ids = []
    for i in range(jobs):
        job = _job(i, count)
        ev = Evaluation(
            id=f"eval-{i:08d}",
            job_id=job.id,
            type="service",
            priority=job.priority,
            triggered_by=TriggeredBy.JOB_REGISTER,
        )
        store.commit(UpsertJob(job, (ev,)))
        eval_ids.append(ev.id)
    schedule_all(store, eval_ids)
    return store.entries


def write_log(client: Any, entries: list[LogEntry]) -> None:
    durable = DurableLog(client, NAMES)
    durable.acquire_term()
    for start in range(0, len(entries), COMMIT_BATCH):
        batch = entries[start : start + COMMIT_BATCH]
        outcome = durable.commit(batch[0].index - 1, batch, [None] * len(batch))
        if not outcome.ok:
            raise RuntimeError(f"writing the log failed at {batch[0].index}: {outcome.reason}")


def _served_in(client: Any, policy: SnapshotPolicy) -> tuple[LeaderService, float]:
    """A new leader on the log: seconds from its construction until it answered a job
    registration (it reads nothing from its stream here: the answer comes through handle)."""
    started = time.perf_counter()
    leader = LeaderService(client, NAMES, snapshot_policy=policy)
    leader.start()
    job = _job(10**6, 1)
    request = LeaderRequest(RequestKind.REGISTER_JOB, request_id=f"probe-{time.time_ns()}", job=job)
    response = leader.handle(request)
    if not response.ok:
        raise RuntimeError(f"the restarted leader refused a registration: {response.error}")
    return leader, time.perf_counter() - started


def _used_memory(client: Any) -> int:
    return int(client.info("memory")["used_memory"])


def run(nodes: int, jobs: int, count: int, keep_tail: int, reports: int = 1) -> dict[str, Any]:
    tune_process()
    t0 = time.perf_counter()
    entries = record(nodes, jobs, count, reports)
    record_s = time.perf_counter() - t0
    allocations = sum(len(getattr(e.change, "allocs", ())) for e in entries)
    # Never snapshots on its own: the benchmark writes one when it chooses.
    policy = SnapshotPolicy(every_entries=10**12, every_bytes=2**62, keep_tail=keep_tail)
    with (
        tempfile.TemporaryDirectory(prefix="drover-restart-") as tmp,
        EmbeddedRedis(Path(tmp) / "redis") as server,
    ):
        client = connect(server.url, client_name="bench-restart")
        t0 = time.perf_counter()
        write_log(client, entries)
        write_s = time.perf_counter() - t0
        del entries
        before = _used_memory(client)
        log_before = int(client.xlen(NAMES.log))
        leader, replay_s = _served_in(client, policy)
        t0 = time.perf_counter()
        at = leader.snapshot_writer.write(
            leader.store.snapshot(), leader.applied, leader.stats.term
        )
        snapshot_s = time.perf_counter() - t0
        if not at.ok:
            raise RuntimeError(f"the snapshot was not switched: {at.reason}")
        stats = leader.snapshot_writer.stats
        del leader
        _leader, restart_s = _served_in(client, policy)
        t0 = time.perf_counter()
        replica = LogReplica(
            client,
            NAMES,
            store=JobScopedStore(),
            decode=lambda raw: decode_entry(raw, compact=True),
        )
        replica.load()
        follower_s = time.perf_counter() - t0
        return {
            "bench": "restart",
            "nodes": nodes,
            "jobs": jobs,
            "client_reports_per_allocation": reports,
            "allocations": allocations,
            "record_seconds": round(record_s, 1),
            "log_write_seconds": round(write_s, 1),
            "log_entries_before": log_before,
            "redis_used_memory_before_bytes": before,
            "replay_restart_seconds": round(replay_s, 2),
            "snapshot_write_seconds": round(snapshot_s, 2),
            "snapshot_bytes": stats.bytes,
            "snapshot_chunks": stats.chunks,
            "restart_seconds": round(restart_s, 2),
            "follower_load_seconds": round(follower_s, 2),
            "follower_allocations": replica.store.alloc_count(),
            "log_entries": int(client.xlen(NAMES.log)),
            "redis_used_memory_bytes": _used_memory(client),
        }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--count", type=int, default=1000, help="allocations per job")
    parser.add_argument("--keep-tail", type=int, default=1_000)
    parser.add_argument(
        "--reports", type=int, default=3, help="client reports in the log per allocation"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    line = run(args.nodes, args.jobs, args.count, args.keep_tail, args.reports)
    sys.stdout.write(orjson.dumps(line).decode() + "\n")


if __name__ == "__main__":
    main()
