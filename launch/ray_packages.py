"""Local code for Ray tasks, uploaded to the cluster when a job is registered (as
`ray job submit` does): a `ray` task's `runtime_env.working_dir` and `py_modules` that are
local paths become `gcs://` URIs of packages in the cluster's store, which any node can fetch.

Ray accepts local paths only for a whole Ray job (`ray.init`); per task it wants URIs, and a
task's worker on another node could not see the submitter's files anyway. The upload runs in
the process serving the API (connected to Ray), so the paths are read on that machine: the
CLI sends the job file's directory as the default `working_dir`. A package with the same
content is uploaded once (Ray names packages by their hash).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from typing import Any

from ray._private.runtime_env.py_modules import upload_py_modules_if_needed
from ray._private.runtime_env.working_dir import upload_working_dir_if_needed

from actors.agent.ray_driver import runtime_env_local_paths
from contracts import Job, Task
from contracts.errors import ValidationError

log = logging.getLogger(__name__)

MAX_FILES = 10_000
MAX_BYTES = 100 << 20  # Ray's own limit for a package is larger; this keeps uploads quick


def package_job(job: Job) -> Job:
    """The job with the local paths of its `ray` tasks' runtime_env uploaded and replaced by
    URIs; a job without any is returned as is. ValidationError names a path that is not there."""
    groups = []
    changed = False
    for group in job.task_groups:
        tasks = []
        for task in group.tasks:
            packaged = _package_task(task, f"group {group.name!r} task {task.name!r}")
            changed |= packaged is not task
            tasks.append(packaged)
        groups.append(dataclasses.replace(group, tasks=tuple(tasks)))
    return dataclasses.replace(job, task_groups=tuple(groups)) if changed else job


def _package_task(task: Task, where: str) -> Task:
    runtime_env = task.config.get("runtime_env") if task.driver == "ray" else None
    if not isinstance(runtime_env, dict):
        return task
    paths = runtime_env_local_paths(runtime_env)
    if not paths:
        return task
    for key, path in paths:
        if not os.path.exists(path):
            raise ValidationError(
                f"{where}: runtime_env.{key}: {path!r} does not exist on the machine "
                "serving drover's API (local code is uploaded from there)"
            )
        _check_size(f"{where}: runtime_env.{key}: {path!r}", path)
    env: dict[str, Any] = dict(runtime_env)
    try:
        env = upload_working_dir_if_needed(env, include_gitignore=True, logger=log)
        env = upload_py_modules_if_needed(env, include_gitignore=True, logger=log)
    except (OSError, ValueError, TypeError, RuntimeError) as exc:  # Ray's refusals
        raise ValidationError(f"{where}: runtime_env: Ray could not take it: {exc}") from None
    return dataclasses.replace(task, config={**task.config, "runtime_env": env})


def _check_size(where: str, path: str) -> None:
    """Refuse a tree too large to ship before reading it all (a working_dir of `/` or a
    home directory would have the API zip everything it can see)."""
    if os.path.isfile(path):
        return
    files = size = 0
    for _, _, names in os.walk(path):
        files += len(names)
        if files > MAX_FILES:
            raise ValidationError(f"{where}: more than {MAX_FILES} files: ship a smaller tree")
    for root, _, names in os.walk(path):
        for name in names:
            with contextlib.suppress(OSError):
                size += os.path.getsize(os.path.join(root, name))
    if size > MAX_BYTES:
        raise ValidationError(f"{where}: {size >> 20} MB: at most {MAX_BYTES >> 20} MB")
