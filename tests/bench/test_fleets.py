"""bench.fleets at a small scale: fleets are declared and deleted through the real API, and
however many are declared, one process (the hosting agent) is all they add."""

from __future__ import annotations

from bench.fleets import run


def test_fleets_cost_one_process_and_leave_when_deleted() -> None:
    # A short rest before each measurement (the bench's own is 3 s, for its memory
    # figures): the processes are counted the same at once, and the hosting agent's
    # whole process is far more memory than the rest would settle.
    result = run(fleets=3, instances=1, settle_s=1.0)
    assert result["fleets_declared"] == 3 and result["fleets_left_after_delete"] == 0
    assert result["processes_after"] - result["processes_before"] == 1
    assert result["mb_after"] > result["mb_before"] > 0
