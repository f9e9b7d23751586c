"""bench.replica at a small scale: the recorded log holds every placement and its running
report, and replaying it yields the placements the scheduler made."""

from __future__ import annotations

from actors.state import StateStore
from bench.replica import record_log, run
from contracts.state_log import decode_entry


def test_replayed_log_holds_every_placement_and_report() -> None:
    result = run(nodes=20, jobs=4, count=10, repeat=1)
    assert result["allocs"] == 40 and result["client_updates"] == 40
    assert result["decode_us_per_alloc"] > 0 and result["apply_us_per_alloc"] > 0

    replica = StateStore()
    for raw in record_log(20, 4, 10):
        replica.apply(decode_entry(raw))
    allocs = list(replica.allocs())
    assert len(allocs) == 40
    assert {a.client_status.value for a in allocs} == {"running"}
