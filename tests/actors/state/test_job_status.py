"""Job status: Nomad's getJobStatus table, and the store's incremental maintenance of it."""

from __future__ import annotations

from typing import Any

import pytest

from actors.state import JobActivity, StateStore, compute_job_status
from contracts import (
    Allocation,
    ClientStatus,
    DesiredStatus,
    EvalStatus,
    Evaluation,
    Job,
    JobStatus,
    JobType,
    TaskGroup,
)
from contracts.launch import PeriodicConfig
from contracts.state_log import (
    AllocClientUpdate,
    DeleteEvals,
    UpdateAllocsClientStatus,
    UpsertAllocs,
    UpsertEvals,
    UpsertJob,
)

LIVE_ALLOC = JobActivity(live_allocs=1, total_allocs=1)
DONE_ALLOC = JobActivity(total_allocs=2)
PENDING_EVAL = JobActivity(live_evals=1, total_evals=1)
DONE_EVAL = JobActivity(total_evals=1)
NOTHING = JobActivity()


@pytest.mark.parametrize(
    ("name", "job", "activity", "eval_delete", "expected"),
    [
        ("stopped job with running allocs", Job(id="j", stop=True), LIVE_ALLOC, False, "running"),
        ("stopped job with terminal allocs", Job(id="j", stop=True), DONE_ALLOC, False, "dead"),
        ("stopped job with nothing", Job(id="j", stop=True), NOTHING, False, "dead"),
        ("no allocs or evals", Job(id="j"), NOTHING, False, "pending"),
        ("pending eval", Job(id="j"), PENDING_EVAL, False, "pending"),
        ("only terminal evals", Job(id="j"), DONE_EVAL, False, "dead"),
        ("only terminal allocs", Job(id="j"), DONE_ALLOC, False, "dead"),
        ("evals deleted by GC", Job(id="j"), NOTHING, True, "dead"),
        (
            "running alloc beats pending eval",
            Job(id="j"),
            JobActivity(live_allocs=1, total_allocs=1, live_evals=1, total_evals=1),
            False,
            "running",
        ),
        ("system job", Job(id="j", type=JobType.SYSTEM), NOTHING, False, "running"),
        (
            "stopped system job",
            Job(id="j", type=JobType.SYSTEM, stop=True),
            LIVE_ALLOC,
            False,
            "dead",
        ),
        (
            "sysbatch runs to completion",
            Job(id="j", type=JobType.SYSBATCH),
            DONE_ALLOC,
            False,
            "dead",
        ),
        ("batch running", Job(id="j", type=JobType.BATCH), LIVE_ALLOC, False, "running"),
    ],
)
def test_get_job_status_table(
    name: str, job: Job, activity: JobActivity, eval_delete: bool, expected: str
) -> None:
    assert compute_job_status(job, activity, eval_delete=eval_delete) == JobStatus(expected), name


def test_the_live_counts_decide_as_the_whole_activity_does() -> None:
    """A store asks `status_from_live` first and counts the totals only where it answers
    None: wherever it answers, it must be `compute_job_status`'s answer whatever the totals."""
    from actors.state.job_status import status_from_live

    jobs = [
        Job(id="j", type=kind, stop=stop, periodic=periodic)
        for kind in JobType
        for stop in (False, True)
        for periodic in (None, PeriodicConfig(crons=("*/5 * * * *",)))
    ]
    decided = 0
    for job in jobs:
        for live_allocs, live_evals in ((0, 0), (1, 0), (0, 1), (2, 3)):
            live = status_from_live(job, live_allocs, live_evals)
            for total_allocs in (live_allocs, live_allocs + 1):
                for total_evals in (live_evals, live_evals + 2):
                    for eval_delete in (False, True):
                        activity = JobActivity(live_allocs, total_allocs, live_evals, total_evals)
                        whole = compute_job_status(job, activity, eval_delete=eval_delete)
                        assert live is None or live is whole, (job, activity, eval_delete)
            decided += live is not None
    assert decided > len(jobs)  # it does decide most: anything live, every system job


def _job(**kw: Any) -> Job:
    return Job(id="web", task_groups=(TaskGroup(name="web", count=2),), **kw)


def _alloc(alloc_id: str, **kw: Any) -> Allocation:
    return Allocation(id=alloc_id, job_id="web", node_id="n1", task_group="web", **kw)


def _status(s: StateStore) -> JobStatus:
    job = s.job("default", "web")
    assert job is not None
    assert s.job_versions("default", "web")[0] == job, "current version row mirrors the job"
    return job.status


def test_store_tracks_status_through_a_job_lifetime() -> None:
    s = StateStore()
    s.commit(UpsertJob(_job()))
    assert _status(s) is JobStatus.PENDING  # nothing yet
    s.commit(UpsertEvals((Evaluation(id="e1", job_id="web"),)))
    assert _status(s) is JobStatus.PENDING
    s.commit(UpsertAllocs((_alloc("a1"), _alloc("a2"))))
    assert _status(s) is JobStatus.RUNNING
    s.commit(UpsertEvals((Evaluation(id="e1", job_id="web", status=EvalStatus.COMPLETE),)))
    assert _status(s) is JobStatus.RUNNING
    s.commit(UpdateAllocsClientStatus((AllocClientUpdate("a1", ClientStatus.COMPLETE),)))
    assert _status(s) is JobStatus.RUNNING
    s.commit(UpsertAllocs((_alloc("a2", desired_status=DesiredStatus.STOP),)))
    assert _status(s) is JobStatus.DEAD
    s.commit(UpsertEvals((Evaluation(id="e2", job_id="web"),)))
    assert _status(s) is JobStatus.PENDING
    s.commit(DeleteEvals(("e2",)))
    assert _status(s) is JobStatus.DEAD


def test_status_change_bumps_modify_index_only_on_change() -> None:
    s = StateStore()
    s.commit(UpsertJob(_job()))
    s.commit(UpsertAllocs((_alloc("a1"),)))
    job = s.job("default", "web")
    assert job is not None and job.modify_index == 2 and job.job_modify_index == 1
    s.commit(UpsertAllocs((_alloc("a2"),)))  # still running: the job record is untouched
    job = s.job("default", "web")
    assert job is not None and job.modify_index == 2
    assert s.table_index("jobs") == 2


def test_evals_of_other_jobs_do_not_count() -> None:
    """Exact job id matching (#27516): "web-2"'s evals never affect "web"."""
    s = StateStore()
    s.commit(UpsertJob(_job()))
    s.commit(UpsertEvals((Evaluation(id="x", job_id="web-2"),)))
    assert _status(s) is JobStatus.PENDING
    s.commit(UpsertEvals((Evaluation(id="x", job_id="web-2", status=EvalStatus.COMPLETE),)))
    assert _status(s) is JobStatus.PENDING


def test_upsert_of_stopped_version_with_terminal_allocs_is_dead() -> None:
    s = StateStore()
    s.commit(UpsertJob(_job()))
    s.commit(UpsertAllocs((_alloc("a1", client_status=ClientStatus.COMPLETE),)))
    s.commit(UpsertJob(_job(stop=True)))
    assert _status(s) is JobStatus.DEAD
    versions = s.job_versions("default", "web")
    assert [(j.version, j.status) for j in versions] == [(1, "dead"), (0, "dead")]


def test_system_job_is_running_until_stopped() -> None:
    s = StateStore()
    s.commit(UpsertJob(_job(type=JobType.SYSTEM)))
    assert _status(s) is JobStatus.RUNNING
    s.commit(UpsertJob(_job(type=JobType.SYSTEM, stop=True)))
    assert _status(s) is JobStatus.DEAD
