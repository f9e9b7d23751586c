"""Parameterized and periodic jobs on the leader's core: Nomad's Job.Dispatch, periodic
dispatcher and ForceRun rules (TestJobEndpoint_Dispatch*, TestPeriodicDispatch_*), with the
decisions committed to a real store as the leader would."""

from __future__ import annotations

import base64
import dataclasses
import itertools
from datetime import UTC, datetime

import pytest

from actors.leader.core.deadlines import DeadlineKind
from actors.leader.core.leader import LeaderCore
from actors.leader.core.repeated_requests import repeated_answer
from actors.state import StateStore
from contracts import EvalStatus, Job, JobStatus, JobType, Resources, Task, TaskGroup, TriggeredBy
from contracts.launch import DispatchPayload, ParameterizedConfig, PeriodicConfig
from contracts.messages import LeaderRequest, LeaderResponse, RequestKind
from contracts.state_log import UpsertEvals, UpsertJob

S = 1_000_000_000
# 2026-11-27 08:07:00 UTC: a */15 spec next launches at 08:15.
START = int(datetime(2026, 11, 27, 8, 7, tzinfo=UTC).timestamp()) * S
AT_0815 = int(datetime(2026, 11, 27, 8, 15, tzinfo=UTC).timestamp()) * S


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def template(job_id: str = "report", **kw: object) -> Job:
    task = Task(name="t", driver="mock", resources=Resources(cpu=100, memory_mb=64))
    fields: dict[str, object] = {"meta": {"team": "a"}} | kw
    return Job(
        id=job_id,
        name=job_id,
        type=JobType.BATCH,
        task_groups=(TaskGroup("g", 1, tasks=(task,)),),
        **fields,  # type: ignore[arg-type]
    )


@pytest.fixture
def clock() -> Clock:
    return Clock(START)


@pytest.fixture
def setup(clock: Clock) -> tuple[LeaderCore, StateStore]:
    store = StateStore()
    ids = (f"{n:08x}-uuid" for n in itertools.count(1))
    return LeaderCore(store, now_ns=clock, new_id=lambda: next(ids)), store


def ask(core: LeaderCore, store: StateStore, request: LeaderRequest) -> LeaderResponse:
    """Decide a request and commit its changes, as the leader's loop does."""
    decision = core.handle(request)
    for change in decision.changes:
        store.commit(change)
    assert decision.response is not None
    return decision.response


def register(core: LeaderCore, store: StateStore, job: Job) -> LeaderResponse:
    return ask(core, store, LeaderRequest(RequestKind.REGISTER_JOB, request_id="r", job=job))


def dispatch(core: LeaderCore, store: StateStore, **kw: object) -> LeaderResponse:
    fields: dict[str, object] = {"job_id": "report"} | kw
    return ask(core, store, LeaderRequest(RequestKind.DISPATCH_JOB, **fields))  # type: ignore[arg-type]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# -- templates ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "launcher",
    [
        {"parameterized": ParameterizedConfig()},
        {"periodic": PeriodicConfig(("*/15 * * * *",))},
    ],
)
def test_a_template_is_registered_without_an_eval_and_runs_until_stopped(
    setup: tuple[LeaderCore, StateStore], launcher: dict[str, object]
) -> None:
    core, store = setup
    reply = register(core, store, template(**launcher))
    assert reply.ok and reply.eval_id == ""
    assert list(store.evals()) == []
    assert store.job("default", "report").status is JobStatus.RUNNING  # type: ignore[union-attr]
    # The same spec again writes nothing (Nomad creates no eval for a template either).
    assert (
        core.handle(LeaderRequest(RequestKind.REGISTER_JOB, job=template(**launcher))).changes == []
    )
    evaluate = core.handle(LeaderRequest(RequestKind.EVALUATE_JOB, job_id="report"))
    assert evaluate.response is not None and not evaluate.response.ok
    assert "can't evaluate" in evaluate.response.error
    stop = ask(core, store, LeaderRequest(RequestKind.STOP_JOB, job_id="report"))
    assert stop.ok and stop.eval_id == "" and list(store.evals()) == []
    assert store.job("default", "report").status is JobStatus.DEAD  # type: ignore[union-attr]


# -- dispatch ----------------------------------------------------------------------------------


def test_dispatch_registers_a_child_with_merged_meta_payload_and_an_eval(
    setup: tuple[LeaderCore, StateStore], clock: Clock
) -> None:
    core, store = setup
    config = ParameterizedConfig(DispatchPayload.REQUIRED, ("input",), ("extra",))
    register(core, store, template(parameterized=config))
    reply = dispatch(core, store, meta={"input": "x.csv"}, payload=b64(b"hello"))
    assert reply.ok, reply.error
    child_id = reply.dispatched_job_id
    assert child_id.startswith(f"report/dispatch-{START // S}-")
    child = store.job("default", child_id)
    assert child is not None
    assert child.parent_id == "report" and child.dispatched and child.name == child_id
    assert child.meta == {"team": "a", "input": "x.csv"}
    assert base64.b64decode(child.payload) == b"hello"
    assert not child.is_template  # a dispatched child is scheduled
    ev = store.eval(reply.eval_id)
    assert ev is not None and ev.job_id == child_id and ev.status is EvalStatus.PENDING
    assert ev.triggered_by is TriggeredBy.JOB_REGISTER


@pytest.mark.parametrize(
    ("config", "kw", "error"),
    [
        (
            ParameterizedConfig(DispatchPayload.REQUIRED),
            {},
            "Payload is not provided but required by parameterized job",
        ),
        (
            ParameterizedConfig(DispatchPayload.FORBIDDEN),
            {"payload": b64(b"x")},
            "Payload provided but forbidden by parameterized job",
        ),
        (
            ParameterizedConfig(),
            {"payload": b64(b"x" * (16 * 1024 + 1))},
            "Payload exceeds maximum size; 16385 > 16384",
        ),
        (ParameterizedConfig(), {"payload": "not base64!"}, "Payload: not valid base64"),
        (
            ParameterizedConfig(meta_required=("a",)),
            {"meta": {"a": "1", "b": "2"}},
            "Dispatch request included unpermitted metadata keys: ['b']",
        ),
        (
            ParameterizedConfig(meta_required=("a", "c"), meta_optional=("b",)),
            {"meta": {"b": "2"}},
            "Dispatch did not provide required meta keys: ['a', 'c']",
        ),
    ],
)
def test_dispatch_refuses_what_the_parameterized_block_does_not_allow(
    setup: tuple[LeaderCore, StateStore],
    config: ParameterizedConfig,
    kw: dict[str, object],
    error: str,
) -> None:
    core, store = setup
    register(core, store, template(parameterized=config))
    reply = dispatch(core, store, **kw)
    assert not reply.ok and error in reply.error
    assert [j.id for j in store.jobs()] == ["report"]


def test_dispatch_of_a_missing_plain_or_stopped_job_is_refused(
    setup: tuple[LeaderCore, StateStore],
) -> None:
    core, store = setup
    missing = dispatch(core, store)
    assert not missing.ok and missing.error_kind == "not-found"
    register(core, store, template("plain"))
    plain = dispatch(core, store, job_id="plain")
    assert not plain.ok and 'Specified job "plain" is not a parameterized job' in plain.error
    register(core, store, template(parameterized=ParameterizedConfig()))
    ask(core, store, LeaderRequest(RequestKind.STOP_JOB, job_id="report"))
    stopped = dispatch(core, store)
    assert not stopped.ok and 'Specified job "report" is stopped' in stopped.error


def test_an_idempotency_token_returns_the_child_it_made(
    setup: tuple[LeaderCore, StateStore],
) -> None:
    core, store = setup
    register(core, store, template(parameterized=ParameterizedConfig()))
    first = dispatch(core, store, idempotency_token="once")
    again = dispatch(core, store, idempotency_token="once")
    assert first.ok and again.ok
    assert again.dispatched_job_id == first.dispatched_job_id
    assert again.eval_id == "" and again.job_create_index > 0
    other = dispatch(core, store, idempotency_token="twice")
    assert other.dispatched_job_id != first.dispatched_job_id
    assert len([j for j in store.jobs() if j.parent_id == "report"]) == 2
    # A new leader (rebuilt from the state) still knows the token.
    core.rebuild_deadlines()
    assert (
        dispatch(core, store, idempotency_token="once").dispatched_job_id == first.dispatched_job_id
    )


def test_an_id_prefix_template_goes_into_the_child_id(
    setup: tuple[LeaderCore, StateStore],
) -> None:
    core, store = setup
    register(core, store, template(parameterized=ParameterizedConfig()))
    reply = dispatch(core, store, id_prefix_template="nightly")
    assert reply.dispatched_job_id.startswith(f"report/dispatch-nightly-{START // S}-")
    bad = dispatch(core, store, id_prefix_template="a/b")
    assert not bad.ok and "IdPrefixTemplate" in bad.error


# -- periodic ----------------------------------------------------------------------------------


def periodic(**kw: object) -> Job:
    return template(periodic=PeriodicConfig(("*/15 * * * *",), **kw))  # type: ignore[arg-type]


def tick(core: LeaderCore, store: StateStore, clock: Clock, at: int) -> list[Job]:
    """Advance the clock to `at`, commit what came due; the children launched."""
    clock.now = at
    launched = []
    for change in core.due():
        store.commit(change)
        if isinstance(change, UpsertJob):
            launched.append(change.job)
    return launched


def test_a_periodic_job_launches_a_child_at_each_cron_time(
    setup: tuple[LeaderCore, StateStore], clock: Clock
) -> None:
    core, store = setup
    register(core, store, periodic())
    assert core.deadlines.next_at() == AT_0815
    assert tick(core, store, clock, AT_0815 - 1) == []
    [child] = tick(core, store, clock, AT_0815)
    assert child.id == f"report/periodic-{AT_0815 // S}" and child.parent_id == "report"
    assert child.periodic is None and child.name == child.id
    [ev] = store.evals_by_job("default", child.id)
    assert ev.triggered_by is TriggeredBy.PERIODIC_JOB
    assert core.deadlines.next_at() == AT_0815 + 15 * 60 * S
    [second] = tick(core, store, clock, AT_0815 + 15 * 60 * S)
    assert second.id == f"report/periodic-{(AT_0815 + 15 * 60 * S) // S}"


def test_prohibit_overlap_skips_a_launch_while_a_child_runs(
    setup: tuple[LeaderCore, StateStore], clock: Clock
) -> None:
    core, store = setup
    register(core, store, periodic(prohibit_overlap=True))
    [child] = tick(core, store, clock, AT_0815)
    # The child's eval is still pending: the child is not dead, so the next launch is skipped.
    assert tick(core, store, clock, AT_0815 + 15 * 60 * S) == []
    assert core.periodic.skipped_overlaps == 1
    [ev] = store.evals_by_job("default", child.id)
    store.commit(UpsertEvals((dataclasses.replace(ev, status=EvalStatus.COMPLETE),)))
    assert store.job("default", child.id).status is JobStatus.DEAD  # type: ignore[union-attr]
    assert len(tick(core, store, clock, AT_0815 + 30 * 60 * S)) == 1


def test_a_time_zone_moves_the_launch_and_follows_daylight_saving(
    setup: tuple[LeaderCore, StateStore], clock: Clock
) -> None:
    core, store = setup
    # 02:30 every day in New York: 07:30 UTC in winter (EST), 06:30 in summer (EDT).
    winter = int(datetime(2026, 3, 1, tzinfo=UTC).timestamp()) * S
    clock.now = winter
    register(
        core,
        store,
        template(periodic=PeriodicConfig(("30 2 * * *",), time_zone="America/New_York")),
    )
    assert core.deadlines.next_at() == int(datetime(2026, 3, 1, 7, 30, tzinfo=UTC).timestamp()) * S
    summer = int(datetime(2026, 6, 1, tzinfo=UTC).timestamp()) * S
    clock.now = summer
    register(
        core,
        store,
        template(
            periodic=PeriodicConfig(("30 2 * * *",), time_zone="America/New_York"), meta={"v": "2"}
        ),
    )
    due = [t for t in _deadlines(core) if t > summer]
    assert int(datetime(2026, 6, 1, 6, 30, tzinfo=UTC).timestamp()) * S in due


def _deadlines(core: LeaderCore) -> list[int]:
    return core.deadlines.times(DeadlineKind.PERIODIC)


def test_a_stopped_or_re_registered_job_cancels_its_old_timer(
    setup: tuple[LeaderCore, StateStore], clock: Clock
) -> None:
    core, store = setup
    register(core, store, periodic())
    ask(core, store, LeaderRequest(RequestKind.STOP_JOB, job_id="report"))
    assert tick(core, store, clock, AT_0815) == []
    # Registered again with a spec that launches hourly: the */15 timer launches nothing.
    clock.now = AT_0815 + 1
    register(core, store, template(periodic=PeriodicConfig(("@hourly",))))
    assert tick(core, store, clock, AT_0815 + 15 * 60 * S) == []
    [child] = tick(core, store, clock, AT_0815 + 45 * 60 * S)
    assert child.id.endswith(str((AT_0815 + 45 * 60 * S) // S))


def test_a_new_leader_launches_a_missed_launch_once_then_follows_the_schedule(
    setup: tuple[LeaderCore, StateStore], clock: Clock
) -> None:
    core, store = setup
    register(core, store, periodic())
    tick(core, store, clock, AT_0815)
    # No leader ran from 08:15 to 09:10: three launches were missed.
    clock.now = AT_0815 + 55 * 60 * S
    fresh = LeaderCore(store, now_ns=clock, new_id=lambda: "feedbeef-x")
    fresh.rebuild_deadlines()
    launched = tick(fresh, store, clock, clock.now)
    assert [j.id for j in launched] == [f"report/periodic-{(AT_0815 + 15 * 60 * S) // S}"]
    assert fresh.deadlines.next_at() == AT_0815 + 60 * 60 * S


def test_force_launches_now_and_refuses_a_non_periodic_job(
    setup: tuple[LeaderCore, StateStore], clock: Clock
) -> None:
    core, store = setup
    register(core, store, periodic(prohibit_overlap=True))
    forced = ask(core, store, LeaderRequest(RequestKind.FORCE_PERIODIC, job_id="report"))
    assert forced.ok and forced.dispatched_job_id == f"report/periodic-{START // S}"
    assert store.eval(forced.eval_id).triggered_by is TriggeredBy.PERIODIC_JOB  # type: ignore[union-attr]
    register(core, store, template("plain"))
    refused = ask(core, store, LeaderRequest(RequestKind.FORCE_PERIODIC, job_id="plain"))
    assert not refused.ok and "non-periodic" in refused.error
    missing = ask(core, store, LeaderRequest(RequestKind.FORCE_PERIODIC, job_id="nope"))
    assert not missing.ok and missing.error_kind == "not-found"


def test_a_repeated_dispatch_is_answered_with_the_child_it_made(
    setup: tuple[LeaderCore, StateStore],
) -> None:
    core, store = setup
    register(core, store, template(parameterized=ParameterizedConfig()))
    request = LeaderRequest(RequestKind.DISPATCH_JOB, request_id="d1", job_id="report")
    first = ask(core, store, request)
    index = store.latest_index()  # the dispatch's own entry (the leader's `applied` map)
    again = repeated_answer(store, core.periodic.children, request, index)
    assert again.dispatched_job_id == first.dispatched_job_id
    assert again.eval_id == first.eval_id and again.index == index
