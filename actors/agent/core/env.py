"""The environment a task starts with: Nomad's NOMAD_* runtime variables, named DROVER_*.

Order as in Nomad's taskenv builder: the runtime variables first, then the task's own
`env` block over them (a task may override them, as in Nomad).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from contracts import Allocation, Job, Task, TaskGroup

_NOT_ENV = re.compile(r"[^A-Za-z0-9_]")
_RAY_GPU = re.compile(r"-gpu(\d+)$")  # fingerprint.py's IDs for Ray's GPUs: <node>-gpu<k>


def visible_device(device_id: str) -> str:
    """A GPU as NVIDIA_VISIBLE_DEVICES names it: the NVIDIA container runtime takes GPU UUIDs
    (`GPU-...`, as Nomad's plugin passes them) or indexes. Ray reports no UUIDs, so the GPUs
    fingerprinted from Ray carry drover's `<node>-gpu<k>` IDs: those are passed as `k`, their
    position on the node."""
    if device_id.startswith("GPU-"):
        return device_id
    match = _RAY_GPU.search(device_id)
    return match.group(1) if match else device_id


def task_env(
    alloc: Allocation,
    job: Job,
    group: TaskGroup,
    task: Task,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """`extra`: a run's cluster variables (cluster.py), under the task's own `env`."""
    env = {
        "DROVER_ALLOC_ID": alloc.id,
        "DROVER_ALLOC_NAME": alloc.name,
        "DROVER_ALLOC_INDEX": str(alloc.index),
        "DROVER_SHORT_ALLOC_ID": alloc.id[:8],
        "DROVER_NAMESPACE": alloc.namespace,
        "DROVER_JOB_ID": job.id,
        "DROVER_JOB_NAME": job.name or job.id,
        "DROVER_GROUP_NAME": group.name,
        "DROVER_TASK_NAME": task.name,
        "DROVER_NODE_ID": alloc.node_id,
        "DROVER_NODE_NAME": alloc.node_name,
        "DROVER_CPU_LIMIT": str(task.resources.cpu),
        "DROVER_MEMORY_LIMIT": str(task.resources.memory_mb),
    }
    if group.share is not None:
        # A run's rank holds a share of its instance, whatever its task asked (share.py).
        held = alloc.allocated_resources
        env["DROVER_CPU_LIMIT"], env["DROVER_MEMORY_LIMIT"] = str(held.cpu), str(held.memory_mb)
    # Meta is inherited job -> group -> task, the innermost winning (NOMAD_META_<key>).
    for key, value in {**job.meta, **group.meta, **task.meta}.items():
        env[f"DROVER_META_{_NOT_ENV.sub('_', key)}"] = value
    # Nomad's nvidia device plugin exposes the allocated GPUs to the task this way.
    gpus = [
        visible_device(i)
        for d in alloc.allocated_resources.devices
        if d.vendor == "nvidia"
        for i in d.device_ids
    ]
    if gpus:
        env["NVIDIA_VISIBLE_DEVICES"] = ",".join(gpus)
    if extra:
        env.update(extra)
    env.update(task.env)
    return env


class TaskEnv(Mapping[str, str]):
    """`task_env` built on first use: a driver that never reads the environment (the mock
    driver, which simulated fleets run by the hundred thousand) never pays for it."""

    __slots__ = ("_args", "_env")

    def __init__(
        self,
        alloc: Allocation,
        job: Job,
        group: TaskGroup,
        task: Task,
        extra: Mapping[str, str] | None = None,
    ) -> None:
        self._args = (alloc, job, group, task, extra)
        self._env: dict[str, str] | None = None

    def _built(self) -> dict[str, str]:
        env = self._env
        if env is None:
            env = self._env = task_env(*self._args)
        return env

    def __getitem__(self, key: str) -> str:
        return self._built()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._built())

    def __len__(self) -> int:
        return len(self._built())
