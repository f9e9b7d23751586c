"""When an idle worker files the allocations its job-scoped store queued
(actors/state/job_scoped.py).

Queued records are filed anyway when their job is next evaluated here; filing them in idle
time only spares that evaluation the work. A worker is idle for this purpose once neither a
delivery nor a log entry came for `quiet_s`: a gap between deliveries in a burst is not idle
time, and neither is a stream of small jobs the leader schedules itself (the worker gets no
delivery, yet the machine is busy committing them: filing then took a tenth of the worker's
CPU from the leader, for records no evaluation here may ever read). Past `backlog`
allocations unfiled, the worker files anyway, busy or not, so that the queues of jobs
nobody evaluates again stay bounded.
"""

from __future__ import annotations

import time
from collections.abc import Callable

# Filing waits until neither a delivery nor a log entry came for this long...
QUIET_S = 1.0
# ... unless this many allocations wait unfiled.
BACKLOG = 250_000


class FilingPace:
    def __init__(
        self,
        quiet_s: float = QUIET_S,
        backlog: int = BACKLOG,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.quiet_s = quiet_s
        self.backlog = backlog
        self.clock = clock
        self._last_busy = float("-inf")

    def busy(self) -> None:
        """A delivery came, or the log grew."""
        self._last_busy = self.clock()

    def should_file(self, unfiled: int) -> bool:
        return unfiled > self.backlog or self.clock() - self._last_busy >= self.quiet_s
