"""dstack's task configuration (core/models/configurations.py, profiles.py) with drover's
drivers.

    type: task
    name: train               # optional; lower case, dstack style
    nodes: 2                  # >= 1, default 1; job 0 is the master
    resources: {gpu: H100:8}  # dstack's normal defaults for what is left out
    commands: [python train.py]     # raw_exec (or ray) ...
    entrypoint: pkg.train:main      # ... or a Ray "module:function" (driver ray) ...
    mock: {run_for: 30s}            # ... or the mock driver: exactly one of the three
    env: {A: "1"}             # or dstack's list form [A=1, B]
    fleets: [gpu-pool]        # restrict to these fleets (project/fleet for imported ones)
    priority: 0               # 0..100
    stop_criteria: all-done   # all-done | master-done
    retry: true               # or {on_events: [no-capacity, interruption, error], duration: 1h}
    working_dir: /workflow
    runtime_env: {pip: [torch], env_vars: {A: "1"}}   # passed to Ray as is (ray driver only)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from contracts.dstack.fields import (
    MAX_NODES,
    NAME,
    Problems,
    check_keys,
    expect_choice,
    expect_int,
    expect_mapping,
    expect_str,
    expect_str_list,
    expect_str_map,
    optional,
    parse_duration,
    parse_env,
    plain_data,
    show,
)
from contracts.dstack.resources import DEFAULT_RESOURCES, ResourcesSpec, parse_resources
from contracts.errors import ValidationError
from contracts.fast_init import install_fast_inits

Driver = Literal["raw_exec", "ray", "mock"]
StopCriteria = Literal["all-done", "master-done"]
RetryEvent = Literal["no-capacity", "interruption", "error"]
RETRY_EVENTS: tuple[RetryEvent, ...] = ("no-capacity", "interruption", "error")
DEFAULT_RETRY_S = 3600
MOCK_KEYS = ("run_for", "exit_code", "start_error")  # the mock driver's config keys
_ENTRYPOINT = re.compile(r"^[A-Za-z_][\w.]{0,200}:[A-Za-z_]\w{0,100}$")
_FLEET_REF = re.compile(r"^([a-z][a-z0-9-]{1,40}/)?[a-z][a-z0-9-]{1,40}$")
TASK_KEYS = (
    "type", "name", "nodes", "resources", "commands", "entrypoint", "driver", "env", "fleets",
    "priority", "stop_criteria", "retry", "working_dir", "runtime_env", "mock",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retry the run on these events for up to `duration_s` (dstack's ProfileRetry)."""

    on_events: tuple[RetryEvent, ...] = RETRY_EVENTS
    duration_s: int = DEFAULT_RETRY_S


@dataclass(frozen=True, slots=True)
class TaskConfiguration:
    name: str | None = None
    nodes: int = 1
    resources: ResourcesSpec = DEFAULT_RESOURCES
    commands: tuple[str, ...] = ()
    entrypoint: str | None = None
    driver: Driver | None = None
    env: dict[str, str] = field(default_factory=dict)
    fleets: tuple[str, ...] = ()
    priority: int = 0
    stop_criteria: StopCriteria = "all-done"
    retry: RetryPolicy | None = None  # None: no retry
    working_dir: str | None = None
    runtime_env: dict[str, Any] | None = None
    mock: dict[str, Any] | None = None

    @property
    def effective_driver(self) -> Driver:
        """mock for `mock`/`driver: mock`, ray for an entrypoint, else the driver or raw_exec."""
        if self.mock is not None or self.driver == "mock":
            return "mock"
        if self.entrypoint is not None:
            return "ray"
        return self.driver or "raw_exec"


def parse_retry(value: object, where: str = "retry") -> RetryPolicy | None:
    """`true` (all events for 1h), `false` (None) or `{on_events, duration}`; a missing
    `on_events` means all events, a missing duration 1h."""
    if value is True:
        return RetryPolicy()
    if value is False:
        return None
    data = expect_mapping(value, where)
    problems = Problems()
    for problem in check_keys(data, ("on_events", "duration"), where):
        problems.add(problem)
    events = optional(data, "on_events", where, _events, problems)
    duration = optional(data, "duration", where, parse_duration, problems)
    problems.raise_if_any()
    return RetryPolicy(
        on_events=RETRY_EVENTS if events is None else events,
        duration_s=DEFAULT_RETRY_S if duration is None else duration,
    )


def _events(value: object, where: str) -> tuple[RetryEvent, ...]:
    items = expect_str_list(value, where)
    problems = Problems()
    for i, item in enumerate(items):
        problems.run(expect_choice, item, f"{where}[{i}]", RETRY_EVENTS)
    problems.raise_if_any()
    return tuple(event for event in RETRY_EVENTS if event in items)


def _runtime_env(value: object, where: str) -> dict[str, Any]:
    data = expect_mapping(value, where)
    problems = Problems()
    copied = cast(dict[str, Any], problems.run(plain_data, data, where))
    env_vars = optional(data, "env_vars", where, expect_str_map, problems)
    optional(data, "working_dir", where, expect_str, problems)
    optional(data, "py_modules", where, expect_str_list, problems)
    problems.raise_if_any()
    if env_vars is not None:
        copied["env_vars"] = env_vars  # Ray wants strings: `A: 1` becomes "1"
    return copied


def _mock(value: object, where: str) -> dict[str, Any]:
    data = expect_mapping(value, where)
    unknown = check_keys(data, MOCK_KEYS, where)
    if unknown:
        raise ValidationError(unknown)
    return cast(dict[str, Any], plain_data(data, where))


def _driver(value: object, where: str) -> Driver:
    return cast(Driver, expect_choice(value, where, ("raw_exec", "ray", "mock")))


def _program_problems(config: TaskConfiguration) -> list[str]:
    """Exactly one of commands, entrypoint and mock, and a driver that runs it."""
    chosen = [
        name
        for name, given in (
            ("commands", bool(config.commands)),
            ("entrypoint", config.entrypoint is not None),
            ("mock", config.mock is not None or config.driver == "mock"),
        )
        if given
    ]
    if not chosen:
        return ["commands: a task needs one of commands, entrypoint or mock (driver: mock)"]
    if len(chosen) > 1:
        both = " and ".join(chosen)
        return [
            f"{chosen[0]}: a task takes exactly one of commands, entrypoint or mock, got {both}"
        ]
    problems = []
    if config.entrypoint is not None and config.driver not in (None, "ray"):
        problems.append(f"driver: an entrypoint runs with the ray driver, got {config.driver!r}")
    if config.mock is not None and config.driver not in (None, "mock"):
        problems.append(f"driver: mock config needs the mock driver, got {config.driver!r}")
    if config.runtime_env is not None and config.effective_driver != "ray":
        problems.append(
            f"runtime_env: only the ray driver uses it, the driver is {config.effective_driver}"
        )
    return problems


def _name(value: object, where: str) -> str:
    return expect_str(value, where, NAME)


def _nodes(value: object, where: str) -> int:
    return expect_int(value, where, 1, MAX_NODES)


def _priority(value: object, where: str) -> int:
    return expect_int(value, where, 0, 100)


def _entrypoint(value: object, where: str) -> str:
    return expect_str(value, where, _ENTRYPOINT)


def _fleets(value: object, where: str) -> tuple[str, ...]:
    return expect_str_list(value, where, _FLEET_REF)


def parse_task(data: object) -> TaskConfiguration:
    """A TaskConfiguration from a loaded YAML/JSON document; every problem at once."""
    doc = expect_mapping(data, "task")
    problems = Problems()
    for problem in check_keys(doc, TASK_KEYS, ""):
        problems.add(problem)
    if doc.get("type", "task") != "task":
        problems.add(f"type: expected 'task', got {show(doc.get('type'))}")
    before = len(problems.items)
    commands = optional(doc, "commands", "", expect_str_list, problems) or ()
    entrypoint = optional(doc, "entrypoint", "", _entrypoint, problems)
    driver = optional(doc, "driver", "", _driver, problems)
    runtime_env = optional(doc, "runtime_env", "", _runtime_env, problems)
    mock = optional(doc, "mock", "", _mock, problems)
    program_known = len(problems.items) == before
    config = TaskConfiguration(
        name=optional(doc, "name", "", _name, problems),
        nodes=optional(doc, "nodes", "", _nodes, problems) or 1,
        resources=optional(doc, "resources", "", parse_resources, problems) or DEFAULT_RESOURCES,
        commands=commands,
        entrypoint=entrypoint,
        driver=driver,
        env=optional(doc, "env", "", parse_env, problems) or {},
        fleets=optional(doc, "fleets", "", _fleets, problems) or (),
        priority=optional(doc, "priority", "", _priority, problems) or 0,
        stop_criteria=optional(doc, "stop_criteria", "", _stop_criteria, problems) or "all-done",
        retry=optional(doc, "retry", "", parse_retry, problems),
        working_dir=optional(doc, "working_dir", "", expect_str, problems),
        runtime_env=runtime_env,
        mock=mock,
    )
    if program_known:
        for problem in _program_problems(config):
            problems.add(problem)
    problems.raise_if_any()
    return config


def _stop_criteria(value: object, where: str) -> StopCriteria:
    return cast(StopCriteria, expect_choice(value, where, ("all-done", "master-done")))


install_fast_inits(__name__)
