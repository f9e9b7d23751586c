"""bench.stream's accounting: CPU per evaluation, per process and drover's own."""

from __future__ import annotations

from bench.stream_accounting import cpu_per_eval


def test_cpu_per_eval_is_each_process_and_drovers_own_total() -> None:
    per_eval = cpu_per_eval({"api": 1.0, "leader": 2.0, "load": 0.5}, 1000)
    assert per_eval == {"api": 1.0, "leader": 2.0, "load": 0.5, "drover": 3.0}
    assert cpu_per_eval({"api": 1.0}, 0) is None  # nothing scheduled: no figure
