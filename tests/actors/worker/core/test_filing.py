"""An idle worker files queued allocations once neither deliveries nor log entries come,
or when too many wait unfiled."""

from __future__ import annotations

from actors.worker.core.filing import FilingPace


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_files_once_quiet_and_not_while_the_log_or_deliveries_keep_coming() -> None:
    clock = Clock()
    pace = FilingPace(quiet_s=1.0, backlog=1_000, clock=clock)
    assert pace.should_file(10)  # nothing came yet: a fresh worker is idle
    pace.busy()  # a log entry, or a delivery
    clock.now += 0.5
    assert not pace.should_file(10)
    clock.now += 0.4
    pace.busy()  # a steady stream of small jobs keeps it busy...
    clock.now += 0.9
    assert not pace.should_file(10)
    clock.now += 0.1  # ... until it stops for quiet_s
    assert pace.should_file(10)


def test_files_while_busy_once_the_backlog_is_too_long() -> None:
    clock = Clock()
    pace = FilingPace(quiet_s=1.0, backlog=1_000, clock=clock)
    pace.busy()
    assert not pace.should_file(1_000)
    assert pace.should_file(1_001)
