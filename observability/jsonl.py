"""JSON-lines exporters (the no-collector default) and the reader for what they wrote.

Each actor instance writes its own two files in `<data_dir>/telemetry/`:
`spans-<role>-<instance>.jsonl` (one `SpanRecord.to_json()` object per line) and
`metrics-<role>-<instance>.jsonl` (one `MetricsData.to_json()` object per export). Files are
appended to, so a restarted actor keeps adding to its file. `load_spans(directory)` reads every
span file back, skipping lines that do not parse (a torn last line after a crash).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import orjson
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from observability.records import SpanRecord

log = logging.getLogger(__name__)

TELEMETRY_DIR = "telemetry"
SPAN_FILE_GLOB = "spans-*.jsonl"
METRIC_FILE_GLOB = "metrics-*.jsonl"

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _safe(part: str) -> str:
    return _UNSAFE.sub("_", part).strip("._") or "x"


def telemetry_dir(data_dir: Path) -> Path:
    return data_dir / TELEMETRY_DIR


def span_file(directory: Path, role: str, instance_id: str) -> Path:
    return directory / f"spans-{_safe(role)}-{_safe(instance_id)}.jsonl"


def metric_file(directory: Path, role: str, instance_id: str) -> Path:
    return directory / f"metrics-{_safe(role)}-{_safe(instance_id)}.jsonl"


class _LineWriter:
    """Appends whole lines to one file under a lock; opened lazily, reopened after close."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._file: IO[bytes] | None = None
        self._closed = False

    def write(self, lines: Iterable[bytes]) -> None:
        payload = b"".join(line + b"\n" for line in lines)
        if not payload:
            return
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self.path} is closed")
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = self.path.open("ab")
            self._file.write(payload)
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._file is not None:
                self._file.close()
                self._file = None


class JsonlSpanExporter(SpanExporter):
    def __init__(self, path: Path) -> None:
        self.path = path
        self._writer = _LineWriter(path)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = [orjson.dumps(SpanRecord.from_span(span).to_json()) for span in spans]
        self._writer.write(lines)
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True  # every export is written and flushed before it returns

    def shutdown(self) -> None:
        self._writer.close()


class JsonlMetricExporter(MetricExporter):
    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self._writer = _LineWriter(path)

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        self._writer.write([metrics_data.to_json(indent=None).encode()])
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self._writer.close()


def span_files(path: Path) -> list[Path]:
    """The span files in a telemetry directory (or a data directory holding `telemetry/`),
    or `[path]` for a single file."""
    if path.is_file():
        return [path]
    directory = path / TELEMETRY_DIR if (path / TELEMETRY_DIR).is_dir() else path
    return sorted(directory.glob(SPAN_FILE_GLOB))


def iter_span_file(path: Path) -> Iterator[SpanRecord]:
    with path.open("rb") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                yield SpanRecord.from_json(orjson.loads(line))
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
                log.debug("skipping unreadable span at %s:%d", path, number)


def load_spans(path: Path) -> list[SpanRecord]:
    """Every span in every span file under `path`, ordered by start time."""
    spans = [record for file in span_files(path) for record in iter_span_file(file)]
    spans.sort(key=lambda s: (s.start_ns, s.end_ns, s.span_id))
    return spans
