"""Streamed responses on the HTTP server (actors/api/server.py) with the event stream on a
real socket: chunked NDJSON sent as the state changes, heartbeats, and a bounded cost for
clients that leave, stop reading, or come too many."""

from __future__ import annotations

import http.client
import socket
import time
from collections.abc import Callable, Iterator

import orjson
import pytest

from actors.api.core import Api
from actors.api.core.event_broker import EventBroker
from actors.api.core.events import EventSource, EventTranslator, job_event
from actors.api.core.memory_backend import MemoryBackend
from actors.api.server import ApiHttpServer
from contracts import Job, Resources, Task, TaskGroup
from contracts.state_log import LogEntry, StateChange, UpsertJob


class Agent:
    """A MemoryBackend whose store feeds an event broker as the API's replica does, served
    over HTTP."""

    def __init__(self, broker: EventBroker, idle_timeout_s: float = 30.0) -> None:
        self.backend = MemoryBackend()
        self.broker = broker
        self.backend.events = broker  # type: ignore[attr-defined]
        self.source = EventSource(broker.publish, broker.reset, EventTranslator())
        self.source.attach(self.backend.store)
        self.server = ApiHttpServer(
            "127.0.0.1:0", Api(self.backend), idle_timeout_s=idle_timeout_s
        ).start()
        self.host, self.port = (
            str(self.server.server_address[0]),
            int(self.server.server_address[1]),
        )

    def commit(self, change: StateChange) -> int:
        store = self.backend.store
        index = store.latest_index() + 1
        entry = LogEntry(index, 1, store.stamped(change, index))
        store.apply(entry)
        self.source.on_entry(entry, store)
        with self.backend.changed:
            self.backend.changed.notify_all()
        return index


@pytest.fixture
def agent() -> Iterator[Callable[..., Agent]]:
    made: list[Agent] = []

    def make(broker: EventBroker | None = None, **options: float) -> Agent:
        made.append(Agent(broker or EventBroker(), **options))
        return made[-1]

    yield make
    for each in made:
        each.server.stop()


def job(job_id: str, pad: int = 0) -> Job:
    task = Task(name="t", driver="mock", resources=Resources(cpu=100, memory_mb=64))
    group = TaskGroup("g", 1, tasks=(task,))
    return Job(id=job_id, name=job_id, task_groups=(group,), meta={"pad": "x" * pad})


def wait_until(check: Callable[[], bool], what: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_events_arrive_as_chunked_ndjson_when_the_state_changes(
    agent: Callable[..., Agent],
) -> None:
    a = agent(EventBroker(heartbeat_s=60.0))  # no heartbeat in this test's time
    conn = http.client.HTTPConnection(a.host, a.port, timeout=10)
    conn.request("GET", "/v1/event/stream?topic=Job:web&topic=Evaluation:web")
    response = conn.getresponse()
    assert response.status == 200
    assert response.getheader("Transfer-Encoding") == "chunked"
    assert response.getheader("Content-Type") == "application/json"
    a.commit(UpsertJob(job("db")))  # filtered out
    index = a.commit(UpsertJob(job("web")))
    line = orjson.loads(response.readline())
    assert line["Index"] == index
    assert [(e["Topic"], e["Type"], e["Key"]) for e in line["Events"]] == [
        ("Job", "JobRegistered", "web")
    ]
    assert line["Events"][0]["Payload"]["Job"]["ID"] == "web"
    response.close()  # the client leaves
    conn.close()
    wait_until(lambda: a.broker.subscribers == 0, "the stream's place was not freed")


def test_an_idle_stream_sends_heartbeats(agent: Callable[..., Agent]) -> None:
    a = agent(EventBroker(heartbeat_s=0.1))
    conn = http.client.HTTPConnection(a.host, a.port, timeout=10)
    conn.request("GET", "/v1/event/stream")
    response = conn.getresponse()
    started = time.monotonic()
    assert [response.readline() for _ in range(3)] == [b"{}\n"] * 3
    assert time.monotonic() - started >= 0.25
    response.close()
    conn.close()


def test_subscribers_past_the_limit_are_refused_and_a_stop_frees_every_place(
    agent: Callable[..., Agent],
) -> None:
    a = agent(EventBroker(max_subscribers=1))
    first = http.client.HTTPConnection(a.host, a.port, timeout=10)
    first.request("GET", "/v1/event/stream")
    held = first.getresponse()  # kept open (a response dropped would close its socket)
    assert held.status == 200
    second = http.client.HTTPConnection(a.host, a.port, timeout=10)
    second.request("GET", "/v1/event/stream")
    refused = second.getresponse()
    assert refused.status == 429
    assert refused.read().startswith(b"too many event stream subscribers (1)")
    a.server.stop()
    assert a.broker.subscribers == 0


def test_a_client_that_stops_reading_is_let_go_and_costs_no_more_than_the_buffer(
    agent: Callable[..., Agent],
) -> None:
    a = agent(EventBroker(heartbeat_s=0.05, max_items=16), idle_timeout_s=0.5)
    # A small receive buffer, set before connecting (the window scale is agreed in the
    # handshake), and enlarged once the server has let go: with it set only after connect,
    # the megabytes the server had sent came through 4 KB at a time, over minutes.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(10)
    sock.connect((a.host, a.port))
    sock.sendall(b"GET /v1/event/stream HTTP/1.1\r\nHost: t\r\n\r\n")
    wait_until(lambda: a.broker.subscribers == 1, "no subscriber")
    deadline = time.monotonic() + 30
    n = 0
    while a.broker.subscribers:  # never read: the socket fills, the server stops waiting
        assert time.monotonic() < deadline, "the silent client was kept"
        n += 1
        a.broker.publish(n, [job_event(job(f"j{n}", pad=64_000), "JobRegistered", n)])
        assert a.broker.oldest_index() >= n - 15  # the buffer stays bounded
        time.sleep(0.01)
    # Let go: what the server had sent is read at once.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    received = b""
    while chunk := sock.recv(1 << 16):
        received += chunk
    assert received.startswith(b"HTTP/1.1 200 OK")  # then the server closed the connection
    sock.close()


def test_a_server_that_stops_ends_its_streams_as_finished_responses(
    agent: Callable[..., Agent],
) -> None:
    """As Nomad's handler returning on shutdown: the client reads the stream's end, not a
    connection cut mid-response ("Response ended prematurely")."""
    a = agent(EventBroker(heartbeat_s=60.0))
    conn = http.client.HTTPConnection(a.host, a.port, timeout=10)
    conn.request("GET", "/v1/event/stream?topic=Job:web")
    response = conn.getresponse()
    index = a.commit(UpsertJob(job("web")))
    assert orjson.loads(response.readline())["Index"] == index
    a.server.stop()
    assert response.read() == b""  # http.client raises IncompleteRead on a cut chunked body
    assert response.isclosed()
    conn.close()
