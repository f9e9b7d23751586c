"""The machine gauge: a fixed workload of plain Python, timed."""

from __future__ import annotations

from bench import gauge


def test_the_workload_is_fixed_and_its_median_is_reported_in_milliseconds() -> None:
    assert gauge._workload() == gauge._workload() == sum(range(0, gauge.RECORDS, 3))
    readings = [gauge.machine_ms(runs=3) for _ in range(2)]
    assert all(0 < ms < 10_000 for ms in readings), readings
