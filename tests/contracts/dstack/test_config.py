"""Fleet and task configurations as loaded from YAML (reference §1, §4, §5 and the examples)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from contracts.dstack import (
    DEFAULT_RESOURCES,
    FleetConfiguration,
    FleetNodesSpec,
    GPUSpec,
    InstanceShape,
    Range,
    ResourcesSpec,
    RetryPolicy,
    TaskConfiguration,
    instance_shape,
    instance_total_blocks,
    matches,
    parse_configuration,
    parse_fleet,
    parse_task,
)
from contracts.errors import ValidationError


def load(text: str) -> Any:
    return parse_configuration(yaml.safe_load(text))


def problems(text: str) -> list[str]:
    with pytest.raises(ValidationError) as info:
        load(text)
    return info.value.problems


def fleet(text: str) -> FleetConfiguration:
    config = load("type: fleet\n" + text)
    assert isinstance(config, FleetConfiguration)
    return config


def task(text: str) -> TaskConfiguration:
    config = load("type: task\n" + text)
    assert isinstance(config, TaskConfiguration)
    return config


def test_fleet_defaults() -> None:
    config = fleet("")
    assert config == FleetConfiguration()
    assert config.nodes == FleetNodesSpec(1, 1, 1)
    assert (config.placement, config.blocks, config.backend) == ("any", 1, "simulated")
    assert config.idle_duration_s == 3 * 86400
    assert config.resources == DEFAULT_RESOURCES
    assert instance_shape(config) == InstanceShape(cpu_count=2, memory_mb=8192, disk_mb=102400)


def test_cluster_fleet_example() -> None:
    config = fleet(
        "name: h100-pool\nnodes: 2\nplacement: cluster\nresources: {cpu: 64, gpu: 'H100:8'}"
    )
    assert (config.name, config.nodes, config.placement) == (
        "h100-pool",
        FleetNodesSpec(2, 2, 2),
        "cluster",
    )
    shape = instance_shape(config)
    assert (shape.cpu_count, shape.gpu_count, shape.gpu_name, shape.gpu_vendor) == (
        64,
        8,
        "H100",
        "nvidia",
    )


def test_blocks_example_gives_two_gpus_per_block() -> None:
    config = fleet("blocks: 4\nresources: {cpu: 32, gpu: 'NVIDIA:80GB:8'}")
    assert instance_total_blocks(config) == 4
    shape = instance_shape(config)
    assert (shape.gpu_count // 4, shape.gpu_memory_gb) == (2, 80.0)


def test_blocks_that_do_not_divide_the_default_cpus_are_rejected() -> None:
    assert problems("type: fleet\nblocks: 4\nresources: {gpu: 'NVIDIA:80GB:8'}") == [
        "blocks: cannot split 2 CPUs and 8 GPUs into 4 blocks: 2 CPUs are not divisible by 4"
    ]
    assert problems("type: fleet\nblocks: auto\nresources: {cpu: 6, gpu: 8}") == [
        "blocks: cannot split 6 CPUs and 8 GPUs into 6 blocks (auto): 8 GPUs are not divisible by 6"
    ]


def test_tpus_count_as_one_gpu_so_they_never_split() -> None:
    config = fleet("resources: {cpu: 8, gpu: 'tpu:v5p-8:4'}")
    assert instance_total_blocks(config) == 1
    (problem,) = problems("type: fleet\nblocks: 2\nresources: {cpu: 8, gpu: 'tpu:v5p-8:4'}")
    assert "1 GPUs are not divisible by 2" in problem


def test_issue_2650_fleet() -> None:
    config = fleet(
        "placement: cluster\nnodes: 2\nblocks: auto\n"
        "resources: {cpu: 2.., gpu: 0, memory: 1GB.., disk: 1GB..}"
    )
    assert instance_shape(config) == InstanceShape(cpu_count=2, memory_mb=1024, disk_mb=1024)
    assert instance_total_blocks(config) == 2


def test_simulated_resources_must_be_exact_or_a_lower_bound() -> None:
    found = problems(
        "type: fleet\nresources: {cpu: ..8, memory: 2GB..4GB, gpu: {name: [H100, A100], count: 2}}"
    )
    assert found == [
        "resources.cpu: a simulated fleet needs an exact amount or a lower bound such as '2..', "
        "got '..8'",
        "resources.memory: a simulated fleet needs an exact amount or a lower bound such as "
        "'2..', got '2..4'",
        "resources.gpu: a simulated fleet needs one GPU name, got 'H100,A100'",
    ]


def test_ray_fleet_resources_are_filters_and_default_to_unconstrained() -> None:
    elastic = fleet("backend: ray\nnodes: 0..2\nidle_duration: 1h\nresources: {gpu: 0..8}")
    assert elastic.nodes == FleetNodesSpec(0, 0, 2)
    assert elastic.idle_duration_s == 3600
    assert elastic.resources.gpu.count == Range(0, 8)
    assert fleet("backend: ray").resources == ResourcesSpec.unconstrained()


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        *[("5m", 300), ("3d", 259200), ("2w", 1209600), ("90", 90), ("30 s", 30), (3600, 3600)],
        *[("off", None), ("false", None), ("-1", None), ("true", 259200), ("null", 259200)],
    ],
)
def test_idle_duration(value: object, seconds: int | None) -> None:
    assert fleet(f"idle_duration: {value}").idle_duration_s == seconds


def test_bad_idle_duration() -> None:
    assert problems("type: fleet\nidle_duration: 1h30m") == [
        "idle_duration: expected a duration such as 30s, 5m, 1h, 3d or 2w, got '1h30m'"
    ]


def test_drover_extensions_are_kept() -> None:
    config = fleet(
        "datacenter: dc2\nnode_class: gpu\nnode_pool: big\nattributes: {rack: 1}\n"
        "meta: {team: ml}\ndrivers: [mock, raw_exec]\nenv: {HF_HOME: /cache}"
    )
    assert (config.datacenter, config.node_class, config.node_pool) == ("dc2", "gpu", "big")
    assert (config.attributes, config.meta) == ({"rack": "1"}, {"team": "ml"})
    assert (config.drivers, config.env) == (("mock", "raw_exec"), {"HF_HOME": "/cache"})


def test_fleet_reports_every_problem_at_once() -> None:
    found = problems(
        "type: fleet\nname: Bad_Name\nnodes: 2..1\nplacement: spread\nblocks: 0\n"
        "backend: k8s\nresources: {gpu: 'A100:'}\nssh_config: {}"
    )
    assert found == [
        "ssh_config: unknown field (allowed: attributes, backend, blocks, datacenter, drivers, "
        "env, idle_duration, meta, name, node_class, node_pool, nodes, placement, resources, "
        "type)",
        "backend: expected one of simulated, ray, got 'k8s'",
        "resources.gpu: empty token in 'A100:'",
        "blocks: 0 is out of range 1..100000",
        "name: 'Bad_Name' does not match ^[a-z][a-z0-9-]{1,40}$",
        "nodes: min 2 is greater than max 1 in '2..1'",
        "placement: expected one of any, cluster, got 'spread'",
    ]


def test_nodes_are_bounded() -> None:
    assert problems("type: fleet\nnodes: 100001") == ["nodes: 100001 is out of range 0..100000"]


def test_task_defaults() -> None:
    config = task("commands: [python train.py]")
    assert config == TaskConfiguration(commands=("python train.py",))
    assert (config.nodes, config.priority, config.stop_criteria, config.retry) == (
        1,
        0,
        "all-done",
        None,
    )
    assert config.resources == DEFAULT_RESOURCES
    assert config.resources.gpu == GPUSpec(count=Range(0, None))
    assert config.effective_driver == "raw_exec"


def test_issue_2650_task() -> None:
    config = task(
        "nodes: 2\nresources: {cpu: 1.., memory: 1GB.., gpu: 0, disk: 1GB..}\n"
        "commands: ['iperf3 -s']\nfleets: [my-fleet, team/shared-fleet]\n"
        "stop_criteria: master-done\npriority: 10"
    )
    assert (config.nodes, config.fleets) == (2, ("my-fleet", "team/shared-fleet"))
    assert (config.stop_criteria, config.priority) == ("master-done", 10)
    fleet_shape = instance_shape(
        fleet("nodes: 2\nresources: {cpu: 2.., gpu: 0, memory: 1GB.., disk: 1GB..}")
    )
    assert matches(config.resources, fleet_shape.to_offer())


@pytest.mark.parametrize(
    ("text", "driver"),
    [
        ("entrypoint: pkg.train:main", "ray"),
        ("entrypoint: pkg.train:main\ndriver: ray", "ray"),
        ("commands: [echo hi]\ndriver: ray", "ray"),
        ("mock: {run_for: 30s}", "mock"),
        ("driver: mock", "mock"),
        ("commands: [echo hi]\ndriver: raw_exec", "raw_exec"),
    ],
)
def test_effective_driver(text: str, driver: str) -> None:
    assert task(text).effective_driver == driver


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("nodes: 1", "commands: a task needs one of commands, entrypoint or mock (driver: mock)"),
        (
            "commands: [a]\nentrypoint: m:f",
            "commands: a task takes exactly one of commands, entrypoint or mock, got "
            "commands and entrypoint",
        ),
        (
            "commands: [a]\ndriver: mock",
            "commands: a task takes exactly one of commands, entrypoint or mock, got "
            "commands and mock",
        ),
        ("entrypoint: m:f\ndriver: raw_exec", "driver: an entrypoint runs with the ray driver"),
        ("mock: {}\ndriver: ray", "driver: mock config needs the mock driver, got 'ray'"),
        (
            "commands: [a]\nruntime_env: {pip: [x]}",
            "runtime_env: only the ray driver uses it, the driver is raw_exec",
        ),
        ("entrypoint: not-a-module", "entrypoint: 'not-a-module' does not match"),
        ("mock: {run_for: 1s, crash: 1}", "mock.crash: unknown field (allowed: exit_code,"),
        ("commands: [a]\nnodes: 0", "nodes: 0 is out of range 1..100000"),
        ("commands: [a]\npriority: 101", "priority: 101 is out of range 0..100"),
        ("commands: [a]\nstop_criteria: any", "stop_criteria: expected one of all-done,"),
        ("commands: [a]\nfleets: [Bad]", "fleets[0]: 'Bad' does not match"),
        ("commands: [a]\nenv: ['1X=2']", "env[0]: bad variable name in '1X=2'"),
        ("commands: [a]\nretry: {on_events: [oom]}", "retry.on_events[0]: expected one of"),
        ("commands: [a]\nimage: ubuntu", "image: unknown field (allowed: commands, driver,"),
    ],
)
def test_task_problems(text: str, problem: str) -> None:
    found = problems("type: task\n" + text)
    assert len(found) == 1 and found[0].startswith(problem), found


def test_task_env_forms() -> None:
    assert task("commands: [a]\nenv: [A=1, B, C=x=y]").env == {"A": "1", "B": "", "C": "x=y"}
    assert task("commands: [a]\nenv: {A: 1, B: null}").env == {"A": "1", "B": ""}


@pytest.mark.parametrize(
    ("value", "policy"),
    [
        ("true", RetryPolicy(("no-capacity", "interruption", "error"), 3600)),
        ("false", None),
        ("{}", RetryPolicy()),
        (
            "{on_events: [error, no-capacity], duration: 2h}",
            RetryPolicy(("no-capacity", "error"), 7200),
        ),
    ],
)
def test_retry_forms(value: str, policy: RetryPolicy | None) -> None:
    assert task(f"commands: [a]\nretry: {value}").retry == policy


def test_runtime_env_is_copied_for_ray_with_string_env_vars() -> None:
    config = task(
        "entrypoint: pkg.train:main\nworking_dir: /w\n"
        "runtime_env: {pip: [torch], py_modules: [lib], env_vars: {A: 1}}"
    )
    assert config.runtime_env == {"pip": ["torch"], "py_modules": ["lib"], "env_vars": {"A": "1"}}
    assert config.working_dir == "/w"


def test_task_reports_every_problem_at_once() -> None:
    found = problems(
        "type: task\ncommands: [a]\nnodes: -1\npriority: x\nresources: {cpu: 'arm:'}\nname: X"
    )
    assert found == [
        "name: 'X' does not match ^[a-z][a-z0-9-]{1,40}$",
        "nodes: -1 is out of range 1..100000",
        "resources.cpu: empty token in 'arm:'",
        "priority: expected an integer, got 'x'",
    ]


def test_task_inputs_are_bounded() -> None:
    assert problems("type: task\ncommands: [" + ", ".join(["a"] * 1001) + "]") == [
        "commands: at most 1000 items, got 1001"
    ]
    deep: Any = "x"
    for _ in range(40):
        deep = {"k": deep}
    with pytest.raises(ValidationError, match="nested deeper than 32 levels"):
        parse_task({"type": "task", "entrypoint": "m:f", "runtime_env": deep})


def test_dispatch_on_type() -> None:
    assert isinstance(parse_configuration({"type": "fleet"}), FleetConfiguration)
    assert isinstance(parse_configuration({"type": "task", "driver": "mock"}), TaskConfiguration)
    assert problems("type: service") == ["type: expected one of fleet, task, got 'service'"]
    assert problems("name: x") == ["type: expected one of fleet, task, got None"]
    with pytest.raises(ValidationError, match="configuration: expected a mapping, got"):
        parse_configuration(["type", "fleet"])
    with pytest.raises(ValidationError, match="type: expected 'fleet', got 'task'"):
        parse_fleet({"type": "task"})
