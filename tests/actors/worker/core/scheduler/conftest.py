"""Builders and a harness for the scheduler behaviour tests (Nomad's scheduler `Harness`).

Everything runs against a real `actors.state.StateStore`: nodes, jobs and evals are committed
as state-log changes, a scheduler built by `new_scheduler(eval.type, store.snapshot(), planner)`
processes one evaluation, and `InProcessPlanner` applies its plans straight to the store.

Builders are exposed through fixtures (`build`, `h`, `run_eval`) because test modules run in
importlib mode and cannot import this file.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable
from types import SimpleNamespace
from typing import Any

import pytest

from actors.leader.core.inprocess_planner import InProcessPlanner
from actors.state import StateReader, StateStore
from actors.worker.core.scheduler import new_scheduler
from contracts import (
    AllocatedResources,
    Allocation,
    ClientStatus,
    Constraint,
    DesiredStatus,
    DeviceInstance,
    DriverInfo,
    EvalStatus,
    Evaluation,
    Job,
    JobType,
    Node,
    NodeDeviceResource,
    NodeResources,
    Plan,
    PlanResult,
    RejectedNode,
    ReservedResources,
    Resources,
    Task,
    TaskGroup,
    TriggeredBy,
)
from contracts.allocation import alloc_name
from contracts.state_log import UpsertAllocs, UpsertEvals, UpsertJob, UpsertNodes

NOW = 1_700_000_000_000_000_000


# -- records ----------------------------------------------------------------------------------


def make_node(
    node_id: str,
    *,
    cpu: int = 4000,
    memory_mb: int = 8192,
    disk_mb: int = 100_000,
    datacenter: str = "dc1",
    node_class: str = "",
    node_pool: str = "default",
    attributes: dict[str, str] | None = None,
    meta: dict[str, str] | None = None,
    drivers: dict[str, DriverInfo] | None = None,
    devices: tuple[NodeDeviceResource, ...] = (),
    reserved: ReservedResources | None = None,
    **changes: Any,
) -> Node:
    """A ready, eligible node with the `mock` driver and its computed class."""
    node = Node(
        id=node_id,
        name=node_id,
        datacenter=datacenter,
        node_class=node_class,
        node_pool=node_pool,
        attributes=dict(attributes or {}),
        meta=dict(meta or {}),
        drivers={"mock": DriverInfo()} if drivers is None else drivers,
        node_resources=NodeResources(
            cpu=cpu, memory_mb=memory_mb, disk_mb=disk_mb, devices=devices
        ),
        reserved_resources=reserved or ReservedResources(),
        **changes,
    )
    return node.with_computed_class()


def make_gpus(
    count: int,
    *,
    vendor: str = "nvidia",
    type_: str = "gpu",
    model: str = "A100",
    unhealthy: int = 0,
    attributes: dict[str, str] | None = None,
    prefix: str = "gpu",
) -> NodeDeviceResource:
    instances = tuple(
        DeviceInstance(id=f"{prefix}-{i}", healthy=i >= unhealthy) for i in range(count)
    )
    return NodeDeviceResource(
        vendor=vendor,
        type=type_,
        name=model,
        instances=instances,
        attributes=dict(attributes or {"memory": "80 GiB"}),
    )


def make_task(
    name: str = "web",
    *,
    cpu: int = 500,
    memory_mb: int = 256,
    driver: str = "mock",
    **changes: Any,
) -> Task:
    resources = changes.pop("resources", None) or Resources(cpu=cpu, memory_mb=memory_mb)
    return Task(name=name, driver=driver, resources=resources, **changes)


def make_group(
    name: str = "web",
    count: int = 10,
    *,
    cpu: int = 500,
    memory_mb: int = 256,
    tasks: tuple[Task, ...] | None = None,
    **changes: Any,
) -> TaskGroup:
    tasks = tasks or (make_task(cpu=cpu, memory_mb=memory_mb),)
    return TaskGroup(name=name, count=count, tasks=tasks, **changes)


def make_job(
    job_id: str = "my-job",
    *groups: TaskGroup,
    type: JobType = JobType.SERVICE,
    **changes: Any,
) -> Job:
    return Job(id=job_id, name=job_id, type=type, task_groups=groups or (make_group(),), **changes)


def make_alloc(
    job: Job,
    node_id: str,
    index: int,
    *,
    group: str | None = None,
    alloc_id: str | None = None,
    client_status: ClientStatus = ClientStatus.RUNNING,
    desired_status: DesiredStatus = DesiredStatus.RUN,
    **changes: Any,
) -> Allocation:
    """An allocation of `job` (its current version) sized like its task group."""
    tg_name = group or job.task_groups[0].name
    tg = job.lookup_task_group(tg_name)
    ask = tg.combined_resources() if tg is not None else Resources(cpu=0, memory_mb=0)
    return Allocation(
        id=alloc_id or f"{job.id}-{tg_name}-{index}-{node_id}",
        namespace=job.namespace,
        name=alloc_name(job.id, tg_name, index),
        node_id=node_id,
        node_name=node_id,
        job_id=job.id,
        job_version=job.version,
        job_modify_index=job.job_modify_index,
        task_group=tg_name,
        allocated_resources=changes.pop(
            "allocated_resources",
            AllocatedResources(cpu=ask.cpu, memory_mb=ask.memory_mb, disk_mb=ask.disk_mb),
        ),
        client_status=client_status,
        desired_status=desired_status,
        **changes,
    )


def make_eval(
    job: Job,
    eval_id: str = "eval-1",
    *,
    triggered_by: TriggeredBy = TriggeredBy.JOB_REGISTER,
    **changes: Any,
) -> Evaluation:
    return Evaluation(
        id=eval_id,
        namespace=job.namespace,
        priority=job.priority,
        type=str(job.type),
        triggered_by=triggered_by,
        job_id=job.id,
        **changes,
    )


def counting_ids(prefix: str = "id") -> Callable[[], str]:
    counter = itertools.count()
    return lambda: f"{prefix}-{next(counter):04d}"


# -- planners ---------------------------------------------------------------------------------


class RejectPlanPlanner:
    """Nomad's RejectPlan harness: every plan is rejected outright with a state refresh.

    Evals it is given are recorded and written to the store like `InProcessPlanner` does.
    """

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self.plans: list[Plan] = []
        self.evals: list[Evaluation] = []
        self.created_evals: list[Evaluation] = []
        self.reblocked: list[Evaluation] = []

    def submit_plan(self, plan: Plan) -> tuple[PlanResult, StateReader | None]:
        self.plans.append(plan)
        nodes = {*plan.node_allocation, *plan.node_update}
        result = PlanResult(
            rejected_nodes=tuple(RejectedNode(n, "rejected by test harness") for n in nodes),
            refresh_index=max(self.store.latest_index(), 1),
        )
        return result, self.store.snapshot()

    def update_eval(self, evaluation: Evaluation) -> None:
        self.evals.append(evaluation)
        self.store.commit(UpsertEvals((evaluation,)))

    def create_eval(self, evaluation: Evaluation) -> None:
        self.created_evals.append(evaluation)
        self.store.commit(UpsertEvals((evaluation,)))

    def reblock_eval(self, evaluation: Evaluation) -> None:
        self.reblocked.append(evaluation)
        self.store.commit(UpsertEvals((evaluation,)))


# -- harness ----------------------------------------------------------------------------------


def run_eval(
    store: StateStore,
    evaluation: Evaluation,
    planner: Any = None,
    *,
    algorithm: str = "binpack",
    now_ns: int = NOW,
    new_id: Callable[[], str] | None = None,
) -> Any:
    """Process one evaluation with the scheduler for its type; returns the planner."""
    planner = planner if planner is not None else InProcessPlanner(store)
    scheduler = new_scheduler(
        evaluation.type,
        store.snapshot(),
        planner,
        algorithm=algorithm,
        now_ns=lambda: now_ns,
        new_id=new_id or counting_ids(f"{evaluation.id}-a"),
    )
    scheduler.process(evaluation)
    return planner


class Harness:
    """A store plus helpers to commit records and run evaluations against it."""

    def __init__(self) -> None:
        self.store = StateStore()
        self._eval_ids = itertools.count(1)

    def add_nodes(self, *nodes: Node) -> tuple[Node, ...]:
        self.store.commit(UpsertNodes(tuple(nodes)))
        return nodes

    def nodes(self, n: int, prefix: str = "node", **kw: Any) -> tuple[Node, ...]:
        return self.add_nodes(*(make_node(f"{prefix}-{i}", **kw) for i in range(n)))

    def update_node(self, node_id: str, **changes: Any) -> Node:
        node = self.store.node(node_id)
        assert node is not None
        node = dataclasses.replace(node, **changes).with_computed_class()
        self.store.commit(UpsertNodes((node,)))
        return node

    def register(self, job: Job, **eval_changes: Any) -> tuple[Job, Evaluation]:
        """Commit a job version with its evaluation; returns both as stored."""
        ev = make_eval(job, f"eval-{next(self._eval_ids)}", **eval_changes)
        self.store.commit(UpsertJob(job, evals=(ev,)))
        stored_job = self.store.job(job.namespace, job.id)
        stored_eval = self.store.eval(ev.id)
        assert stored_job is not None and stored_eval is not None
        return stored_job, stored_eval

    def new_eval(self, job: Job, **changes: Any) -> Evaluation:
        """A fresh evaluation for the job as stored now (e.g. node-update)."""
        stored = self.store.job(job.namespace, job.id)
        assert stored is not None
        ev = make_eval(stored, f"eval-{next(self._eval_ids)}", **changes)
        self.store.commit(UpsertEvals((ev,)))
        out = self.store.eval(ev.id)
        assert out is not None
        return out

    def add_allocs(self, *allocs: Allocation) -> None:
        self.store.commit(UpsertAllocs(tuple(allocs)))

    def process(self, evaluation: Evaluation, planner: Any = None, **kw: Any) -> Any:
        return run_eval(self.store, evaluation, planner, **kw)

    def job_allocs(self, job: Job) -> list[Allocation]:
        return self.store.allocs_by_job(job.namespace, job.id)

    def live_allocs(self, job: Job) -> list[Allocation]:
        return [a for a in self.job_allocs(job) if not a.terminal()]


def placed(plan: Plan) -> list[Allocation]:
    return [a for allocs in plan.node_allocation.values() for a in allocs]


def stopped(plan: Plan) -> list[Allocation]:
    return [a for allocs in plan.node_update.values() for a in allocs]


def assert_eval(planner: Any, status: EvalStatus) -> Evaluation:
    """Nomad's AssertEvalStatus: exactly one status update, with this status."""
    assert len(planner.evals) == 1, planner.evals
    assert planner.evals[0].status is status, planner.evals[0]
    return planner.evals[0]


def distinct(values: Iterable[Any]) -> bool:
    values = list(values)
    return len(values) == len(set(values))


# -- fixtures ---------------------------------------------------------------------------------


@pytest.fixture
def h() -> Harness:
    return Harness()


@pytest.fixture
def build() -> SimpleNamespace:
    """The builders and helpers of this conftest, for test modules."""
    return SimpleNamespace(
        node=make_node,
        gpus=make_gpus,
        task=make_task,
        group=make_group,
        job=make_job,
        alloc=make_alloc,
        eval=make_eval,
        constraint=Constraint,
        ids=counting_ids,
        placed=placed,
        stopped=stopped,
        assert_eval=assert_eval,
        distinct=distinct,
        reject_planner=RejectPlanPlanner,
        now=NOW,
    )


@pytest.fixture(name="run_eval")
def run_eval_fixture() -> Callable[..., Any]:
    return run_eval
