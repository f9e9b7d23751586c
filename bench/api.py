"""The HTTP API's server under load and abuse: `python -m bench.api`.

The API core over an in-process backend (`--jobs` registered jobs) is served on a loopback
port by drover's HTTP server, here; the clients run in a process of their own (asyncio raw
sockets, so that the load costs little CPU):

1. `--clients` keep-alive clients send small GETs (`GET /v1/job/<id>`, a few hundred bytes
   of JSON) back to back for `--seconds`: `rps`, `p50_ms`, `p99_ms`;
2. `--slow` clients open a connection each and send half a request line, then nothing;
   while they hold their connections, one client sends the same GETs one after another:
   `p99_ms_under_slow_clients`, `errors_under_slow_clients` (refused or failed requests),
   and `slow_connected` (how many slow clients the server let in);
3. `--write-seconds` (10 by default; 0 skips it, as `run()` does unless told): `--clients`
   keep-alive clients register small jobs (`POST /v1/jobs`, as `drover job run` sends them)
   back to back, against a stand-in leader that answers every write queued in a turn of
   `--leader-turn-ms`, canned (the leader's own
   cost is `bench.stream`'s): `write_rps`, `write_p50_ms`, `write_p99_ms`, `write_errors`,
   and what the serving process spent on each: `write_cpu_us` (CPU, all its threads, the
   stand-in leader's included) and `write_context_switches`.

One JSON line. Targets on a 2-core machine (issue 17): rps >= 2,000, p99 <= 50 ms, and
<= 100 ms under 5,000 slow clients.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import resource
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from multiprocessing.connection import Connection
from typing import Any

import orjson

from actors.api.core import Api, ApiRequest
from actors.api.core.memory_backend import MemoryBackend
from actors.api.core.shapes import job_to_nomad
from actors.api.server import ApiHttpServer
from contracts import Job, Resources, Task, TaskGroup
from contracts.messages import LeaderRequest, LeaderResponse


def _request(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n".encode()


async def _read_response(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    if length:
        await reader.readexactly(length)
    return status


async def _client(
    host: str, port: int, paths: list[str], until: float, latencies: list[float]
) -> int:
    errors = 0
    reader, writer = await asyncio.open_connection(host, port)
    n = 0
    try:
        while time.monotonic() < until:
            started = time.perf_counter()
            writer.write(_request(paths[n % len(paths)]))
            n += 1
            try:
                status = await _read_response(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                errors += 1
                writer.close()
                reader, writer = await asyncio.open_connection(host, port)
                continue
            if status != 200:
                errors += 1
            latencies.append(time.perf_counter() - started)
    finally:
        writer.close()
    return errors


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


async def _clients_phase(
    clients: int, seconds: float, client: Callable[[int, float, list[float]], Awaitable[int]]
) -> tuple[list[float], int, float]:
    """Run `client(i, until, latencies)` for each of `clients` at once, until `seconds` have
    passed: every request's latency, the errors they counted, and the seconds it took."""
    latencies: list[float] = []
    started = time.monotonic()
    until = started + seconds
    errors = await asyncio.gather(*(client(i, until, latencies) for i in range(clients)))
    return latencies, sum(errors), time.monotonic() - started


async def _keep_alive_phase(
    host: str, port: int, clients: int, seconds: float, paths: list[str]
) -> dict[str, Any]:
    latencies, errors, elapsed = await _clients_phase(
        clients,
        seconds,
        lambda i, until, latencies: _client(host, port, paths[i:] + paths[:i], until, latencies),
    )
    return {
        "rps": round(len(latencies) / elapsed),
        "p50_ms": _percentile(latencies, 0.5),
        "p99_ms": _percentile(latencies, 0.99),
        "errors": errors,
    }


async def _slow_phase(
    host: str, port: int, slow: int, seconds: float, paths: list[str]
) -> dict[str, Any]:
    held: list[asyncio.StreamWriter] = []
    failed = 0
    for _ in range(slow):
        try:
            _reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 5)
            writer.write(b"GET /v1/jobs HT")  # half a request line, then nothing
            held.append(writer)
        except (TimeoutError, OSError):
            failed += 1
    await asyncio.sleep(0.5)
    latencies: list[float] = []
    errors = await _client(host, port, paths, time.monotonic() + seconds, latencies)
    for writer in held:
        writer.close()
    return {
        "p50_ms_under_slow_clients": _percentile(latencies, 0.5),
        "p99_ms_under_slow_clients": _percentile(latencies, 0.99),
        "requests_under_slow_clients": len(latencies),
        "errors_under_slow_clients": errors,
        "slow_connected": slow - failed,
    }


async def _writer(host: str, port: int, name: str, until: float, latencies: list[float]) -> int:
    errors = 0
    reader, writer = await asyncio.open_connection(host, port)
    n = 0
    try:
        while time.monotonic() < until:
            body = orjson.dumps({"Job": job_to_nomad(_job(f"{name}-{n}"))})
            n += 1
            started = time.perf_counter()
            head = f"POST /v1/jobs HTTP/1.1\r\nHost: bench\r\nContent-Length: {len(body)}\r\n\r\n"
            writer.write(head.encode() + body)
            if await _read_response(reader) != 200:
                errors += 1
            latencies.append(time.perf_counter() - started)
    finally:
        writer.close()
    return errors


async def _write_phase(host: str, port: int, clients: int, seconds: float) -> dict[str, Any]:
    latencies, errors, elapsed = await _clients_phase(
        clients,
        seconds,
        lambda i, until, latencies: _writer(host, port, f"w{i}", until, latencies),
    )
    return {
        "write_rps": round(len(latencies) / elapsed),
        "write_p50_ms": _percentile(latencies, 0.5),
        "write_p99_ms": _percentile(latencies, 0.99),
        "write_errors": errors,
        "writes": len(latencies),
    }


def _write_load_main(conn: Connection, host: str, port: int, args: dict[str, Any]) -> None:
    conn.send(asyncio.run(_write_phase(host, port, args["clients"], args["write_seconds"])))


class TurnLeader(MemoryBackend):
    """A leader that answers in turns: every `turn_s`, each write queued since the last turn
    gets a canned success (an index of its own, an evaluation id), as the real leader answers
    a batch; nothing is committed, so what is measured is the API's side of a write."""

    def __init__(self, turn_s: float) -> None:
        super().__init__()
        self.turn_s = turn_s
        self._queued: list[tuple[LeaderRequest, Future[LeaderResponse]]] = []
        self._lock = threading.Lock()
        self._index = 0
        self._stop = threading.Event()
        threading.Thread(target=self._turns, name="bench-leader", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def submit(self, request: LeaderRequest) -> Future[LeaderResponse]:
        future: Future[LeaderResponse] = Future()
        with self._lock:
            self._queued.append((request, future))
        return future

    def write(self, request: LeaderRequest) -> LeaderResponse:
        return self.submit(request).result(timeout=30)

    def _turns(self) -> None:
        while not self._stop.wait(self.turn_s):
            with self._lock:
                queued, self._queued = self._queued, []
            for request, future in queued:
                self._index += 1
                future.set_result(
                    LeaderResponse(
                        request_id=request.request_id,
                        ok=True,
                        index=self._index,
                        eval_id=f"eval-{self._index}",
                        job_modify_index=self._index,
                    )
                )


def _job(job_id: str) -> Job:
    task = Task("t", "mock", {}, resources=Resources(10, 16))
    return Job(job_id, job_id, task_groups=(TaskGroup("g", 1, tasks=(task,)),))


def run_writes(clients: int, seconds: float, leader_turn_ms: float) -> dict[str, Any]:
    """The write phase (3.) on a server of its own; this process's CPU is measured over it
    (the clients run in another)."""
    leader = TurnLeader(leader_turn_ms / 1000)
    server = ApiHttpServer("127.0.0.1:0", Api(leader)).start()
    try:
        host, port = server.server_address[:2]
        ours, theirs = multiprocessing.Pipe()
        args = {"clients": clients, "write_seconds": seconds}
        load = multiprocessing.get_context("spawn").Process(
            target=_write_load_main, args=(theirs, str(host), int(port), args), daemon=True
        )
        load.start()
        before = resource.getrusage(resource.RUSAGE_SELF)
        line: dict[str, Any] = ours.recv()
        after = resource.getrusage(resource.RUSAGE_SELF)
        load.join(30)
    finally:
        server.stop()
        leader.stop()
    writes = max(1, line.pop("writes"))
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    switches = (after.ru_nvcsw - before.ru_nvcsw) + (after.ru_nivcsw - before.ru_nivcsw)
    return line | {
        "write_cpu_us": round(cpu_s / writes * 1e6, 1),
        "write_context_switches": round(switches / writes, 2),
        "leader_turn_ms": leader_turn_ms,
    }


def _load_main(conn: Connection, host: str, port: int, args: dict[str, Any]) -> None:
    paths = [f"/v1/job/bench-{i:04d}" for i in range(args["jobs"])]
    line = asyncio.run(_keep_alive_phase(host, port, args["clients"], args["seconds"], paths))
    if args["slow"]:
        line |= asyncio.run(_slow_phase(host, port, args["slow"], args["seconds"], paths))
    conn.send(line)


def _backend(jobs: int) -> MemoryBackend:
    backend = MemoryBackend()
    api = Api(backend)
    for i in range(jobs):
        body = orjson.dumps({"Job": job_to_nomad(_job(f"bench-{i:04d}"))})
        reply = api.handle(ApiRequest("POST", "/v1/jobs", {}, body))
        assert reply.status == 200, reply.body
    return backend


def run(
    jobs: int,
    clients: int,
    slow: int,
    seconds: float,
    write_seconds: float = 0.0,
    leader_turn_ms: float = 2.0,
) -> dict[str, Any]:
    server = ApiHttpServer("127.0.0.1:0", Api(_backend(jobs))).start()
    try:
        host, port = server.server_address[:2]
        ours, theirs = multiprocessing.Pipe()
        args = {"jobs": jobs, "clients": clients, "slow": slow, "seconds": seconds}
        load = multiprocessing.get_context("spawn").Process(
            target=_load_main, args=(theirs, str(host), int(port), args), daemon=True
        )
        load.start()
        line: dict[str, Any] = ours.recv()
        load.join(30)
    finally:
        server.stop()
    if write_seconds > 0:
        line |= run_writes(clients, write_seconds, leader_turn_ms)
    return {
        "bench": "api",
        "server": getattr(server, "kind", "threaded"),  # the stdlib one had no kind
        "clients": clients,
        "slow_clients": slow,
        "seconds": seconds,
        **line,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--slow", type=int, default=5000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--write-seconds", type=float, default=10.0)
    parser.add_argument("--leader-turn-ms", type=float, default=2.0)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    line = run(
        args.jobs, args.clients, args.slow, args.seconds, args.write_seconds, args.leader_turn_ms
    )
    sys.stdout.write(orjson.dumps(line).decode() + "\n")


if __name__ == "__main__":
    main()
