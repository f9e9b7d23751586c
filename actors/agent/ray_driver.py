"""The `ray` task driver: runs a Python entrypoint as a Ray task pinned to the agent's node,
holding the allocation's CPUs and GPUs in Ray's own accounting.

Task config: `entrypoint = "package.module:function"`, optional `args` (list) and `kwargs`
(map). The function's return value is ignored; an exception fails the task. CPU and GPU
counts for Ray come from the task's resources: cpu MHz / mhz_per_cpu (at least a sliver, so
tiny tasks still schedule) and the number of allocated nvidia GPUs.

Ray queues a task until its node has the resources, so a submitted task is pending, not
running. The task is a generator whose first item is its start marker (the Ray node it runs
on and its pid): Ray delivers it only once the task really runs, with the dashboard and its
state API off (as drover runs Ray), and on any node of a cluster, where a marker file would
need a shared disk. The driver reports the task pending until the marker arrives, then
running on that node, then how it ended. A task its node can never hold (more CPUs or GPUs
than the node has, or a node that is gone) Ray refuses at once under hard node affinity:
it fails, saying so.

A task Ray retried after its worker died would hide the crash behind a second run: tasks
are never retried here; the allocation fails and the scheduler's reschedule policy decides.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import RayTaskError, TaskUnschedulableError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors.agent.core.drivers import DriverError, TaskHandle, TaskState, TaskStatus
from contracts import Task

PENDING_MESSAGE = "waiting for Ray to start the task"
MESSAGE_MAX = 500
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _run_entrypoint(
    entrypoint: str, args: list[Any], kwargs: dict[str, Any], env: dict[str, str]
) -> Iterator[tuple[str, int]]:
    # The start marker before the entrypoint, which may run for days.
    yield ray.get_runtime_context().get_node_id(), os.getpid()
    os.environ.update(env)
    module_name, _, function_name = entrypoint.partition(":")
    function = getattr(importlib.import_module(module_name), function_name)
    function(*args, **kwargs)


def failure_message(exc: BaseException) -> str:
    """The user's exception as `Type: text`, without Ray's wrapper and traceback."""
    cause = exc.cause if isinstance(exc, RayTaskError) else exc
    if isinstance(cause, BaseException) and not isinstance(cause, RayTaskError):
        detail = str(cause)
        text = f"{type(cause).__name__}: {detail}" if detail else type(cause).__name__
    else:  # a cause Ray could not rebuild: its traceback ends with the exception's line
        lines = [line for line in _ANSI.sub("", str(exc)).splitlines() if line.strip()]
        text = lines[-1].strip() if lines else type(exc).__name__
    return text[:MESSAGE_MAX]


@dataclass
class RayHandle(TaskHandle):
    runs: Any = None  # the task's ObjectRefGenerator: the start marker, then its end
    asks: str = ""  # what it asked Ray for, e.g. "0.1 CPU, 1 GPU"
    ray_node: str | None = None  # where the task runs, once its start marker arrived
    pid: int | None = None
    stopped: bool = False
    outcome: TaskStatus | None = None  # how it ended, once it has


class RayDriver:
    name = "ray"

    def __init__(self, node_id: str, *, mhz_per_cpu: int = 1000) -> None:
        self.node_id = node_id
        self.mhz_per_cpu = mhz_per_cpu
        self._remote = ray.remote(_run_entrypoint)

    def validate(self, task: Task) -> list[str]:
        entrypoint = task.config.get("entrypoint")
        problems = []
        if not isinstance(entrypoint, str) or ":" not in entrypoint:
            problems.append('config.entrypoint must be "module:function"')
        if not isinstance(task.config.get("args", []), list):
            problems.append("config.args must be a list")
        if not isinstance(task.config.get("kwargs", {}), dict):
            problems.append("config.kwargs must be a map")
        return problems

    def start(self, alloc_id: str, task: Task, env: Mapping[str, str], now: float) -> TaskHandle:
        problems = self.validate(task)
        if problems:
            raise DriverError("; ".join(problems))
        gpus = sum(d.count for d in task.resources.devices if "gpu" in d.name)
        cpus = max(task.resources.cpu / self.mhz_per_cpu, 0.01)
        runs = self._remote.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(self.node_id, soft=False),
            num_cpus=cpus,
            num_gpus=gpus,
            max_retries=0,  # a crash fails the allocation (see the module doc)
            name=f"{alloc_id[:8]}-{task.name}",
        ).remote(
            task.config["entrypoint"],
            list(task.config.get("args", [])),
            dict(task.config.get("kwargs", {})),
            dict(env),
        )
        return RayHandle(
            alloc_id=alloc_id,
            task_name=task.name,
            driver=self.name,
            started_at=now,
            wake_at=None,
            pending=True,
            runs=runs,
            asks=f"{cpus:g} CPU, {gpus} GPU",
        )

    def poll(self, handle: TaskHandle, now: float) -> TaskStatus:
        assert isinstance(handle, RayHandle)
        # Each ready item is taken at once: a task may have started and ended between polls.
        while handle.outcome is None and ray.wait([handle.runs], timeout=0)[0]:
            try:
                marker = ray.get(next(handle.runs))
            except StopIteration:
                self._end(handle, TaskStatus(TaskState.COMPLETE, 0, "entrypoint returned"))
            except Exception as exc:  # the task's own failure, or its cancellation
                if handle.stopped:
                    self._end(handle, TaskStatus(TaskState.COMPLETE, 0, "stopped"))
                else:
                    self._end(handle, TaskStatus(TaskState.FAILED, 1, self._failure(handle, exc)))
            else:
                handle.ray_node, handle.pid = marker
        if handle.outcome is not None:
            return handle.outcome
        if handle.ray_node is None:
            return TaskStatus(TaskState.PENDING, None, PENDING_MESSAGE)
        return TaskStatus(
            TaskState.RUNNING,
            None,
            f"running as a Ray task on node {handle.ray_node} (pid {handle.pid})",
        )

    def stop(self, handle: TaskHandle, now: float) -> None:
        assert isinstance(handle, RayHandle)
        if handle.outcome is None and not handle.stopped:
            handle.stopped = True
            ray.cancel(handle.runs, force=True)  # a queued task is dropped, a running one killed

    def _failure(self, handle: RayHandle, exc: Exception) -> str:
        if isinstance(exc, TaskUnschedulableError):  # Ray's text names a lease, not the node
            return (
                f"Ray cannot run the task ({handle.asks}) on node {self.node_id}:"
                " the node is gone or can never hold it"
            )
        return failure_message(exc)

    @staticmethod
    def _end(handle: RayHandle, outcome: TaskStatus) -> None:
        handle.outcome = outcome
        handle.runs = None  # Ray may free the task's objects
