"""Fixtures for the CLI tests.

- `cluster`: drover in this process, one per test module: the leader, broker, one worker and
  a simulated client agent as services on threads (the same services the Ray actors wrap),
  the API's backend and its HTTP server on a free loopback port, on the module's embedded
  Redis. It starts in well under a second, where a `DroverSystem` takes 6-10 s.
- `canned`: a tiny HTTP server answering canned JSON, which records every request: for the
  output and error paths that need no scheduler.
- `cli`: runs `drover ARGS...` in process and returns (exit code, stdout, stderr).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import orjson
import pytest

from actors.agent.core import FleetSpec, builtin_drivers, simulated_nodes
from actors.agent.service import AgentService
from actors.api.core import Api
from actors.api.server import ApiHttpServer
from actors.api.service import ApiService
from actors.broker.service import BrokerService
from actors.leader.service import LeaderService
from actors.streams import connect
from actors.streams.names import StreamNames
from actors.worker.service import WorkerService
from launch.cli import main
from launch.redis_server import EmbeddedRedis

FLEET = FleetSpec(name="sim", count=3, cpu_mhz=4000, memory_mb=8192, disk_mb=20_000)

Cli = Callable[..., tuple[int, str, str]]


@dataclass
class Cluster:
    address: str
    leader: LeaderService
    names: StreamNames


@pytest.fixture(scope="module")
def cluster(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    names = StreamNames("cli")
    connect(redis_server.url).flushall()
    broker = BrokerService(connect(redis_server.url), names, capacity=2)
    leader = LeaderService(connect(redis_server.url), names, broker=broker)
    services: list[Any] = [
        leader,
        broker,
        WorkerService("worker-1", connect(redis_server.url), names),
        AgentService(
            "sim",
            connect(redis_server.url),
            names,
            simulated_nodes(FLEET),
            builtin_drivers(data_dir=tmp_path_factory.mktemp("allocs")),
        ),
    ]
    stop = threading.Event()
    threads = []
    for service in services:
        service.start()
        thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
        thread.start()
        threads.append(thread)
    api = ApiService(connect(redis_server.url), names, leader.submit).start()
    http = ApiHttpServer("127.0.0.1:0", Api(api)).start()
    try:
        deadline = time.monotonic() + 60
        while len(list(api.snapshot().nodes())) < FLEET.count:  # the agent registered them
            assert time.monotonic() < deadline, "the agent's nodes never registered"
            time.sleep(0.05)
        yield Cluster(http.address, leader, names)
    finally:
        http.stop()
        api.stop()
        stop.set()
        for thread in threads:
            thread.join(timeout=30)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def agent_cli(cluster: Cluster, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> Cli:
    """`cli` pointed at the module's cluster through DROVER_ADDR, as a user would."""
    monkeypatch.setenv("DROVER_ADDR", cluster.address)
    monkeypatch.delenv("DROVER_TOKEN", raising=False)
    return cli


# -- a canned HTTP server ---------------------------------------------------------------------


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any


@dataclass
class Canned:
    """Answers `routes[(method, path)] = (status, body, index)`; anything else is a 404."""

    address: str = ""
    routes: dict[tuple[str, str], tuple[int, Any, int]] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    turns: dict[tuple[str, str], list[Any]] = field(default_factory=dict)

    def answer(self, method: str, path: str, body: Any, status: int = 200, index: int = 0) -> None:
        self.routes[(method, path)] = (status, body, index)

    def answer_in_turn(self, method: str, path: str, bodies: list[Any]) -> None:
        """Each call gets the next body; the last one repeats."""
        self.turns[(method, path)] = list(bodies)


@pytest.fixture
def canned() -> Iterator[Canned]:
    state = Canned()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _serve(self) -> None:
            url = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            state.requests.append(
                Recorded(
                    self.command,
                    url.path,
                    dict(parse_qsl(url.query, keep_blank_values=True)),
                    dict(self.headers),
                    orjson.loads(raw) if raw else None,
                )
            )
            status, body, index = state.routes.get(
                (self.command, url.path), (404, f"no route {url.path}", 0)
            )
            turns = state.turns.get((self.command, url.path))
            if turns:
                status, body = 200, turns.pop(0) if len(turns) > 1 else turns[0]
            payload = body.encode() if isinstance(body, str) else orjson.dumps(body)
            self.send_response(status)
            self.send_header("Content-Length", str(len(payload)))
            if index:
                self.send_header("X-Nomad-Index", str(index))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_DELETE = _serve

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    host, port = server.server_address[:2]
    state.address = f"http://{host}:{port}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)
