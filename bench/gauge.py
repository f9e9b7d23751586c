"""How fast the machine runs plain Python right now: `machine_ms`, for every bench line.

The same build on this machine needs from 1.7 to 4 ms of CPU per evaluation from one hour to
the next (same CPU percentages, half the throughput), so a figure alone says little and an
A/B pair only says something if both halves ran at one speed. The gauge is a fixed workload
that uses no drover code (a change of ours cannot move it): build, serialise, parse and sort
a few thousand small records, the interpreter's and the memory's work that ours is made of.
Its median over a few runs, taken when a phase has ended, says how fast that stretch was:
compare runs whose `machine_ms` agree, or scale by it.
"""

from __future__ import annotations

import json
import statistics
import time

RECORDS = 2_000
RUNS = 7


def _workload() -> int:
    rows = [
        {"id": i, "name": f"node-{i}", "tags": [i % 7, i % 11], "up": i % 3 == 0}
        for i in range(RECORDS)
    ]
    parsed = json.loads(json.dumps(rows))
    parsed.sort(key=lambda row: (row["tags"][0], row["name"]))
    return sum(row["id"] for row in parsed if row["up"])


def machine_ms(runs: int = RUNS) -> float:
    """Median wall time of the fixed workload, in milliseconds."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        _workload()
        times.append(time.perf_counter() - started)
    return round(statistics.median(times) * 1000, 2)
