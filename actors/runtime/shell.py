"""What every actor shell shares: build a service, start it, run its loop on a thread.

Shells stay thin on purpose: the behaviour lives in the services and their pure cores, which
are tested without Ray. A shell only adds Ray's lifecycle: a restarted actor re-runs its
constructor, which rebuilds the service from Redis (the log, consumer groups' pending lists).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Protocol

from actors.process_settings import HEAP, pace_heap
from actors.runtime.replica import LogReplica
from contracts.codec import fast_path_fallbacks
from observability import Telemetry, configure
from observability.safe_export import ExportStats

STOP_JOIN_S = 5.0
"""How long shutdown waits for the service loop (which checks its stop event every few
hundred milliseconds at most) before flushing telemetry anyway."""


class Service(Protocol):
    def start(self) -> None: ...

    def run(self, stop: threading.Event) -> None: ...


def actor_telemetry(role: str, instance_id: str, data_dir: str | None, enabled: bool) -> Telemetry:
    """The actor's own tracer and meter: OTLP when OTEL_EXPORTER_OTLP_* is set, else JSON
    lines under `<data_dir>/telemetry/`; disabled costs (almost) nothing."""
    if not enabled:
        return Telemetry.disabled(role, instance_id)
    return configure(role, instance_id, Path(data_dir) if data_dir else None)


class ServiceShell:
    service: Any
    telemetry: Telemetry | None = None
    # Services hosted beside the main one, each looping on a thread of its own (the leader
    # hosts the eval broker), and their telemetry, keyed by role.
    companions: tuple[Service, ...] = ()
    companion_telemetry: dict[str, Telemetry] = {}

    def _serve(self, service: Service, *companions: Service) -> None:
        self.service = service
        self.companions = companions
        service.start()
        for companion in companions:
            companion.start()
        pace_heap()  # the loaded state stays out of the collector's way from now on
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=s.run, args=(self._stop,), name=type(s).__name__, daemon=True)
            for s in (service, *companions)
        ]
        for thread in self._threads:
            thread.start()

    def ready(self) -> bool:
        return all(thread.is_alive() for thread in self._threads)

    def stats(self) -> dict[str, Any]:
        stats = self.service.stats
        out = dict(stats) if isinstance(stats, dict) else dict(vars(stats))
        # Decodes of this process that the generated fast path handed to the validating one:
        # bad input only, so a count that grows on healthy traffic points at a decoder bug.
        out["fast_decode_fallbacks"] = sum(fast_path_fallbacks().values())
        replica = getattr(self.service, "replica", None)
        if isinstance(replica, LogReplica):
            # How far behind the leader this actor's replica reads (its newest entry's age
            # when applied): the first thing to look at when a follower falls behind.
            out["replica_lag_ms"] = round(replica.lag_ns / 1e6, 1)
        # Sweeps of the frozen heap (process_settings.py): the process does nothing else
        # while one runs.
        out["heap_sweeps"] = HEAP.sweeps
        out["heap_sweep_ms"] = round(HEAP.sweep_s * 1000)
        return out

    def shutdown(self) -> dict[str, ExportStats]:
        """Stop the loops, then flush what the actor recorded (spans, metrics) under the short
        shutdown export deadline. Returns the exporters' failure counts, read after that last
        flush (the caller kills the actor next, and its counters with it)."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=STOP_JOIN_S)
        for telemetry in self._telemetries():
            telemetry.shutdown()
        return self.telemetry_stats()

    def telemetry_stats(self) -> dict[str, ExportStats]:
        """Failure accounting of the actor's exporters by signal ("spans", "metrics"); a
        companion's are prefixed with its role ("broker spans")."""
        out = self.telemetry.export_stats() if self.telemetry is not None else {}
        for role, telemetry in self.companion_telemetry.items():
            out |= {f"{role} {signal}": s for signal, s in telemetry.export_stats().items()}
        return out

    def flush_telemetry(self) -> bool:
        return all([telemetry.flush() for telemetry in self._telemetries()])

    def _telemetries(self) -> list[Telemetry]:
        main = [self.telemetry] if self.telemetry is not None else []
        return main + list(self.companion_telemetry.values())
