"""The capacity model's ledger: the excess lost (the default), or queued with a wait SLO, every
integral checked against a hand computation or a fine-grained numeric one."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.experiments.core.capacity import Ledger, QueueModel, Segment


def seg(start: float, end: float, demand: float, capacity: float) -> Segment:
    return Segment(start, end, demand, capacity, ready=1, count=1)


def test_without_a_queue_the_excess_is_lost() -> None:
    ledger = Ledger()
    ledger.add(seg(0, 10, 15, 10))
    ledger.add(seg(10, 20, 5, 10))
    assert ledger.requests == 200 and ledger.served == 150
    assert ledger.violation_requests == 50 and ledger.violation_s == 10
    assert ledger.backlog == 0 and ledger.mean_wait_s == 0


def test_a_burst_queues_and_drains() -> None:
    # 15 rps on 10 for 10 s: the backlog grows to 50; then 5 rps drains it at 5/s in 10 s
    ledger = Ledger(queue=QueueModel(slo_wait_s=2.0))
    ledger.add(seg(0, 10, 15, 10))
    assert ledger.backlog == pytest.approx(50)
    assert ledger.served == pytest.approx(100)
    # waits grow 0 -> 5 s; a request arriving after b = 20 (t = 4 s) waits more than 2 s
    assert ledger.violation_s == pytest.approx(6)
    assert ledger.violation_requests == pytest.approx(15 * 6)
    ledger.add(seg(10, 30, 5, 10))
    assert ledger.backlog == 0 and ledger.max_backlog == pytest.approx(50)
    assert ledger.served == pytest.approx(ledger.requests)  # everything served in the end
    # second segment: b = 50 - 5t for 10 s, waits b / 10 > 2 while b > 20: 6 s
    assert ledger.violation_s == pytest.approx(12)
    # waits: 15 rps x mean 2.5 s x 10 s, then 5 rps x mean 2.5 s x 10 s (then none)
    assert ledger.wait_request_s == pytest.approx(15 * 2.5 * 10 + 5 * 2.5 * 10)
    assert ledger.mean_wait_s == pytest.approx(ledger.wait_request_s / 250)  # 150 + 100 requests


def test_with_nothing_ready_every_arrival_is_late() -> None:
    ledger = Ledger(queue=QueueModel(slo_wait_s=60.0))
    ledger.add(seg(0, 5, 2, 0))
    assert ledger.backlog == 10 and ledger.violation_requests == 10 and ledger.violation_s == 5
    ledger.add(seg(5, 10, 0, 0))  # no arrivals, no violation time
    assert ledger.violation_s == 5


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0.1, 20), st.floats(0, 30), st.floats(0.5, 30)),
        min_size=1,
        max_size=6,
    ),
    st.floats(0, 5),
)
def test_the_exact_integrals_match_a_fine_numeric_queue(
    pieces: list[tuple[float, float, float]], slo_s: float
) -> None:
    ledger = Ledger(queue=QueueModel(slo_wait_s=slo_s))
    t = 0.0
    backlog = late = waits = 0.0
    step = 0.0005
    for duration, d, c in pieces:
        ledger.add(seg(t, t + duration, d, c))
        for _ in range(round(duration / step)):
            wait = backlog / c
            waits += d * step * wait
            if wait > slo_s:
                late += d * step
            backlog = max(0.0, backlog + (d - c) * step)
        t += duration
    scale = max(1.0, ledger.requests)
    assert ledger.backlog == pytest.approx(backlog, abs=0.02 * scale)
    assert ledger.violation_requests == pytest.approx(late, abs=0.02 * scale)
    assert ledger.wait_request_s == pytest.approx(waits, abs=0.02 * max(1.0, waits) + 0.05)
