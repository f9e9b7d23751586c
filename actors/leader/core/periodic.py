"""The leader's periodic dispatcher (Nomad's nomad/periodic.go), on the leader's timers.

Each active periodic job has one timer, at its next launch, keyed by the job's submit time: a
new registration pushes a new timer and the old one, finding another submit time, decides
nothing. When a timer comes due the job is read again; its child is launched unless the job
prohibits overlap and an earlier child still runs (then that launch is skipped, as in
Nomad), and the next timer is pushed. After a (re)load every active periodic job is timed
from its last launch (read off its children's IDs; its registration if none): a launch that
was missed while no leader ran is made once, at once, as Nomad's restore does, and later
ones follow the schedule from now.
"""

from __future__ import annotations

from collections.abc import Callable

from actors.leader.core.deadlines import DeadlineKind, Deadlines
from actors.leader.core.launches import (
    Children,
    LaunchWrite,
    last_launch_ns,
    launch_periodic,
    running_children,
)
from actors.state import StateReader
from contracts.cron import CronSpecError, next_launch
from contracts.errors import NotFoundError, ValidationError
from contracts.job import Job
from contracts.state_log import StateChange


class PeriodicDispatcher:
    def __init__(
        self, state: StateReader, *, now_ns: Callable[[], int], new_id: Callable[[], str]
    ) -> None:
        self.state = state
        self.now_ns = now_ns
        self.new_id = new_id
        self.children = Children()
        self.skipped_overlaps = 0  # launches skipped by prohibit_overlap

    def rebuild(self, deadlines: Deadlines) -> None:
        """The children index and one timer per active periodic job (after a load)."""
        jobs = list(self.state.jobs())
        self.children.rebuild(jobs)
        for job in jobs:
            if job.is_periodic_active:
                last = last_launch_ns(self.state, self.children, job)
                self._time(deadlines, job, job.submit_time if last is None else last)

    def track(self, deadlines: Deadlines, job: Job) -> None:
        """A registration about to be committed: index a child, time a periodic job."""
        self.children.track(job)
        if job.is_periodic_active:
            self._time(deadlines, job, self.now_ns())

    def _time(self, deadlines: Deadlines, job: Job, after_ns: int) -> None:
        assert job.periodic is not None
        try:
            at = next_launch(job.periodic, after_ns)
        except CronSpecError:
            return  # validated at registration; a zone database that lost it launches nothing
        if at is not None:
            deadlines.add(at, DeadlineKind.PERIODIC, (job.namespace, job.id, job.submit_time))

    def due(
        self, deadlines: Deadlines, key: tuple[str | int, ...], at_ns: int
    ) -> list[StateChange]:
        """A timer came due: launch (or skip) and time the next launch."""
        namespace, job_id, submit_time = str(key[0]), str(key[1]), int(key[2])
        job = self.state.job(namespace, job_id)
        if job is None or not job.is_periodic_active or job.submit_time != submit_time:
            return []
        now = self.now_ns()
        self._time(deadlines, job, max(at_ns, now))
        assert job.periodic is not None
        if job.periodic.prohibit_overlap and running_children(self.state, self.children, job):
            self.skipped_overlaps += 1
            return []
        launched = launch_periodic(
            self.state, self.children, job, at_ns, now_ns=now, new_id=self.new_id
        )
        return [launched.write.change] if launched.write.change is not None else []

    def force(self, namespace: str, job_id: str) -> LaunchWrite:
        """Nomad's Job.PeriodicForce: launch a child now, overlap or not."""
        job = self.state.job(namespace, job_id)
        if job is None:
            raise NotFoundError(f'job "{job_id}" not found')
        if not job.is_periodic:
            raise ValidationError("can't force launch non-periodic job")
        if not job.is_periodic_active:
            raise ValidationError("can't force launch a stopped or disabled periodic job")
        now = self.now_ns()
        return launch_periodic(self.state, self.children, job, now, now_ns=now, new_id=self.new_id)
