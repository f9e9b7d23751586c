"""Demand traces: readers of real traces' formats and synthetic shapes, all giving a `Series`.

- `nab`: `timestamp,value` CSV series (the Numenta Anomaly Benchmark's format);
- `per_minute`: per-minute counts one per line, and the Azure Functions 2019 per-minute format;
- `requests`: per-request logs turned into arrivals and, with execution times, concurrency;
- `synthetic`: step, ramp, spike, diurnal sine and Poisson arrivals, with multiplicative noise;
- `loader.load_series`: one of the first three, told apart by the file's first line, parsed once
  per path and version.

Every reader is bounded (`series.MAX_BYTES`, `series.MAX_POINTS`) and raises
`contracts.errors.ValidationError` (a ValueError) naming the file, the line and the field.
"""

from contracts.traces.series import MAX_BYTES, MAX_POINTS, Series

__all__ = ["MAX_BYTES", "MAX_POINTS", "Series"]
