"""The actor shell without Ray: a service's loop on a thread, stopped by shutdown, which flushes
the actor's telemetry and answers with its exporters' failure accounting (what
DroverSystem.stop() gathers before it kills the actor)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from actors.process_settings import paced_heap
from actors.runtime.shell import ServiceShell
from contracts import Evaluation
from contracts.codec import CodecError, from_wire
from observability import Telemetry, configure
from observability.safe_export import ExportStats


class CollectorGone(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        raise ConnectionError("collector gone")


class Idle:
    """A service whose loop only waits for its stop event."""

    def __init__(self) -> None:
        self.stats = {"starts": 0}
        self.stopped = threading.Event()

    def start(self) -> None:
        self.stats["starts"] += 1

    def run(self, stop: threading.Event) -> None:
        stop.wait()
        self.stopped.set()


class Shell(ServiceShell):
    def __init__(self, telemetry: Telemetry) -> None:
        self.telemetry = telemetry
        self._serve(Idle())


@pytest.fixture(autouse=True)
def plain_heap_afterwards() -> Iterator[None]:
    with paced_heap():  # _serve paces this process's heap: undone after the test
        yield


def test_shutdown_stops_the_loop_and_answers_the_export_failures() -> None:
    telemetry = configure("worker", "w1", None, span_exporter=CollectorGone(), env={})
    shell = Shell(telemetry)
    assert shell.ready() and shell.stats()["starts"] == 1
    with telemetry.tracer.start_as_current_span("lost"):
        pass
    answered = shell.shutdown()
    assert shell.service.stopped.is_set() and not shell.ready()
    assert answered == {"spans": ExportStats(1, 0, "ConnectionError: collector gone", False)}
    assert shell.telemetry_stats() == answered  # still readable once shut down


def test_disabled_telemetry_answers_no_exporters() -> None:
    shell = Shell(Telemetry.disabled("worker", "w2"))
    assert shell.shutdown() == {} and not shell.ready()


def test_stats_count_the_fast_decoders_fallbacks() -> None:
    """Bad input is handed from the generated decoder to the validating one; the actor's
    stats show how often, so a count growing on healthy traffic points at a decoder bug."""
    shell = Shell(Telemetry.disabled("worker", "w1"))
    try:
        before = shell.stats()["fast_decode_fallbacks"]
        with pytest.raises(CodecError, match=r"\$\.ID: expected a string"):
            from_wire(Evaluation, {"ID": 7})
        assert shell.stats()["fast_decode_fallbacks"] == before + 1
    finally:
        shell.shutdown()


def test_stats_say_how_far_behind_the_leader_the_replica_reads() -> None:
    from actors.runtime.replica import LogReplica
    from actors.streams.names import StreamNames

    class Following(Idle):
        def __init__(self) -> None:
            super().__init__()
            self.replica = LogReplica(None, StreamNames("lag"))  # type: ignore[arg-type]
            self.replica.lag_ns = 1_234_567

    class FollowingShell(ServiceShell):
        def __init__(self, telemetry: Telemetry) -> None:
            self.telemetry = telemetry
            self._serve(Following())

    shell = FollowingShell(Telemetry.disabled("t"))
    try:
        assert shell.stats()["replica_lag_ms"] == 1.2
    finally:
        shell.shutdown()
    plain = Shell(Telemetry.disabled("t"))
    try:
        assert "replica_lag_ms" not in plain.stats()  # no replica, no figure
    finally:
        plain.shutdown()
