"""The store's job statuses, kept right after every entry (Nomad #24957).

Every write that can change a job's status (its registration, its evaluations, its
allocations) marks the job in `_dirty`; once the entry is applied, each marked job's status
is recomputed from the store's per-job counters (job_status.py) and, where it changed, the
job and its current version's row are rewritten at the entry's index.
"""

from __future__ import annotations

from collections.abc import Callable

from actors.state.chunked_cow import ChunkedCowMap
from actors.state.job_status import JobActivity, compute_job_status, status_from_live
from actors.state.multimap import CowMultiMap
from actors.state.reader import JobKey
from actors.state.stamping import job_with_status
from actors.state.versions import replace_version
from contracts.job import Job


class JobStatusRefresh:
    """A StateStore's part (a mixin over the store's own tables and counters)."""

    __slots__ = ()

    _jobs: ChunkedCowMap[JobKey, Job]
    _versions: ChunkedCowMap[JobKey, tuple[Job, ...]]
    _allocs_by_job: CowMultiMap[JobKey, str]
    _evals_by_job: CowMultiMap[JobKey, str]
    _live_allocs: dict[JobKey, int]
    _live_evals: dict[JobKey, int]
    _dirty: dict[JobKey, bool]  # jobs whose status to recompute -> an eval was deleted
    _touch: Callable[[str, int], None]  # the store's: a table written at an index

    def _activity(self, key: JobKey) -> JobActivity:
        return JobActivity(
            live_allocs=self._live_allocs.get(key, 0),
            total_allocs=self._allocs_by_job.count(key),
            live_evals=self._live_evals.get(key, 0),
            total_evals=self._evals_by_job.count(key),
        )

    def _refresh_job_statuses(self, index: int) -> None:
        """Recompute the status of every job this entry touched; mirror it into its version."""
        if not self._dirty:
            return
        for key, eval_delete in self._dirty.items():
            job = self._jobs.get(key)
            if job is None:
                continue
            # The live counters decide most statuses; the totals are counted only if not.
            status = status_from_live(
                job, self._live_allocs.get(key, 0), self._live_evals.get(key, 0)
            )
            if status is None:
                status = compute_job_status(job, self._activity(key), eval_delete=eval_delete)
            if status is job.status:
                continue
            new = job_with_status(job, status, index)
            self._jobs.set(key, new)
            self._versions.set(key, replace_version(self._versions.get(key) or (), new))
            self._touch("jobs", index)
            self._touch("job_versions", index)
        self._dirty.clear()
