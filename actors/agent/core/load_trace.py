"""Demand traces for the mock driver's load model, replayed from their start: a thin wrapper over
`contracts.traces` (its `loader.load_series`), which reads three forms:

- a `timestamp,value` CSV, as the Numenta Anomaly Benchmark (NAB) ships its series;
- per-minute counts, one number per line (minute 0, 1, 2...);
- the Azure Functions 2019 per-minute format (`HashOwner,HashApp,HashFunction,Trigger,1,...,
  1440`), summed per minute.

Per-minute values hold for their minute; the load model turns a count into MHz with its
`per_unit_mhz`. A value is the group's CPU demand in MHz from its timestamp until the next one;
after the last point its value holds. Files are bounded (MAX_TRACE_BYTES, MAX_TRACE_POINTS) and
parsed once per path and version: thousands of allocations replay the same trace.
"""

from __future__ import annotations

from contracts.traces import series as _series
from contracts.traces.loader import load_series
from contracts.traces.series import Series

MAX_TRACE_BYTES = _series.MAX_BYTES
MAX_TRACE_POINTS = _series.MAX_POINTS

TraceSeries = Series


def load_trace(path: str) -> TraceSeries:
    """The trace at `path` (parsed once while the file is unchanged); raises ValueError
    saying what is wrong and where."""
    return load_series(path, max_bytes=MAX_TRACE_BYTES, max_points=MAX_TRACE_POINTS)
