"""Exporter wrappers that never let a broken exporter reach the caller.

Tracing must never break scheduling: an exporter that raises, returns failure or hangs (a
collector that went away) is contained here. Failures are counted and logged once (then once
more when exports recover). With `timeout_s`, each export runs on one background thread and
the caller waits at most that long; while a timed-out export is still stuck, later batches are
dropped at once (and counted) instead of queueing behind it, so even `force_flush` and
`shutdown` return in bounded time. `limit_timeout` shortens that deadline (Telemetry does so at
shutdown), and `shutdown` reaches the inner exporter even past a stuck export: for OTLP that
is what aborts the stuck export's retries. `stats()` reads the accounting.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, TypeVar

from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ExportStats:
    """One safe exporter's failure accounting (plain values: it crosses Ray calls)."""

    failures: int
    """Exports (and flushes, shutdowns) that raised, returned failure, timed out or were
    dropped."""
    dropped: int
    """Batches dropped without trying because an earlier export was still stuck."""
    last_error: str | None
    stuck: bool
    """An export abandoned at its deadline is still running."""


class _Guard:
    """Shared failure accounting and the optional deadline thread."""

    def __init__(self, name: str, timeout_s: float | None) -> None:
        self.name = name
        self.timeout_s = timeout_s
        self.failures = 0
        """Exports that raised, returned failure or timed out."""
        self.dropped = 0
        """Batches dropped without trying because an earlier export was still stuck."""
        self.last_error: str | None = None
        self._lock = threading.Lock()
        self._failing = False
        self._executor: ThreadPoolExecutor | None = None
        self._inflight: Future[Any] | None = None
        self._waiters: set[threading.Event] = set()
        """One per caller waiting on an export: woken when the deadline is shortened."""

    def _record_failure(self, what: str, exc: BaseException | None = None) -> None:
        with self._lock:
            self.failures += 1
            self.last_error = what
            first = not self._failing
            self._failing = True
        if first:
            log.warning(
                "telemetry exporter %s failed (%s); further failures are counted, not logged",
                self.name,
                what,
                exc_info=exc,
            )

    def _record_success(self) -> None:
        if self._failing:
            with self._lock:
                recovered = self._failing
                self._failing = False
            if recovered:
                log.info(
                    "telemetry exporter %s recovered after %d failure(s)", self.name, self.failures
                )

    def _stuck(self) -> bool:
        """With the lock held: an export is still running past its deadline."""
        return self._inflight is not None and not self._inflight.done()

    @property
    def stuck(self) -> bool:
        with self._lock:
            return self._stuck()

    def stats(self) -> ExportStats:
        with self._lock:
            return ExportStats(self.failures, self.dropped, self.last_error, self._stuck())

    def limit_timeout(self, timeout_s: float) -> None:
        with self._lock:
            if self.timeout_s is None or timeout_s < self.timeout_s:
                self.timeout_s = timeout_s
                for wake in self._waiters:
                    wake.set()

    def call(self, fn: Callable[[], T], ok: Callable[[T], bool], failed: T) -> T:
        """Run `fn` under the guard: `failed` if it raises, times out or is skipped."""
        timeout_s = self.timeout_s
        if timeout_s is None:
            try:
                result = fn()
            except Exception as exc:
                self._record_failure(f"{type(exc).__name__}: {exc}", exc)
                return failed
        else:
            with self._lock:
                if self._stuck():
                    self.dropped += 1
                    self.failures += 1
                    return failed
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(
                        max_workers=1, thread_name_prefix=f"telemetry-{self.name}"
                    )
                future = self._executor.submit(fn)
                self._inflight = future
            try:
                result = self._await(future)
            except FutureTimeout:
                self._record_failure(f"timed out after {self.timeout_s:g}s")
                return failed
            except Exception as exc:
                self._record_failure(f"{type(exc).__name__}: {exc}", exc)
                return failed
        if ok(result):
            self._record_success()
        else:
            self._record_failure(f"returned {result!r}")
        return result

    def _await(self, future: Future[T]) -> T:
        """The future's result, or FutureTimeout once `timeout_s` has passed since now; a
        deadline shortened meanwhile (`limit_timeout`) applies to this wait too, so that an
        export already waiting when shutdown begins is cut off at the shutdown deadline."""
        started = time.monotonic()
        wake = threading.Event()
        future.add_done_callback(lambda _: wake.set())
        with self._lock:
            self._waiters.add(wake)
        try:
            while True:
                wake.clear()
                if future.done():
                    return future.result()
                assert self.timeout_s is not None
                remaining = started + self.timeout_s - time.monotonic()
                if remaining <= 0:
                    raise FutureTimeout()
                wake.wait(remaining)
        finally:
            with self._lock:
                self._waiters.discard(wake)

    def shut(self, fn: Callable[[], object]) -> None:
        """Shut the inner exporter down, then release the export thread. While an export is
        stuck the shutdown cannot queue behind it (it would be dropped, leaving the export to
        retry on), so it runs on a thread of its own, still within the deadline."""
        if self.timeout_s is None or not self.stuck:
            self.call(fn, lambda _: True, None)
        else:
            timeout_s = self.timeout_s
            errors: list[BaseException] = []

            def run() -> None:
                try:
                    fn()
                except Exception as exc:
                    errors.append(exc)

            thread = threading.Thread(
                target=run, name=f"telemetry-{self.name}-shutdown", daemon=True
            )
            thread.start()
            thread.join(timeout_s)
            if thread.is_alive():
                self._record_failure(f"shutdown timed out after {timeout_s:g}s")
            elif errors:
                error = errors[0]
                self._record_failure(f"{type(error).__name__}: {error}", error)
        self.close()

    def close(self) -> None:
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)


class _GuardAccounting:
    """What both safe exporters report of their guard."""

    _guard: _Guard

    @property
    def failures(self) -> int:
        return self._guard.failures

    @property
    def dropped(self) -> int:
        return self._guard.dropped

    @property
    def last_error(self) -> str | None:
        return self._guard.last_error

    @property
    def stuck(self) -> bool:
        """An export abandoned at its deadline is still running in the background."""
        return self._guard.stuck

    def stats(self) -> ExportStats:
        return self._guard.stats()

    def limit_timeout(self, timeout_s: float) -> None:
        """From now on wait at most `timeout_s` for an export (never longer than before)."""
        self._guard.limit_timeout(timeout_s)


class SafeSpanExporter(_GuardAccounting, SpanExporter):
    """Wraps a SpanExporter: `export` never raises and (with `timeout_s`) never blocks longer
    than that. `failures`, `dropped` and `last_error` (or `stats()`) say what went wrong."""

    def __init__(
        self, inner: SpanExporter, *, name: str | None = None, timeout_s: float | None = None
    ) -> None:
        self.inner = inner
        self._guard = _Guard(name or type(inner).__name__, timeout_s)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        batch = list(spans)
        return self._guard.call(
            lambda: self.inner.export(batch),
            lambda result: result is SpanExportResult.SUCCESS,
            SpanExportResult.FAILURE,
        )

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._guard.call(lambda: bool(self.inner.force_flush(timeout_millis)), bool, False)

    def shutdown(self) -> None:
        self._guard.shut(self.inner.shutdown)


class SafeMetricExporter(_GuardAccounting, MetricExporter):
    """The same guard for a MetricExporter (keeps the inner exporter's temporality and
    aggregation preferences)."""

    def __init__(
        self, inner: MetricExporter, *, name: str | None = None, timeout_s: float | None = None
    ) -> None:
        super().__init__(
            preferred_temporality=inner._preferred_temporality,
            preferred_aggregation=inner._preferred_aggregation,
        )
        self.inner = inner
        self._guard = _Guard(name or type(inner).__name__, timeout_s)

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        return self._guard.call(
            lambda: self.inner.export(metrics_data, timeout_millis=timeout_millis, **kwargs),
            lambda result: result is MetricExportResult.SUCCESS,
            MetricExportResult.FAILURE,
        )

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self._guard.call(lambda: bool(self.inner.force_flush(timeout_millis)), bool, False)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self._guard.shut(lambda: self.inner.shutdown(timeout_millis=timeout_millis, **kwargs))
