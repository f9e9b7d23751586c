"""Fixtures of the actors' tests: a client of the module's real redis-server
(tests/conftest.py), flushed before each test, so that every test starts from an empty
Redis whatever ran before it; and actor telemetry exported in memory (`in_memory(role)`
gives the telemetry, its span exporter and its metric reader)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Protocol

import pytest
import redis
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from actors.streams import connect
from launch.redis_server import EmbeddedRedis
from observability import Telemetry, configure

InMemory = tuple[Telemetry, InMemorySpanExporter, InMemoryMetricReader]


class Runnable(Protocol):
    def run(self, stop: threading.Event) -> None: ...


RunInThread = Callable[[Runnable], Callable[[], None]]


@pytest.fixture
def client(redis_server: EmbeddedRedis) -> redis.Redis:
    # Not closed after the test: a service thread a test leaves blocked on it would then
    # fail on a closed socket (it is a daemon, gone with the process).
    r = connect(redis_server.url)
    r.flushall()
    return r


@pytest.fixture
def in_memory() -> Iterator[Callable[[str], InMemory]]:
    made: list[Telemetry] = []

    def make(role: str) -> InMemory:
        spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
        telemetry = configure(role, role, None, span_exporter=spans, metric_reader=reader, env={})
        made.append(telemetry)
        return telemetry, spans, reader

    yield make
    for telemetry in made:
        telemetry.shutdown()


@pytest.fixture
def run_in_thread() -> Iterator[RunInThread]:
    """Start a service's loop on a thread; returns the function that stops it (and waits
    for it). Loops a test leaves running are stopped at its teardown."""
    halts: list[Callable[[], None]] = []

    def start(service: Runnable) -> Callable[[], None]:
        stop = threading.Event()
        thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
        thread.start()

        def halt() -> None:
            stop.set()
            # A loop blocked in a long read (WakeableReads) is woken until it has seen
            # `stop`: a wake between two of its reads is lost (wake.py).
            reads = getattr(service, "reads", None)
            deadline = time.monotonic() + 30
            while thread.is_alive() and time.monotonic() < deadline:
                if reads is not None:
                    reads.wake()
                thread.join(timeout=0.05)
            assert not thread.is_alive(), f"{type(service).__name__} did not stop"

        halts.append(halt)
        return halt

    yield start
    for halt in halts:
        halt()
