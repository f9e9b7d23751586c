"""What allocations use: the mock driver's share of its group's demand, raw_exec's process
trees read from the OS, allocations summed over their tasks, and the samples built."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.agent.core import ClientCore, DriverError, MockDriver, RawExecDriver, TaskHandle
from actors.agent.core.drivers import RawExecHandle
from actors.agent.core.fingerprint import FleetSpec, simulated_nodes
from actors.agent.core.runner import AllocRunner
from actors.agent.core.usage import (
    ProcessTreeSampler,
    alloc_usage,
    node_mhz_per_core,
    usage_samples,
)
from contracts import (
    AllocatedResources,
    Allocation,
    DesiredStatus,
    Job,
    Node,
    NodeResources,
    Task,
    TaskGroup,
)

# -- mock: the load model -------------------------------------------------------------------


def load_job(*tasks: Task, job_id: str = "svc") -> Job:
    return Job(id=job_id, task_groups=(TaskGroup(name="g", count=1, tasks=tasks),))


def mock(name: str = "t", **config: Any) -> Task:
    return Task(name=name, driver="mock", config=config)


def placed(alloc_id: str, job_id: str = "svc", **changes: Any) -> Allocation:
    return Allocation(
        id=alloc_id,
        node_id=changes.pop("node_id", "n1"),
        job_id=job_id,
        task_group="g",
        allocated_resources=AllocatedResources(cpu=500, memory_mb=128),
        **changes,
    )


def agent(*jobs: Job) -> tuple[ClientCore, Any]:
    table = {(j.namespace, j.id, j.version): j for j in jobs}
    core = ClientCore(("n1", "n2"), {"mock": MockDriver()}, lambda: 0.0)
    return core, lambda ns, job_id, version: table.get((ns, job_id, version))


def cpu_by_alloc(core: ClientCore, now: float) -> dict[str, float]:
    return {alloc.id: cpu for alloc, cpu, _memory in core.usage(now)}


def test_the_groups_demand_is_split_among_its_running_allocations() -> None:
    job = load_job(mock(load={"base": 400, "memory_mb": 64}))
    core, jobs = agent(job)
    core.apply_allocs([placed("a1"), placed("a2", node_id="n2")], jobs)
    core.tick(10.0)
    assert cpu_by_alloc(core, 11.0) == {"a1": 200.0, "a2": 200.0}
    core.apply_allocs([placed("a3"), placed("a4", node_id="n2")], jobs)
    core.tick(12.0)
    assert cpu_by_alloc(core, 13.0) == {"a1": 100.0, "a2": 100.0, "a3": 100.0, "a4": 100.0}
    assert {memory for _alloc, _cpu, memory in core.usage(13.0)} == {64.0}
    # One stopped: the three left share the demand.
    core.apply_allocs([placed("a4", node_id="n2", desired_status=DesiredStatus.STOP)], jobs)
    core.tick(14.0)
    assert cpu_by_alloc(core, 15.0) == pytest.approx({"a1": 400 / 3, "a2": 400 / 3, "a3": 400 / 3})


def test_a_step_reaches_each_allocation_from_the_groups_origin() -> None:
    job = load_job(mock(load={"shape": "step", "base": 100, "peak": 600, "at": "30s"}))
    core, jobs = agent(job)
    core.apply_allocs([placed("a1")], jobs)
    core.tick(1000.0)  # the group's origin on this agent
    core.apply_allocs([placed("a2")], jobs)
    core.tick(1020.0)
    assert cpu_by_alloc(core, 1029.0) == {"a1": 50.0, "a2": 50.0}
    assert cpu_by_alloc(core, 1030.0) == {"a1": 300.0, "a2": 300.0}


def test_an_allocation_sums_its_tasks_and_unmeasured_ones_report_nothing() -> None:
    both = load_job(
        mock("front", load={"base": 300, "memory_mb": 32}),
        mock("side", load={"base": 100, "memory_mb": 16}),
        mock("idle"),  # no load: measured as nothing, adds nothing
    )
    quiet = load_job(mock("t", run_for="1h"), job_id="quiet")
    core, jobs = agent(both, quiet)
    core.apply_allocs([placed("a1"), placed("q1", job_id="quiet")], jobs)
    core.tick(0.0)
    assert [(a.id, cpu, memory) for a, cpu, memory in core.usage(1.0)] == [("a1", 400.0, 48.0)]


def test_only_allocations_that_could_be_measured_are_visited(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A simulated fleet's thousands of plain mock allocations cost the sampler nothing."""
    loaded = load_job(mock(load={"base": 200}))
    plain = load_job(mock("t", run_for="1h"), job_id="plain")
    core, jobs = agent(loaded, plain)
    core.apply_allocs([placed(f"p{i}", job_id="plain") for i in range(500)], jobs)
    core.apply_allocs([placed("a1"), placed("a2", node_id="n2")], jobs)
    core.tick(0.0)
    visited: list[str] = []
    original = AllocRunner.usage

    def counting(self: AllocRunner, now: float) -> tuple[float, float] | None:
        visited.append(self.alloc.id)
        return original(self, now)

    monkeypatch.setattr(AllocRunner, "usage", counting)
    assert cpu_by_alloc(core, 1.0) == {"a1": 100.0, "a2": 100.0}
    assert sorted(visited) == ["a1", "a2"]
    core.drop_node("n2")
    core.tick(2.0)  # its task is stopped
    assert cpu_by_alloc(core, 3.0) == {"a1": 200.0}, "a dropped node's allocation is gone"


def test_noise_is_per_allocation_and_bounded() -> None:
    job = load_job(mock(load={"base": 1000, "noise": 0.1}))
    core, jobs = agent(job)
    core.apply_allocs([placed("a1"), placed("a2")], jobs)
    core.tick(0.0)
    samples = [cpu_by_alloc(core, 1.0 + i / 10) for i in range(50)]
    values = [v for s in samples for v in s.values()]
    assert all(450 <= v <= 550 for v in values)
    assert len(set(values)) > 90
    assert samples[7] == cpu_by_alloc(core, 1.7)  # the same time, the same noise


def test_mock_usage_ends_with_the_task() -> None:
    driver = MockDriver()
    env = {"DROVER_NAMESPACE": "default", "DROVER_JOB_ID": "svc", "DROVER_GROUP_NAME": "g"}
    task = mock(load={"base": 90}, run_for="10s")
    first = driver.start("a1", task, env, 0.0)
    second = driver.start("a2", task, env, 0.0)
    assert driver.usage(first, 1.0) == (45.0, 0.0)
    driver.stop(first, 2.0)
    assert driver.usage(first, 2.0) is None
    assert driver.usage(second, 2.0) == (90.0, 0.0)
    assert driver.usage(second, 10.0) is None  # run_for is over
    assert driver.poll(second, 10.0).exited
    assert driver.loads.running(("default", "svc", "g"), "t") == 0
    assert driver.usage(driver.start("b", mock(), env, 0.0), 1.0) is None  # no load


def test_mock_refuses_a_bad_load() -> None:
    driver = MockDriver()
    bad = mock(load={"shape": "step", "base": 1, "peak": "high"})
    assert driver.validate(bad) == ["mock: load.peak: expected a number >= 0, got 'high'"]
    with pytest.raises(DriverError) as refused:
        driver.start("a1", bad, {}, 0.0)
    assert str(refused.value) == "load.peak: expected a number >= 0, got 'high'"
    assert driver.validate(mock(load={"base": 5}, run_for="1s")) == []


# -- raw_exec: processes read from the OS ---------------------------------------------------


@pytest.fixture
def raw_exec(tmp_path: Path) -> Iterator[tuple[RawExecDriver, list[TaskHandle]]]:
    """A raw_exec driver whose tasks are killed when the test ends."""
    driver = RawExecDriver(enabled=True, data_dir=tmp_path, mhz_per_cpu=2000)
    started: list[TaskHandle] = []
    yield driver, started
    for handle in started:
        assert isinstance(handle, RawExecHandle) and handle.process is not None
        driver.stop(handle, time.time())
        handle.process.kill()
        handle.process.wait(timeout=30)


def run(driver: RawExecDriver, started: list[TaskHandle], name: str, *argv: str) -> RawExecHandle:
    task = Task(name=name, driver="raw_exec", config={"command": argv[0], "args": list(argv[1:])})
    handle = driver.start(f"alloc-{name}", task, {}, time.time())
    started.append(handle)
    return handle


BURN = "import time\nend = time.time() + 30\nwhile time.time() < end: pass"


def test_a_busy_task_reports_more_cpu_than_a_sleeping_one(
    raw_exec: tuple[RawExecDriver, list[TaskHandle]],
) -> None:
    driver, started = raw_exec
    busy = run(driver, started, "busy", sys.executable, "-c", BURN)
    idle = run(driver, started, "idle", "sleep", "30")
    for _ in range(2):  # the first sample counts from the start, the next from the first
        time.sleep(1.0)
        now = time.time()
        busy_use, idle_use = driver.usage(busy, now), driver.usage(idle, now)
        assert busy_use is not None and idle_use is not None
        # Ordering, not amounts: on a loaded 2-core machine a spinning process may get a
        # small slice of a core, but always far more than a sleeping one.
        assert busy_use[0] > 20 and busy_use[0] > 5 * idle_use[0]
        assert busy_use[1] > 1 and idle_use[1] > 0  # resident MB
    driver.stop(idle, time.time())
    assert idle.process is not None
    idle.process.wait(timeout=30)
    assert driver.usage(idle, time.time()) is None


def test_the_process_tree_counts_children(
    raw_exec: tuple[RawExecDriver, list[TaskHandle]],
) -> None:
    """A shell that runs the busy loop as its child: the task's CPU is the child's."""
    driver, started = raw_exec
    script = f"{sys.executable} -c '{BURN}' & wait"
    shell = run(driver, started, "shell", "/bin/sh", "-c", script)
    time.sleep(1.0)
    used = driver.usage(shell, time.time())
    assert used is not None and used[0] > 20  # a sleeping shell alone would read ~0


def test_a_sampler_of_a_process_that_is_gone_says_so() -> None:
    assert ProcessTreeSampler(2**22 + 12345, 0.0).sample(1.0) is None  # beyond pid_max


# -- samples --------------------------------------------------------------------------------


def test_a_cores_mhz_comes_from_the_nodes_attributes() -> None:
    (sim,) = simulated_nodes(FleetSpec(name="f", count=1, cpu_mhz=8000, memory_mb=1024))
    assert node_mhz_per_core(sim, 1000) == 1000.0  # simulated: 1000 MHz per core
    ray_like = Node(
        id="r",
        attributes={"cpu.numcores": "4", "cpu.totalcompute": "10000"},
        node_resources=NodeResources(cpu=10000),
    )
    assert node_mhz_per_core(ray_like, 1000) == 2500.0
    assert node_mhz_per_core(Node(id="bare"), 1234) == 1234


def test_a_sample_carries_the_allocation_and_its_percent_of_a_core() -> None:
    alloc = placed("a1", namespace="prod", node_id="n7")
    sample = alloc_usage(alloc, 1500.0, 64.5, 123, mhz_per_core=1000.0)
    assert (sample.alloc_id, sample.namespace, sample.job_id, sample.task_group) == (
        "a1",
        "prod",
        "svc",
        "g",
    )
    assert (sample.node_id, sample.time_ns, sample.cpu_mhz, sample.memory_mb) == (
        "n7",
        123,
        1500.0,
        64.5,
    )
    assert sample.cpu_percent == 150.0  # of one core, as Nomad's total_percent
    assert (sample.allocated_cpu_mhz, sample.allocated_memory_mb) == (500, 128)


def test_samples_take_each_nodes_core_and_the_sample_time() -> None:
    used = [(placed("a1", node_id="n1"), 500.0, 10.0), (placed("a2", node_id="n9"), 500.0, 10.0)]
    samples = usage_samples(used, 2.5, {"n1": 2000.0}, 1000.0)
    assert [(s.alloc_id, s.cpu_percent, s.time_ns) for s in samples] == [
        ("a1", 25.0, 2_500_000_000),
        ("a2", 50.0, 2_500_000_000),  # a node it does not know: the default core
    ]


def test_the_agents_clock_factor_applies_to_loads_that_set_none() -> None:
    """One factor for a whole experiment; a `load` with its own time_factor keeps it."""
    shared = load_job(mock(load={"shape": "step", "base": 100, "peak": 500, "at": "60s"}))
    own = load_job(
        mock(load={"shape": "step", "base": 100, "peak": 500, "at": "60s", "time_factor": 1}),
        job_id="own",
    )
    table = {(j.namespace, j.id, j.version): j for j in (shared, own)}
    core = ClientCore(("n1",), {"mock": MockDriver(time_factor=10.0)}, lambda: 0.0)
    jobs = lambda ns, job_id, version: table.get((ns, job_id, version))  # noqa: E731
    core.apply_allocs([placed("a1"), placed("o1", job_id="own")], jobs)
    core.tick(1000.0)
    # 6 real seconds are 60 simulated ones at a factor of 10: the step has come.
    assert cpu_by_alloc(core, 1006.0) == {"a1": 500.0, "o1": 100.0}
