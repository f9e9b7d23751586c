"""bench.stream's accounting: CPU per evaluation, per process and drover's own."""

from __future__ import annotations

from bench.stream_accounting import cpu_over_load, cpu_per_eval


def test_cpu_per_eval_is_each_process_and_drovers_own_total() -> None:
    per_eval = cpu_per_eval({"api": 1.0, "leader": 2.0, "load": 0.5}, 1000)
    assert per_eval == {"api": 1.0, "leader": 2.0, "load": 0.5, "drover": 3.0}
    assert cpu_per_eval({"api": 1.0}, 0) is None  # nothing scheduled: no figure


def test_cpu_over_load_is_each_process_and_drovers_own_over_the_load_process() -> None:
    ratios = cpu_over_load({"api": 1.0, "leader": 2.0, "load": 0.5})
    assert ratios == {"api": 2.0, "leader": 4.0, "drover": 6.0}
    assert cpu_over_load({"api": 1.0, "load": 0.0}) is None  # no yardstick: no figure
