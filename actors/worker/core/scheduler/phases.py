"""Where a scheduling pass spends its time, for whoever watches (the worker turns each phase
into a tracing span); the core only records timestamps and counts, and only when asked.

Phases, per pass (a retried plan gives another pass):
- reconcile: desired vs actual for the job (counts of what to place, stop, update);
- feasibility: per task group, the nodes that pass the group's checks (once per pass);
- ranking: per task group, the walks that pick a node for each placement, with their counts.
  Groups' walks interleave in one placement loop, so each group's phase spans that loop less
  the feasibility passes inside it (timing each walk would cost the hot path ~5%).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

Attribute = int | str


@dataclass(frozen=True, slots=True)
class Phase:
    name: str
    start_ns: int  # wall clock, ns since the epoch
    end_ns: int
    attributes: dict[str, Attribute] = field(default_factory=dict)


class PhaseLog:
    def __init__(self) -> None:
        self.phases: list[Phase] = []
        self.attempt = 0

    def add(self, name: str, start_ns: int, end_ns: int, **attributes: Attribute) -> None:
        self.phases.append(Phase(name, start_ns, end_ns, {"attempt": self.attempt, **attributes}))


def now_ns() -> int:
    return time.time_ns()
