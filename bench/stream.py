"""Many small jobs through the HTTP API: `python -m bench.stream`.

Starts drover (`--nodes` simulated nodes, `--workers` scheduler workers, the HTTP API on a
free loopback port) and registers single-allocation service jobs (mock driver, 10 MHz, 16
MiB) with `POST /v1/jobs` as `drover job run` sends them, from a load process of its own (in
this process, which serves the API, clients would contend for its interpreter lock). One
JSON line per phase:

- idle: `--idle` jobs one at a time on the quiet cluster, each once the previous one runs
  (and a random pause);
- rate: open loop at each of `--rates` per second for `--seconds`: request i is due at
  t0 + i/rate whatever the replies, and goes out on the first of `--clients` threads (one
  keep-alive connection each) that is free; one not sent by the window's end is dropped
  (`unsent`; `achieved_offered_per_s` is what went out);
- burst: `--burst` jobs all due at once (none sent after `--drain` s).

Latencies run from when a request was due (waiting for a free client counts, as open loop
requires) to: the API's answer (register_*; answer_* from when it was sent: `--clients` over
it is the most the clients can send, so past saturation the pool, not drover, may set
`evals_per_s`: compare `--clients 128`); the job's allocation in the state log, seen by
a thread blocked on XREAD of the log, which wakes as the leader appends (commit_*); the
agent's report of it running in the log (running_*). A percentile is null when it falls on
a job that never got there. `evals_per_s`: allocations committed (any job's) per second of
the window; for the burst, from its start to its last commit. `backlog_start`/`_end`: jobs
whose registration was in the log and their allocation not (evaluations queued or in
flight) as the window starts/ends. A phase then drains (all its jobs running) for at most
`--drain` s (`drained`); what is left shows in the next `backlog_start`. `cpu_pct`: each
process's CPU over the phase (window and drain) in percent of one core; `cpu_ms_per_eval`:
the same CPU in milliseconds per evaluation scheduled, per process and in all (`drover`: all
but the load process); `cpu_over_load`: each process's CPU, and drover's, over the load
process's (a yardstick that moves with the machine's speed: compare builds by it);
`system`: the actors' counters over the phase, with `snapshots`, `snapshot_ms` (the latest
one's write, encoding included) and `snapshot_fork_ms` (the leader loop's pause to fork its
writer) when the leader wrote a snapshot in it (`--snapshot-every` moves them;
`--snapshot-writer thread` writes them on a thread of the leader's process instead, which
shares the loop's interpreter lock), and `heap_sweep_ms` (by role) when a process swept its
frozen heap in it (process_settings.HeapPacer: a stall); `machine_ms`: how fast the machine
ran plain Python when the phase ended (bench/gauge.py: compare A/B pairs whose readings
agree).
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import math
import multiprocessing
import random
import re
import shutil
import socket
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
import redis

from actors.agent.core import FleetSpec
from actors.api.core.shapes import job_to_nomad
from actors.leader.snapshots import SnapshotPolicy
from actors.streams.client import connect
from actors.streams.names import StreamNames
from bench.gauge import machine_ms
from bench.stream_accounting import (
    actor_counters,
    calls_per_eval,
    cpu_over_load,
    cpu_per_eval,
    cpu_seconds,
    heap_sweep_ms,
    heap_swept_since,
    process_ids,
    redis_commands,
    snapshot_written,
)
from contracts import DesiredStatus, Job, Resources, Task, TaskGroup
from contracts.alloc_batch import ROW_ID
from launch.system import DroverSystem, SystemConfig

NODE_CPU_MHZ, NODE_MEMORY_MB = 4000, 16384
JOB_CPU_MHZ, JOB_MEMORY_MB = 10, 16
REQUEST_TIMEOUT_S = 120.0
IDLE_WAIT_S = 10.0  # per idle job: registered -> running
_RUN = DesiredStatus.RUN.value
_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:\s*(\d+)\r\n")

_TASK = Task("srv", "mock", {"run_for": "1h"}, resources=Resources(JOB_CPU_MHZ, JOB_MEMORY_MB))
# The full Nomad JSON of a job, as `drover job run` sends it.
_TEMPLATE = job_to_nomad(
    Job(
        "stream", "stream", datacenters=("dc1",), task_groups=(TaskGroup("app", 1, tasks=(_TASK,)),)
    )
)


def job_body(job_id: str) -> bytes:
    return orjson.dumps({"Job": {**_TEMPLATE, "ID": job_id, "Name": job_id}})


def holds(nodes: int) -> int:
    """How many of the bench's jobs `nodes` nodes can run at once."""
    return nodes * min(NODE_CPU_MHZ // JOB_CPU_MHZ, NODE_MEMORY_MB // JOB_MEMORY_MB)


def percentile_ms(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile in ms; None if it falls on a missing value (inf)."""
    if not values:
        return None
    ordered = sorted(values)
    value = ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]
    return None if math.isinf(value) else round(value * 1000, 1)


# -- following the state log ----------------------------------------------------------------


def scan_entry(raw: bytes) -> tuple[int, list[tuple[str, str, str]]]:
    """What the bench needs of a log entry, read off its wire form without building records
    (decode_entry would build each whole job): when the leader committed it (ns, 0 if not
    recorded) and ("job", job ID, ""), ("alloc", job ID, alloc ID) for a placement,
    ("running", alloc ID, "") for a client report."""
    data = orjson.loads(raw)
    kind, change = data["Type"], data["Change"]
    events = []
    if kind == "UpsertJob":
        events.append(("job", change["Job"]["ID"], ""))
    elif kind == "UpsertAllocs":
        for group in change["AllocGroups"]:
            shared = group["Shared"]
            # Fields holding their default are left out of the log (to_lean_wire).
            if shared.get("DesiredStatus", _RUN) == _RUN:
                events += [("alloc", shared["JobID"], row[ROW_ID]) for row in group["Rows"]]
    elif kind == "UpdateAllocsClientStatus":
        for group in change["UpdateGroups"]:
            if group["ClientStatus"] == "running":
                events += [("running", alloc_id, "") for alloc_id, _node_id in group["Rows"]]
    return int(data.get("Time", 0)), events


class LogFollower:
    """When each job's registration, allocation and running report reached the log (the
    first time each did), from the log's end at creation on."""

    def __init__(self, client: redis.Redis, names: StreamNames) -> None:
        self.client, self.stream = client, names.log
        self.registered: dict[str, float] = {}
        self.committed: dict[str, float] = {}
        self.running: dict[str, float] = {}
        self.commit_times: list[float] = []  # every first commit, in order
        self.changed = threading.Condition()
        self._alloc_job: dict[str, str] = {}
        self._awaited: set[str] = set()
        last: Any = client.xrevrange(self.stream, count=1)
        self._position: bytes = last[0][0] if last else b"0-0"
        self._thread = threading.Thread(target=self._run, name="log-follower", daemon=True)

    def start(self) -> LogFollower:
        self._thread.start()
        return self

    def _run(self) -> None:
        # Entries carry the leader's commit time (wall clock); the bench's clock is monotonic.
        wall_offset = time.time() - time.monotonic()
        while True:  # a daemon thread: it ends with the load process
            reply: Any = self.client.xread({self.stream: self._position}, count=10_000, block=1000)
            read_at = time.monotonic()
            for _stream, rows in reply or ():
                self._position = rows[-1][0]
                with self.changed:
                    for _id, fields in rows:
                        committed_ns, events = scan_entry(fields[b"e"])
                        # Stamped by the leader, so a follower that reads late (the load
                        # process starved of CPU past saturation) still times commits right.
                        seen = committed_ns / 1e9 - wall_offset if committed_ns else read_at
                        for kind, key, alloc_id in events:
                            self._record(kind, key, alloc_id, seen)
                    self.changed.notify_all()

    def _record(self, kind: str, key: str, alloc_id: str, seen: float) -> None:
        if kind == "job":
            self.registered.setdefault(key, seen)
        elif kind == "alloc":
            self._alloc_job[alloc_id] = key
            if key not in self.committed:
                self.committed[key] = seen
                self.commit_times.append(seen)
        else:
            job_id = self._alloc_job.get(key)
            if job_id is not None and job_id not in self.running:
                self.running[job_id] = seen
                self._awaited.discard(job_id)

    def wait_running(self, job_ids: Sequence[str], deadline: float) -> bool:
        """Until every job of `job_ids` runs; False at `deadline`. The follower strikes each
        off as it comes (a drain of thousands of jobs is never rescanned per log read)."""
        with self.changed:
            self._awaited = {j for j in job_ids if j not in self.running}
            while self._awaited:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self.changed.wait(min(remaining, 0.5))
        return True

    def backlog(self, at: float) -> int:
        """Jobs whose registration was in the log at `at`, and their allocation not."""
        with self.changed:
            committed = self.committed
            return sum(
                1
                for job_id, seen in self.registered.items()
                if seen <= at and committed.get(job_id, math.inf) > at
            )

    def commits_between(self, start: float, end: float) -> int:
        with self.changed:
            times = self.commit_times
            return bisect.bisect_right(times, end) - bisect.bisect_left(times, start)


# -- the clients ----------------------------------------------------------------------------


@dataclass
class Sent:
    """Per request of a phase: when it was due, sent and answered (nan: never), and whether
    the API accepted it."""

    due: list[float]
    sent: list[float]
    answered: list[float]
    ok: list[bool]


class ApiConnection:
    """A keep-alive HTTP/1.1 connection that POSTs JSON. http.client costs ~10x the CPU per
    request (its header parsing above all): on a 2-core machine, that much would come out of
    the system's share at the higher rates."""

    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=REQUEST_TIMEOUT_S)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""
        self.open = True

    def post(self, path: str, body: bytes) -> int:
        """The reply's status; the body is read and dropped. One send per request."""
        request = f"POST {path} HTTP/1.1\r\nHost: drover\r\nContent-Type: application/json\r\n"
        self.sock.sendall(f"{request}Content-Length: {len(body)}\r\n\r\n".encode() + body)
        buffer = self.buffer
        while (end := buffer.find(b"\r\n\r\n")) < 0:
            buffer += self._recv()
        head, buffer = buffer[: end + 2].lower(), buffer[end + 4 :]
        length = int(_CONTENT_LENGTH.search(head)[1])  # type: ignore[index]
        self.open = b"\r\nconnection: close\r\n" not in head
        while len(buffer) < length:
            buffer += self._recv()
        self.buffer = buffer[length:]
        return int(head[9:12])  # "HTTP/1.1 200 OK"

    def _recv(self) -> bytes:
        data = self.sock.recv(1 << 16)
        if not data:
            raise ConnectionError("the API closed the connection")
        return data

    def close(self) -> None:
        self.sock.close()


class Clients:
    """Keep-alive connections to the API, one per client thread."""

    def __init__(self, address: str, count: int) -> None:
        url = urlsplit(address)
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 80
        self.conns = [ApiConnection(self.host, self.port) for _ in range(count)]

    def register(self, k: int, job_id: str) -> bool:
        """No retry: a POST that may have reached the API is never sent twice."""
        conn = self.conns[k]
        try:
            ok = conn.post("/v1/jobs", job_body(job_id)) == 200
        except (OSError, ValueError, TypeError):  # no reply, or not the HTTP expected
            ok, conn.open = False, False
        if not conn.open:
            conn.close()
            self.conns[k] = ApiConnection(self.host, self.port)
        return ok

    def send(self, job_ids: Sequence[str], due: Sequence[float], stop_at: float) -> Sent:
        """Open loop: request i goes at due[i] (or as soon as a client is free after it),
        never after `stop_at`."""
        n = len(job_ids)
        result = Sent(list(due), [math.nan] * n, [math.nan] * n, [False] * n)
        counter = itertools.count()  # next() on it is atomic: each request is taken once

        def client(k: int) -> None:
            while (i := next(counter)) < n:
                if due[i] >= stop_at:
                    return
                wait = due[i] - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                sent = time.monotonic()
                if sent >= stop_at:  # a client was free only after the window closed
                    return
                result.sent[i] = sent
                result.ok[i] = self.register(k, job_ids[i])
                result.answered[i] = time.monotonic()

        threads = [threading.Thread(target=client, args=(k,)) for k in range(len(self.conns))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return result


# -- the phases (in the load process) -------------------------------------------------------


def _latencies(
    follower: LogFollower, ids: Sequence[str], sent: Sent, accepted: Sequence[int]
) -> dict[str, Any]:
    """Percentiles from due time; a job never committed or running counts as infinite."""
    with follower.changed:
        commit = [follower.committed.get(ids[i], math.inf) - sent.due[i] for i in accepted]
        running = [follower.running.get(ids[i], math.inf) - sent.due[i] for i in accepted]
    register = [a - d for a, d in zip(sent.answered, sent.due, strict=True) if not math.isnan(a)]
    # The API's own time, without the wait for a free client: `--clients` over it bounds
    # the rate the clients can offer (past it they queue, as register_* shows).
    answer = [a - s for a, s in zip(sent.answered, sent.sent, strict=True) if not math.isnan(a)]
    out: dict[str, Any] = {}
    lists = (("register", register), ("answer", answer), ("commit", commit), ("running", running))
    for name, values in lists:
        out[f"{name}_p50_ms"] = percentile_ms(values, 50)
        out[f"{name}_p99_ms"] = percentile_ms(values, 99)
        out[f"{name}_max_ms"] = percentile_ms(values, 100)
    out["committed"] = sum(1 for v in commit if not math.isinf(v))
    out["uncommitted"] = len(commit) - out["committed"]
    out["not_running"] = sum(1 for v in running if math.isinf(v))
    return out


def idle_phase(follower: LogFollower, clients: Clients, seq: int, count: int) -> dict[str, Any]:
    ids = [f"idle{seq}-{i:04d}" for i in range(count)]
    pause = random.Random(seq).uniform
    sent = Sent([], [], [], [])
    for job_id in ids:
        sent.due.append(time.monotonic())
        sent.sent.append(sent.due[-1])  # one at a time: never waits for a client
        sent.ok.append(clients.register(0, job_id))
        sent.answered.append(time.monotonic())
        if sent.ok[-1]:
            follower.wait_running([job_id], time.monotonic() + IDLE_WAIT_S)
        # Idle again (the report committed, the eval acked), after a random pause: a job sent
        # a fixed time after the last one ran would keep one phase of every periodic timer.
        time.sleep(pause(0.05, 0.25))
    accepted = [i for i, ok in enumerate(sent.ok) if ok]
    return {
        "phase": "idle",
        "jobs": count,
        "register_errors": count - len(accepted),
        **_latencies(follower, ids, sent, accepted),
    }


def stream_phase(
    follower: LogFollower,
    clients: Clients,
    seq: int,
    rate: float | None,
    count: int,
    seconds: float,
    drain_s: float,
) -> dict[str, Any]:
    """A rate phase (`rate` per second for `seconds`), or with rate None a burst of `count`
    (all sent within `drain_s`)."""
    ids = [f"{'r' if rate else 'burst'}{seq}-{i:06d}" for i in range(count)]
    t0 = time.monotonic() + 0.1  # the client threads start first
    if rate:
        due, stop_at = [t0 + i / rate for i in range(count)], t0 + seconds
    else:
        due, stop_at = [t0] * count, t0 + drain_s
    sent = clients.send(ids, due, stop_at)
    answered = [t for t in sent.answered if not math.isnan(t)]
    t_end = t0 + seconds if rate else max(answered, default=t0)
    accepted = [i for i, ok in enumerate(sent.ok) if ok]
    accepted_ids = [ids[i] for i in accepted]
    drained = follower.wait_running(accepted_ids, t_end + drain_s)
    n_sent = len(answered)
    with follower.changed:
        last_commit = max((follower.committed.get(j, t0) for j in accepted_ids), default=t0)
        # Sent by the window's end, not yet registered in the log: in the API or the leader.
        pending = sum(
            1
            for i in accepted
            if sent.sent[i] <= t_end and follower.registered.get(ids[i], math.inf) > t_end
        )
    out: dict[str, Any] = {
        "phase": "rate" if rate else "burst",
        "rate": rate,
        "offered_per_s": rate,
        "seconds": seconds if rate else None,
        "jobs": count,
        "sent": n_sent,
        "unsent": count - n_sent,
        "register_errors": n_sent - len(accepted),
    }
    if rate:
        out["achieved_offered_per_s"] = round(n_sent / seconds, 1)
        out["evals_per_s"] = round(follower.commits_between(t0, t_end) / seconds, 1)
    else:
        out["registrations_per_s"] = round(n_sent / max(t_end - t0, 1e-9), 1)
        out["all_committed_s"] = round(last_commit - t0, 3) if drained else None
        commits = follower.commits_between(t0, last_commit)
        out["evals_per_s"] = round(commits / max(last_commit - t0, 1e-9), 1)
    return out | {
        **_latencies(follower, ids, sent, accepted),
        "backlog_start": follower.backlog(t0),
        "backlog_end": follower.backlog(t_end),
        "pending_requests_end": pending,
        "drained": drained,
        "drain_s": round(max(0.0, last_commit - t_end), 3) if drained else None,
    }


def _load_main(conn: Connection, address: str, redis_url: str, prefix: str, clients: int) -> None:
    """The load process: runs each phase it is sent and answers with its figures."""
    sys.setswitchinterval(0.0005)  # the follower's stamps wait less behind client threads
    follower = LogFollower(connect(redis_url, client_name="bench-stream"), StreamNames(prefix))
    follower.start()
    pool = Clients(address, clients)
    conn.send({"ready": True})
    seq = itertools.count(1)
    while (command := conn.recv()) is not None:
        kind, *args = command
        try:
            if kind == "idle":
                conn.send(idle_phase(follower, pool, next(seq), *args))
            else:
                conn.send(stream_phase(follower, pool, next(seq), *args))
        except Exception:
            conn.send({"error": traceback.format_exc()})


# -- the system and the phases (this process) -----------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument(
        "--rates",
        type=lambda text: [float(r) for r in text.split(",") if r.strip()],
        default=[100, 250, 500, 1000, 2000],
        help="jobs per second, comma-separated",
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="per rate")
    parser.add_argument("--burst", type=int, default=10_000, help="0: no burst")
    parser.add_argument("--idle", type=int, default=50, help="0: no idle phase")
    # Open-loop needs as many requests in flight as the rate times the answer time: ~60 at
    # 1,000/s when a leader turn carries a batch. 32 capped what was offered there (~40 ms
    # answers: ~800/s), and the smaller batches cost every process more CPU per evaluation
    # (README, Performance: 64 better in 5 of 6 alternating runs).
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="scheduler workers (default: the system's, launch.system.default_workers)",
    )
    parser.add_argument("--drain", type=float, default=60.0, help="at most this long, s")
    parser.add_argument("--tracing", choices=("on", "off"), default="off")
    parser.add_argument(
        "--leader-schedules",
        choices=("on", "off"),
        default="on",
        help="small evals scheduled by the leader itself (actors/leader/local_scheduling.py)",
    )
    parser.add_argument(
        "--snapshot-every",
        type=int,
        default=SnapshotPolicy().every_entries,
        help="log entries between the leader's snapshots (the agent's -snapshot-every)",
    )
    parser.add_argument(
        "--snapshot-writer",
        choices=("fork", "thread"),
        default="fork",
        help="who encodes and writes a snapshot: a forked child (the system's) or a thread of "
        "the leader's process (actors/leader/snapshots.py)",
    )
    args = parser.parse_args(argv)
    if _jobs(args) > holds(args.nodes):
        parser.error(f"{args.nodes} nodes hold {holds(args.nodes)} jobs, not {_jobs(args)}")
    return args


def _jobs(args: argparse.Namespace) -> int:
    return int(args.idle + args.burst + sum(round(r * args.seconds) for r in args.rates))


def run(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    """Yields each phase's JSON line as it ends."""
    common: dict[str, Any] = {
        "bench": "stream",
        "nodes": args.nodes,
        "workers": args.workers,
        "clients": args.clients,
        "tracing": args.tracing,
        "leader_schedules": args.leader_schedules,
        "snapshot_every": args.snapshot_every,
        "snapshot_writer": args.snapshot_writer,
    }
    phases: list[tuple[Any, ...]] = [("idle", args.idle)] if args.idle else []
    phases += [("rate", r, round(r * args.seconds), args.seconds, args.drain) for r in args.rates]
    if args.burst:
        phases.append(("burst", None, args.burst, 0.0, args.drain))
    data_dir = Path(tempfile.mkdtemp(prefix="drover-bench-stream-"))
    fleet = FleetSpec("stream", args.nodes, cpu_mhz=NODE_CPU_MHZ, memory_mb=NODE_MEMORY_MB)
    config = SystemConfig(
        data_dir=data_dir,
        workers=args.workers,
        num_cpus=max(2, args.workers) if args.workers else None,
        fleets=[fleet],
        http_addr="127.0.0.1:0",
        tracing=args.tracing == "on",
        leader_schedules=args.leader_schedules == "on",
        snapshot_policy=SnapshotPolicy(
            every_entries=args.snapshot_every, fork=args.snapshot_writer == "fork"
        ),
        pace_heap=True,  # as `drover agent` runs the API's process
    )
    context = multiprocessing.get_context("spawn")  # never fork a process that runs Ray
    ours, theirs = context.Pipe()
    load: Any = None
    try:
        started = time.monotonic()
        with DroverSystem(config) as system:
            common["start_s"] = round(time.monotonic() - started, 1)
            common["workers"] = len(system.workers)
            load = context.Process(
                target=_load_main,
                args=(theirs, system.http_address, system.redis_url, config.prefix, args.clients),
                daemon=True,
            )
            load.start()
            _reply(ours, load)
            pids = process_ids(system, load.pid)
            for command in phases:
                cpu_before = {role: sum(map(cpu_seconds, ids)) for role, ids in pids.items()}
                counters_before = actor_counters(system)
                sweeps_before = heap_sweep_ms(system)
                snapshots_before, _, _ = snapshot_written(system)
                commands_before = redis_commands(system)
                phase_started = time.monotonic()
                ours.send(command)
                figures = _reply(ours, load)
                wall = time.monotonic() - phase_started
                cpu_s = {
                    role: sum(map(cpu_seconds, ids)) - cpu_before[role]
                    for role, ids in pids.items()
                }
                cpu = {role: round(100 * spent / wall, 1) for role, spent in cpu_s.items()}
                counters = {k: v - counters_before[k] for k, v in actor_counters(system).items()}
                evals = counters["worker_evals"] + counters["leader_evals"]
                commands = calls_per_eval(redis_commands(system), commands_before, evals)
                swept = heap_swept_since(system, sweeps_before)
                if swept:
                    counters |= {"heap_sweep_ms": swept}
                snapshots, snapshot_s, fork_ms = snapshot_written(system)
                if snapshots > snapshots_before:
                    counters |= {"snapshots": snapshots - snapshots_before}
                    counters |= {"snapshot_ms": round(snapshot_s * 1000)}
                    counters |= {"snapshot_fork_ms": fork_ms}
                yield (
                    common
                    | figures
                    | {"machine_ms": machine_ms()}  # how fast this stretch ran (bench/gauge.py)
                    | {"phase_s": round(wall, 1), "cpu_pct": cpu, "system": counters}
                    | {"cpu_ms_per_eval": cpu_per_eval(cpu_s, evals)}
                    | {"cpu_over_load": cpu_over_load(cpu_s)}
                    | {"redis_calls_per_eval": commands}
                )
            ours.send(None)
            load.join(timeout=10)
    finally:
        if load is not None and load.is_alive():
            load.kill()
        shutil.rmtree(data_dir, ignore_errors=True)


def _reply(conn: Connection, load: Any) -> dict[str, Any]:
    """The load process's answer; raises if it failed or died (never waits forever)."""
    while not conn.poll(1.0):
        if not load.is_alive():
            raise RuntimeError(f"the load process died (exit code {load.exitcode})")
    message: dict[str, Any] = conn.recv()
    if "error" in message:
        raise RuntimeError(f"the load process failed:\n{message['error']}")
    return message


def main(argv: list[str] | None = None) -> None:
    for line in run(parse_args(argv)):
        print(orjson.dumps(line).decode(), flush=True)


if __name__ == "__main__":
    main()
