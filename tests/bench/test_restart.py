"""bench.restart on a small log: the figures it prints are the ones it measured, and the
run itself checks what the benchmark claims (the restarted leader and a follower hold every
allocation, the log is cut to its tail)."""

from __future__ import annotations

from bench import restart


def test_a_small_restart_run_reports_a_bounded_log_and_complete_stores() -> None:
    line = restart.run(nodes=40, jobs=12, count=25, keep_tail=5, reports=2)
    assert line["allocations"] == 12 * 25
    assert line["follower_allocations"] == 12 * 25
    # 1 nodes entry, 5 per job (registration, plan, 2 reports, eval status); after the snapshot, the
    # tail before it and the restarted leader's probe registration.
    assert line["log_entries_before"] == 1 + 5 * 12
    assert line["log_entries"] == 5 + 1
    assert line["snapshot_chunks"] >= 4 and line["snapshot_bytes"] > 0
    for key in ("restart_seconds", "replay_restart_seconds", "redis_used_memory_bytes"):
        assert line[key] > 0
