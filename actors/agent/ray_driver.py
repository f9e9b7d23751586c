"""The `ray` task driver: runs a Python entrypoint as a Ray task pinned to the agent's node,
holding the allocation's CPUs and GPUs in Ray's own accounting.

Task config: `entrypoint = "package.module:function"`, optional `args` (list), `kwargs`
(map) and `runtime_env` (Ray's: `working_dir`, `py_modules`, `pip`, `env_vars`, ...), as
`ray job submit` takes it; local paths in it are uploaded to the cluster by the API before the
job is registered (launch/ray_packages.py), so the task sees them as URIs. The function's
return value is ignored; an exception fails the task. CPU and GPU counts for Ray come from
what the allocation holds (DROVER_CPU_LIMIT MHz / mhz_per_cpu, at least a sliver, so tiny
tasks still schedule; a run's GPUs per node, else the task's nvidia GPUs).

Ray queues a task until its node has the resources, so a submitted task is pending, not
running. The task is a generator whose first item is its start marker (the Ray node it runs
on and its pid): Ray delivers it only once the task really runs, with the dashboard and its
state API off (as drover runs Ray), and on any node of a cluster, where a marker file would
need a shared disk. The driver reports the task pending until the marker arrives, then
running on that node, then how it ended. A task its node can never hold (more CPUs or GPUs
than the node has, or a node that is gone) Ray refuses at once under hard node affinity:
it fails, saying so.

Usage: Ray offers nothing cheap per task (its state API and metrics need the dashboard, off
here). But the start marker names the task's worker process, on this agent's own node (hard
affinity), so the driver reads that process and its children from the OS, as raw_exec does
(core/usage.py): CPU time since the task started, and resident memory, which includes the
Ray worker's own runtime (roughly 100 MB), as `ps` would show it. Not a stand-in: an
allocated figure reported as use would read as 100 % busy forever to the autoscaler.

A task Ray retried after its worker died would hide the crash behind a second run: tasks
are never retried here; the allocation fails and the scheduler's reschedule policy decides.

Signals (`drover alloc signal`, /v1/client/allocation/:id/signal) go to the task's worker
process, the pid of its start marker, on this node; a task Ray has not started yet is "not
running", as Nomad says of a task without a handle.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import RayTaskError, TaskUnschedulableError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors.agent.core.drivers import DriverError, TaskHandle, TaskState, TaskStatus
from actors.agent.core.drivers.base import send_signal
from actors.agent.core.usage import ProcessTreeSampler
from contracts import Task

PENDING_MESSAGE = "waiting for Ray to start the task"
MESSAGE_MAX = 500
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _run_entrypoint(
    entrypoint: str, args: list[Any], kwargs: dict[str, Any], env: dict[str, str]
) -> Iterator[tuple[str, int]]:
    # The start marker before the entrypoint, which may run for days.
    yield ray.get_runtime_context().get_node_id(), os.getpid()
    # Ray picked the task's GPUs and says which: its CUDA_VISIBLE_DEVICES wins over ours.
    ray_gpus = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ.update(env)
    if ray_gpus is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = ray_gpus
    module_name, _, function_name = entrypoint.partition(":")
    function = getattr(importlib.import_module(module_name), function_name)
    function(*args, **kwargs)


LOCAL_PATH_KEYS = ("working_dir", "py_modules")


def runtime_env_local_paths(runtime_env: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(key, path) of every local path in `working_dir` and `py_modules` (not a URI)."""
    found = []
    for key in LOCAL_PATH_KEYS:
        values = runtime_env.get(key)
        for value in values if isinstance(values, list) else [values] if values else []:
            if isinstance(value, str) and "://" not in value:
                found.append((key, value))
    return found


def local_paths(runtime_env: Mapping[str, Any]) -> list[str]:
    """Problems with paths Ray cannot take per task (it wants URIs there): the API uploads
    local ones when the job is registered, so one reaching a driver was never uploaded."""
    return [
        f"config.runtime_env.{key}: {value!r} is a local path; submit the job through "
        "drover's API, which uploads it to the Ray cluster, or give a URI"
        for key, value in runtime_env_local_paths(runtime_env)
    ]


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
    sampler: ProcessTreeSampler | None = None  # its worker process, once it runs here


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
        runtime_env = task.config.get("runtime_env", {})
        if not isinstance(runtime_env, dict):
            problems.append("config.runtime_env must be a map")
        else:
            problems += local_paths(runtime_env)
        return problems

    def start(self, alloc_id: str, task: Task, env: Mapping[str, str], now: float) -> TaskHandle:
        problems = self.validate(task)
        if problems:
            raise DriverError("; ".join(problems))
        gpus = int(
            env.get("DROVER_GPUS_PER_NODE")
            or sum(d.count for d in task.resources.devices if "gpu" in d.name)
        )
        mhz = int(env.get("DROVER_CPU_LIMIT") or task.resources.cpu)
        cpus = max(mhz / self.mhz_per_cpu, 0.01)
        options: dict[str, Any] = {
            "scheduling_strategy": NodeAffinitySchedulingStrategy(self.node_id, soft=False),
            "num_cpus": cpus,
            "num_gpus": gpus,
            "max_retries": 0,  # a crash fails the allocation (see the module doc)
            "name": f"{alloc_id[:8]}-{task.name}",
        }
        if task.config.get("runtime_env"):
            options["runtime_env"] = dict(task.config["runtime_env"])
        runs = self._remote.options(**options).remote(
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
                if handle.ray_node == self.node_id:
                    handle.sampler = ProcessTreeSampler(handle.pid, now)
                    # Ray reuses workers: the CPU it used before this task must not count.
                    handle.sampler.sample(now)
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

    def usage(self, handle: TaskHandle, now: float) -> tuple[float, float] | None:
        """(CPU MHz, resident MB) of the task's worker process tree since the last sample;
        None until it runs on this node, and once it ended."""
        assert isinstance(handle, RayHandle)
        if handle.sampler is None or handle.outcome is not None or handle.stopped:
            return None
        used = handle.sampler.sample(now)
        if used is None:
            return None
        cores, memory_mb = used
        return cores * self.mhz_per_cpu, memory_mb

    def signal(self, handle: TaskHandle, signal_name: str) -> None:
        """os.kill of the task's Ray worker process, once it runs on this node."""
        assert isinstance(handle, RayHandle)
        if handle.outcome is not None or handle.stopped or handle.pid is None:
            raise DriverError("Task not running")
        if handle.ray_node != self.node_id:
            raise DriverError(f"the task runs on Ray node {handle.ray_node}, not this agent's")
        send_signal(handle.pid, signal_name)

    def collect(self, alloc_id: str) -> None:
        """Ray keeps the task's files (its working_dir) in its own session folders."""

    def local_dir(self, alloc_id: str, task_name: str) -> Path | None:
        return None  # the task runs in Ray's working_dir, not a folder of the agent's

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
        handle.sampler = None  # its worker may run another task now
