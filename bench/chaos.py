"""Faults under load: `python -m bench.chaos --minutes M`.

Starts `drover agent -dev` as a process tree of its own (embedded Redis with AOF, a local
Ray, `--nodes` simulated nodes, snapshots every `--snapshot-every` entries) and drives it
through its HTTP API with a steady stream of job registrations, updates, scalings and stops
(`--ops-per-s`), while a fault injector sends SIGKILL, at random intervals averaging
`--kill-every` seconds, to one of: the leader (and the eval broker it hosts), a scheduler
worker, a client agent, the autoscaler (Ray restarts each), Redis (the agent's watchdog
starts it again on its AOF), and now and then (`--tree-every` kills) the whole agent
process tree, which is then started again on the same data directory.

Every operation is retried until the API acknowledges it (a 503 while Redis or the leader
is away, a lost answer), so what each job should end as is known: the count of its last
acknowledged operation (0 once stopped). When the time is up the load and the kills stop,
the system settles (at most `--settle` s), and the state is read as every follower reads it
(the latest snapshot and the log after it) and checked:

- every live job at its count (`jobs_at_count` of `jobs_total`), none missing
  (`lost_acknowledged_jobs`), no job with two live allocations of one name
  (`duplicate_alloc_names`);
- every evaluation terminal (`non_terminal_evals`), no node over capacity
  (`overcommitted_nodes`, recomputed from the allocation records);
- the kills survived (`kills`, `kills_by_target`) and the recovery time of each, from the
  kill to the next plan committed (`recovery_p50_s`, `recovery_p99_s`).

One JSON line; `"ok"` is true when every check holds (else the exit status is 1).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import psutil
import redis

from actors.api.core.shapes import job_to_nomad
from actors.runtime.replica import LogReplica
from actors.streams.client import connect
from actors.streams.names import StreamNames
from bench.core import overcommitted
from contracts import ClientStatus, EvalStatus, Job, Resources, Task, TaskGroup

ROOT = Path(__file__).resolve().parents[1]
ACTORS = {
    "leader": "ray::LeaderActor",
    "worker": "ray::WorkerActor",
    "agent": "ray::AgentActor",
    "autoscaler": "ray::AutoscalerActor",
}
TARGET_WEIGHTS = {"leader": 4, "worker": 3, "agent": 2, "autoscaler": 1, "redis": 2}
REQUEST_TIMEOUT_S = 40.0  # past the API's 30 s wait for the leader's answer
START_TIMEOUT_S = 180.0


# -- the agent process tree -----------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return list(psutil.Process(pid).children(recursive=True))
    except psutil.Error:
        return []


def _cmdline(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())
    except psutil.Error:  # gone, or a zombie
        return ""


class Agent:
    """`drover agent -dev` on a data directory and a fixed HTTP port, as a process tree."""

    def __init__(self, data_dir: Path, nodes: int, snapshot_every: int, log_path: Path) -> None:
        self.data_dir = data_dir
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.nodes = nodes
        self.snapshot_every = snapshot_every
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        argv = [sys.executable, "-m", "launch.cli", "agent", "-dev"]
        argv += ["-data-dir", str(self.data_dir), "-http-addr", self.address]
        argv += ["-nodes", str(self.nodes), "-workers", "2"]
        argv += ["-snapshot-every", str(self.snapshot_every), "-snapshot-tail", "500"]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self.ready():
            if self.process.poll() is not None:
                tail = self.log_path.read_bytes()[-2000:].decode(errors="replace")
                raise RuntimeError(
                    f"drover agent exited with {self.process.returncode}; its log ends:\n{tail}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(f"drover agent did not serve within {START_TIMEOUT_S} s")
            time.sleep(0.5)

    def ready(self) -> bool:
        status, nodes = request(self.address, "GET", "/v1/nodes", timeout=5)
        return status == 200 and isinstance(nodes, list) and len(nodes) >= self.nodes

    def pids(self, title: str) -> list[int]:
        if self.process is None:
            return []
        tree = descendants(self.process.pid)
        return [p.pid for p in tree if _cmdline(p).startswith(title)]

    def redis_pid(self) -> int | None:
        tree = descendants(self.process.pid) if self.process else []
        return next((p.pid for p in tree if "redis-server" in _cmdline(p)), None)

    def kill_tree(self) -> None:
        assert self.process is not None
        for pid in (self.process.pid, *(p.pid for p in descendants(self.process.pid))):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.process.wait(30)
        self.process = None

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.kill_tree()
        self.process = None

    @property
    def redis_url(self) -> str:
        return f"unix://{self.data_dir / 'redis' / 'redis.sock'}"


def request(
    address: str, method: str, path: str, body: Any = None, timeout: float = REQUEST_TIMEOUT_S
) -> tuple[int, Any]:
    """(status, decoded body); status 0 when the connection failed."""
    conn = http.client.HTTPConnection(address, timeout=timeout)
    try:
        data = orjson.dumps(body) if body is not None else None
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        raw = response.read()
        try:
            return response.status, orjson.loads(raw)
        except orjson.JSONDecodeError:
            return response.status, raw.decode(errors="replace")
    except (OSError, http.client.HTTPException) as exc:
        return 0, str(exc)
    finally:
        conn.close()


# -- the load -------------------------------------------------------------------------------


def job_body(job_id: str, count: int, revision: int) -> dict[str, Any]:
    task = Task("t", "mock", {"run_for": "2h"}, resources=Resources(20, 32))
    group = TaskGroup("g", count, tasks=(task,))
    job = Job(
        job_id, job_id, datacenters=("dc1",), task_groups=(group,), meta={"rev": str(revision)}
    )
    return {"Job": job_to_nomad(job)}


@dataclass
class Load:
    """Operations on the jobs, each retried until acknowledged; `expected` is what each job
    should end as (its count; 0 once stopped)."""

    address: str
    stop: threading.Event
    rng: random.Random
    expected: dict[str, int] = field(default_factory=dict)
    revisions: Counter[str] = field(default_factory=Counter)
    ops: Counter[str] = field(default_factory=Counter)
    retries: int = 0
    unacknowledged: int = 0  # given up when the run ended

    def step(self) -> None:
        live = [j for j, n in self.expected.items() if n > 0]
        roll = self.rng.random()
        if not live or roll < 0.4:
            job_id = f"chaos-{len(self.expected):05d}"
            self._do("register", job_id, self.rng.randint(1, 3))
            return
        job_id = self.rng.choice(live)
        if roll < 0.6:
            self._do("update", job_id, self.expected[job_id])
        elif roll < 0.85:
            self._do("scale", job_id, self.rng.randint(1, 4))
        else:
            self._do("stop", job_id, 0)

    def _do(self, kind: str, job_id: str, count: int) -> None:
        while True:
            status = self._send(kind, job_id, count)
            if status == 200:
                self.expected[job_id] = count
                self.ops[kind] += 1
                return
            if status not in (0, 503, 504, 500):
                raise RuntimeError(f"{kind} {job_id}: HTTP {status}")
            self.retries += 1
            if self.stop.wait(0.2):
                self.unacknowledged += 1
                return

    def _send(self, kind: str, job_id: str, count: int) -> int:
        if kind in ("register", "update"):
            self.revisions[job_id] += 1
            body = job_body(job_id, count, self.revisions[job_id])
            return request(self.address, "POST", "/v1/jobs", body)[0]
        if kind == "scale":
            body = {"Count": count, "Target": {"Group": "g"}, "Message": "chaos"}
            return request(self.address, "POST", f"/v1/job/{job_id}/scale", body)[0]
        return request(self.address, "DELETE", f"/v1/job/{job_id}")[0]

    def run(self, ops_per_s: float) -> None:
        while not self.stop.is_set():
            started = time.monotonic()
            self.step()
            self.stop.wait(max(0.0, self.rng.expovariate(ops_per_s) - (time.monotonic() - started)))


# -- commits and kills ----------------------------------------------------------------------


class CommitWatch:
    """Commit times of plans (UpsertAllocs entries), read from the state log as it grows."""

    def __init__(self, redis_url: str, names: StreamNames) -> None:
        self.redis_url = redis_url
        self.names = names
        self.times: list[float] = []  # wall clock seconds
        self.position = "$"
        self.lock = threading.Lock()

    def run(self, stop: threading.Event) -> None:
        client: redis.Redis | None = None
        while not stop.is_set():
            try:
                if client is None:
                    client = connect(self.redis_url, client_name="bench-chaos")
                reply = client.xread({self.names.log: self.position}, count=1000, block=200)
            except (redis.RedisError, OSError):
                client = None
                stop.wait(0.2)
                continue
            for _stream, rows in reply or ():
                for row_id, fields in rows:
                    self.position = row_id.decode() if isinstance(row_id, bytes) else row_id
                    data = orjson.loads(fields[b"e"])
                    if data.get("Type") == "UpsertAllocs" and data["Change"].get("AllocGroups"):
                        with self.lock:
                            self.times.append(data.get("Time", 0) / 1e9)

    def first_after(self, at: float) -> float | None:
        with self.lock:
            return next((t for t in self.times if t >= at), None)


@dataclass
class Injector:
    agent: Agent
    rng: random.Random
    tree_every: int
    order: list[str] = field(default_factory=list)  # targets in turn (else drawn at random)
    kills: list[tuple[str, float]] = field(default_factory=list)  # (target, wall time)
    failures: list[str] = field(default_factory=list)

    def kill_one(self) -> None:
        if self.order:
            target = self.order[len(self.kills) % len(self.order)]
        elif self.tree_every > 0 and self.rng.random() < 1 / self.tree_every:
            target = "tree"
        else:
            targets = list(TARGET_WEIGHTS)
            target = self.rng.choices(targets, [TARGET_WEIGHTS[t] for t in targets])[0]
        if target == "tree":
            at = time.time()
            self.agent.kill_tree()
            self.agent.start()
            self.kills.append(("tree", at))
            return
        if target == "redis":
            pid = self.agent.redis_pid()
        else:
            pids = self.agent.pids(ACTORS[target])
            pid = self.rng.choice(pids) if pids else None
        if pid is None:
            self.failures.append(f"no {target} process to kill")
            return
        at = time.time()
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        self.kills.append((target, at))

    def run(self, stop: threading.Event, kill_every_s: float) -> None:
        while not stop.wait(self.rng.expovariate(1 / kill_every_s)):
            try:
                self.kill_one()
            except Exception as exc:  # a failed kill is reported, not fatal
                self.failures.append(f"{type(exc).__name__}: {exc}")


# -- the checks -----------------------------------------------------------------------------


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def check_state(redis_url: str, names: StreamNames, expected: dict[str, int]) -> dict[str, Any]:
    """The state as a follower reads it (snapshot and log), against the expected counts."""
    replica = LogReplica(connect(redis_url, client_name="bench-chaos-check"), names)
    replica.load()
    state = replica.store.snapshot()
    at_count = lost = duplicates = 0
    for job_id, count in expected.items():
        job = state.job("default", job_id)
        if job is None:
            lost += 1
            continue
        live = [
            a
            for a in state.allocs_by_job("default", job_id)
            if not a.terminal() and a.client_status is ClientStatus.RUNNING
        ]
        names_seen = Counter(
            a.name for a in state.allocs_by_job("default", job_id) if not a.terminal()
        )
        duplicates += sum(1 for n in names_seen.values() if n > 1)
        if len(live) == count and (count > 0) != job.stop:
            at_count += 1
    evals = list(state.evals())
    non_terminal = [e for e in evals if e.status in (EvalStatus.PENDING, EvalStatus.BLOCKED)]
    return {
        "jobs_total": len(expected),
        "jobs_at_count": at_count,
        "lost_acknowledged_jobs": lost,
        "duplicate_alloc_names": duplicates,
        "non_terminal_evals": len(non_terminal),
        "overcommitted_nodes": len(overcommitted(state.nodes(), state.allocs())),
        "evaluations": len(evals),
        "log_index": state.latest_index(),
    }


def settle(check: Callable[[], dict[str, Any]], seconds: float) -> tuple[dict[str, Any], float]:
    """Check until the state is right or `seconds` pass. A Redis the last kill took down is
    being started again by the agent's watchdog: a check that cannot reach it (or finds it
    still loading its AOF) is tried again, until the deadline, as the actors retry."""
    started = time.monotonic()
    while True:
        try:
            result = check()
        except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
            if time.monotonic() - started > seconds:
                raise
            time.sleep(1.0)
            continue
        done = result["jobs_at_count"] == result["jobs_total"] and not result["non_terminal_evals"]
        if done or time.monotonic() - started > seconds:
            return result, time.monotonic() - started
        time.sleep(2.0)


def run(args: argparse.Namespace) -> dict[str, Any]:
    for target in filter(None, args.targets.split(",")):
        if target not in (*TARGET_WEIGHTS, "tree"):
            raise ValueError(f"--targets: unknown target {target!r}")
    rng = random.Random(args.seed)
    names = StreamNames()
    with tempfile.TemporaryDirectory(prefix="drover-chaos-") as tmp:
        agent = Agent(Path(tmp) / "data", args.nodes, args.snapshot_every, Path(tmp) / "agent.log")
        agent.start()
        stop = threading.Event()
        watch = CommitWatch(agent.redis_url, names)
        load = Load(agent.address, stop, random.Random(rng.random()))
        order = [t for t in args.targets.split(",") if t] if args.targets else []
        injector = Injector(agent, random.Random(rng.random()), args.tree_every, order)
        threads = [
            threading.Thread(target=watch.run, args=(stop,), daemon=True),
            threading.Thread(target=load.run, args=(args.ops_per_s,), daemon=True),
        ]
        kill_stop = threading.Event()
        killer = threading.Thread(
            target=injector.run, args=(kill_stop, args.kill_every), daemon=True
        )
        for thread in threads:
            thread.start()
        killer.start()
        try:
            time.sleep(args.minutes * 60)
            kill_stop.set()
            killer.join(START_TIMEOUT_S)
            stop.set()
            threads[1].join(REQUEST_TIMEOUT_S * 2)
            result, settle_s = settle(
                lambda: check_state(agent.redis_url, names, dict(load.expected)), args.settle
            )
            recovered = [
                (target, found - at)
                for target, at in injector.kills
                if (found := watch.first_after(at))
            ]
            recoveries = [seconds for _target, seconds in recovered]
            slowest: dict[str, float] = {}
            for target, seconds in recovered:
                slowest[target] = round(max(slowest.get(target, 0.0), seconds), 3)
            threads[0].join(5)
        finally:
            stop.set()
            kill_stop.set()
            agent.stop()
        ok = (
            result["jobs_at_count"] == result["jobs_total"]
            and not result["lost_acknowledged_jobs"]
            and not result["duplicate_alloc_names"]
            and not result["non_terminal_evals"]
            and not result["overcommitted_nodes"]
        )
        return {
            "bench": "chaos",
            "minutes": args.minutes,
            "nodes": args.nodes,
            "ok": ok,
            "kills": len(injector.kills),
            "kills_by_target": dict(Counter(t for t, _ in injector.kills)),
            **result,
            "operations": dict(load.ops),
            "operation_retries": load.retries,
            "unacknowledged_operations": load.unacknowledged,
            "recovery_p50_s": _percentile(recoveries, 0.5),
            "recovery_p99_s": _percentile(recoveries, 0.99),
            "recovery_max_s": round(max(recoveries), 3) if recoveries else None,
            "recovery_max_s_by_target": slowest,
            "kills_without_a_later_plan": len(injector.kills) - len(recoveries),
            "settle_s": round(settle_s, 1),
            "injector_failures": injector.failures[:5],
        }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--ops-per-s", type=float, default=4.0)
    parser.add_argument("--kill-every", type=float, default=5.0, help="mean seconds between kills")
    parser.add_argument(
        "--tree-every", type=int, default=30, help="one kill in N is the tree; 0: never"
    )
    parser.add_argument(
        "--targets",
        default="",
        help="kill these in turn (comma-separated: leader, worker, agent, autoscaler, "
        "redis, tree) instead of drawing them at random",
    )
    parser.add_argument("--snapshot-every", type=int, default=2000)
    parser.add_argument("--settle", type=float, default=180.0)
    parser.add_argument("--seed", type=int, default=1)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    line = run(parse_args(argv))
    sys.stdout.write(orjson.dumps(line).decode() + "\n")
    if not line["ok"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
