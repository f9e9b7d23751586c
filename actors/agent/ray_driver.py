"""The `ray` task driver: runs a Python entrypoint as a Ray task pinned to the agent's node,
holding the allocation's CPUs and GPUs in Ray's own accounting.

Task config: `entrypoint = "package.module:function"`, optional `args` (list) and `kwargs`
(map). The function's return value is ignored; an exception fails the task. CPU and GPU
counts for Ray come from the task's resources: cpu MHz / mhz_per_cpu (at least a sliver, so
tiny tasks still schedule) and the number of allocated nvidia GPUs.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors.agent.core.drivers import DriverError, TaskHandle, TaskState, TaskStatus
from contracts import Task


def _run_entrypoint(
    entrypoint: str, args: list[Any], kwargs: dict[str, Any], env: dict[str, str]
) -> None:
    import os

    os.environ.update(env)
    module_name, _, function_name = entrypoint.partition(":")
    function = getattr(importlib.import_module(module_name), function_name)
    function(*args, **kwargs)


@dataclass
class RayHandle(TaskHandle):
    ref: Any = None
    stopped: bool = False


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
        ref = self._remote.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(self.node_id, soft=False),
            num_cpus=max(task.resources.cpu / self.mhz_per_cpu, 0.01),
            num_gpus=gpus,
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
            ref=ref,
        )

    def poll(self, handle: TaskHandle, now: float) -> TaskStatus:
        assert isinstance(handle, RayHandle)
        ready, _ = ray.wait([handle.ref], timeout=0)
        if not ready:
            return TaskStatus(TaskState.RUNNING, None, "running as a Ray task")
        try:
            ray.get(handle.ref)
        except Exception as exc:  # the task's own failure, reported with its message
            if handle.stopped:
                return TaskStatus(TaskState.COMPLETE, 0, "stopped")
            return TaskStatus(TaskState.FAILED, 1, f"{type(exc).__name__}: {exc}"[:500])
        return TaskStatus(TaskState.COMPLETE, 0, "entrypoint returned")

    def stop(self, handle: TaskHandle, now: float) -> None:
        assert isinstance(handle, RayHandle)
        handle.stopped = True
        ray.cancel(handle.ref, force=True)
