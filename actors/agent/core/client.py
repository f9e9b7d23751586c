"""The client core: every allocation runner of the nodes one agent hosts.

In simulated mode one agent stands in for thousands of virtual nodes (as
nomad-nodesim does), so a tick must not cost O(all allocations): runners are stepped
only when a new record arrives or when their drivers said something may have changed
(`TaskHandle.wake_at`, kept on a heap). A mock task that runs forever costs nothing
until it is stopped.

The actor shell feeds allocation records from the state log into `apply_allocs`, calls
`tick` periodically and commits what it returns as one `UpdateAllocsClientStatus`. It
must retry a batch it failed to deliver: a runner reports each change once.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Iterable, Mapping

from actors.agent.core.drivers import Driver
from actors.agent.core.runner import AllocRunner
from contracts import Allocation, ClientStatus, Job
from contracts.state_log import AllocClientUpdate

JobLookup = Callable[[str, str, int], Job | None]
"""(namespace, job_id, version) -> that version of the job, or None."""


class _WakeQueue:
    """Per-key wake-up times on one heap; re-arming leaves stale entries that pops skip.
    Keys due at once (a new allocation, a changed record) go on a plain list instead: most
    arms are those, and a list append costs a fraction of a heap push and pop."""

    __slots__ = ("_heap", "_live", "_now", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, str]] = []
        self._now: list[str] = []
        self._live: dict[str, float] = {}
        self._seq = itertools.count()

    def arm(self, key: str, at: float) -> None:
        current = self._live.get(key)
        if current is not None and current <= at:
            return  # already due no later than asked
        self._live[key] = at
        if at == -math.inf:
            self._now.append(key)
            return
        heapq.heappush(self._heap, (at, next(self._seq), key))
        if len(self._heap) > 2 * len(self._live) + 64:
            self._heap = [e for e in self._heap if self._live.get(e[2]) == e[0]]
            heapq.heapify(self._heap)

    def cancel(self, key: str) -> None:
        self._live.pop(key, None)

    def pop_due(self, now: float) -> list[str]:
        live, due = self._live, []
        if self._now:
            keys, self._now = self._now, []
            for key in keys:
                if live.get(key) == -math.inf:
                    del live[key]
                    due.append(key)
        heap = self._heap
        while heap and heap[0][0] <= now:
            at, _, key = heapq.heappop(heap)
            if live.get(key) == at:
                del live[key]
                due.append(key)
        return due


class ClientCore:
    """Runs the allocations placed on `node_ids` with `drivers`; `clock` is unix seconds."""

    def __init__(
        self,
        node_ids: Iterable[str],
        drivers: Mapping[str, Driver],
        clock: Callable[[], float],
    ) -> None:
        self._by_node: dict[str, set[str]] = {n: set() for n in node_ids}
        self._drivers = dict(drivers)
        self._clock = clock
        self._runners: dict[str, AllocRunner] = {}
        self._measurable: set[str] = set()  # runners whose drivers could say what they use
        self._wake = _WakeQueue()
        self._node_ids: frozenset[str] | None = None

    @property
    def node_ids(self) -> frozenset[str]:
        # Asked once per log entry: built once per change of the node set, not per call.
        if self._node_ids is None:
            self._node_ids = frozenset(self._by_node)
        return self._node_ids

    def add_node(self, node_id: str) -> None:
        self._by_node.setdefault(node_id, set())
        self._node_ids = None

    def apply_allocs(
        self,
        allocs: Iterable[Allocation],
        jobs: JobLookup,
        envs: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        """Take allocation records from the state log; other nodes' records are ignored.

        `jobs` is asked only for allocations that still have to start, for the job version
        the allocation was placed with; `envs` holds extra variables for some of them (a
        run's cluster, by allocation ID). Work happens on the next `tick`.
        """
        # A plan places hundreds of allocations of one job version: asked once per batch.
        found: dict[tuple[str, str, int], Job | None] = {}
        for alloc in allocs:
            on_node = self._by_node.get(alloc.node_id)
            if on_node is None:
                continue
            runner = self._runners.get(alloc.id)
            if runner is None:
                job = None
                if not alloc.terminal():
                    version = (alloc.namespace, alloc.job_id, alloc.job_version)
                    if version in found:
                        job = found[version]
                    else:
                        job = found[version] = jobs(*version)
                extra = envs.get(alloc.id) if envs else None
                runner = AllocRunner(alloc, job, self._drivers, extra)
                self._runners[alloc.id] = runner
                on_node.add(alloc.id)
                if not runner.finished and runner.measurable:
                    self._measurable.add(alloc.id)
                if not runner.finished:
                    self._wake.arm(alloc.id, -math.inf)
            elif runner.update(alloc):
                self._wake.arm(alloc.id, -math.inf)

    def tick(self, now: float | None = None) -> list[AllocClientUpdate]:
        """Advance the runners that are due; the status changes to report, in one batch."""
        if now is None:
            now = self._clock()
        updates = []
        for alloc_id in self._wake.pop_due(now):
            runner = self._runners.get(alloc_id)
            if runner is None:
                continue
            update = runner.step(now)
            if update is not None:
                updates.append(update)
            wake = runner.next_wake(now)
            if wake is not None:
                self._wake.arm(alloc_id, wake)
        return updates

    def usage(self, now: float) -> list[tuple[Allocation, float, float]]:
        """(allocation, CPU MHz, memory MB) of every running allocation of the hosted nodes
        whose drivers can say what it uses. Visits only those that could (`_measurable`),
        so the idle mock allocations of a large simulated fleet cost nothing here."""
        found = []
        for alloc_id in self._measurable:
            runner = self._runners.get(alloc_id)
            if runner is None:
                continue
            used = runner.usage(now)
            if used is not None:
                found.append((runner.alloc, used[0], used[1]))
        return found

    def runner(self, node_id: str, alloc_id: str) -> AllocRunner | None:
        """The runner of `alloc_id` if the agent runs it on hosted node `node_id`."""
        if alloc_id not in self._by_node.get(node_id, ()):
            return None
        return self._runners.get(alloc_id)

    def collect(self, alloc_id: str) -> bool:
        """Nomad's client GC of one allocation: its drivers remove what they keep on disk for
        it, and a finished runner whose final report is committed is forgotten (a signal then
        finds no allocation). False, and nothing removed, while it still runs."""
        if not alloc_id or alloc_id in (".", "..") or "/" in alloc_id or "\\" in alloc_id:
            return False  # an ID that could name a folder elsewhere is no allocation of ours
        runner = self._runners.get(alloc_id)
        if runner is not None and not runner.finished:
            return False
        for driver in self._drivers.values():
            driver.collect(alloc_id)
        if runner is not None and runner.acknowledged:
            self._forget(alloc_id)
        return True

    def running_count(self) -> int:
        """Allocations this agent reports as running."""
        return sum(
            1
            for ids in self._by_node.values()
            for a in ids
            if self._runners[a].status is ClientStatus.RUNNING
        )

    def status(self, alloc_id: str) -> ClientStatus | None:
        runner = self._runners.get(alloc_id)
        return None if runner is None else runner.status

    def __len__(self) -> int:
        return len(self._runners)

    def forget_terminal(self) -> int:
        """Drop finished runners whose final status the state log already shows.

        A runner whose report is still in flight is kept: if it were dropped, a stale
        record saying `running` would start the allocation again. Feed the records the
        leader commits (`UpdateAllocsClientStatus` too) or call `acknowledge`.
        """
        gone = [a for a, r in self._runners.items() if r.acknowledged]
        for alloc_id in gone:
            self._forget(alloc_id)
        return len(gone)

    def _forget(self, alloc_id: str) -> None:
        runner = self._runners.pop(alloc_id)
        self._measurable.discard(alloc_id)
        self._wake.cancel(alloc_id)
        self._by_node.get(runner.alloc.node_id, set()).discard(alloc_id)

    def acknowledge(self, alloc_ids: Iterable[str]) -> None:
        """Mark reports as committed, for shells that do not feed back the updated records.

        Only a finished runner whose final status was reported is affected, so acknowledging
        an older (running) report of the same allocation is harmless.
        """
        for alloc_id in alloc_ids:
            runner = self._runners.get(alloc_id)
            if runner is not None:
                runner.confirm()

    def drop_node(self, node_id: str) -> int:
        """Stop hosting `node_id`: its tasks are stopped silently, its records ignored.

        Returns how many allocations it had. Their runners linger (unreported) only until
        their tasks have exited, so a raw_exec task still gets its SIGKILL escalation.
        """
        ids = self._by_node.pop(node_id, set())
        self._node_ids = None
        for alloc_id in ids:
            self._runners[alloc_id].abandon()
            self._wake.arm(alloc_id, -math.inf)
            self._measurable.discard(alloc_id)
        return len(ids)
