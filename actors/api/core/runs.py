"""dstack runs (`type: task`) as drover jobs, and the runs' view of jobs (`drover ps`).

A run is a batch job underneath, so job status, versions, evaluations, allocations, traces,
the HTTP API and the CLI all work for it:

- the job's ID is the run's name; `all_at_once` (the leader commits a gang whole or not);
  meta `drover.run` marks it as a run, with its stop criteria and no-capacity behaviour;
- one group, `node`, with count = `nodes`: allocation `<run>.node[i]` is rank i (rank 0 the
  master), and the group's `share` carries the run's resource ranges (contracts/share.py),
  a gang when nodes > 1;
- one task, `main`: `commands` run by raw_exec as one `sh -e` script (in `working_dir`), an
  `entrypoint` by the ray driver (with `runtime_env`), or the mock driver;
- ranks are never rescheduled: a failed rank fails the run (the leader stops the others,
  actors/leader/core/runs.py), as dstack does.

Priority: dstack's 0..100 (default 0) becomes Nomad's job priority, clamped to 1..100, and
50 (Nomad's default) when the file gives none. With no capacity a run waits (a blocked
evaluation) and starts as soon as instances free up; `retry: false` asks for dstack's
behaviour instead: the run fails at once. `retry` with `no-capacity` and a `duration` waits
that long at most: the leader then fails the run (actors/leader/core/runs.py).
"""

from __future__ import annotations

import secrets
import shlex
from collections.abc import Callable, Sequence
from typing import Any

from contracts import (
    Allocation,
    ClientStatus,
    Evaluation,
    Job,
    JobType,
    Node,
    ReschedulePolicy,
    Resources,
    Task,
    TaskGroup,
)
from contracts.dstack.task import TaskConfiguration
from contracts.share import (
    BLOCK_TYPE,
    ENDED_NO_CAPACITY,
    FLEET_ATTRIBUTE,
    MASTER_DONE,
    NO_CAPACITY_FAIL,
    NO_CAPACITY_META,
    NO_CAPACITY_WAIT,
    RUN_ENDED_META,
    RUN_META,
    STOP_CRITERIA_META,
    WAIT_LIMIT_META,
    held_ids,
    node_block_ids,
    share_request,
)

GROUP = "node"
TASK = "main"
DEFAULT_PRIORITY = 50
NEVER_RESCHEDULE = ReschedulePolicy(attempts=0, unlimited=False)


def run_job(
    config: TaskConfiguration,
    *,
    fail_without_capacity: bool = False,
    wait_limit_s: float | None = None,
    working_dir: str = "",
    priority_given: bool = True,
) -> Job:
    """The job a run is. `working_dir`: where the task file is (commands and Ray's
    working_dir default to it), unless the file sets `working_dir`; `priority_given`: the
    file set `priority` (else the run gets Nomad's default, 50); `wait_limit_s`: how long
    the run may wait for capacity (None: for good)."""
    name = config.name or f"run-{secrets.token_hex(3)}"
    directory = config.working_dir or working_dir
    driver = config.effective_driver
    task_config: dict[str, Any]
    if driver == "mock":
        task_config = dict(config.mock or {})
    elif driver == "ray":
        task_config = {"entrypoint": config.entrypoint or ""}
        runtime_env = dict(config.runtime_env or {})
        if directory:
            runtime_env.setdefault("working_dir", directory)
        if runtime_env:
            task_config["runtime_env"] = runtime_env
    else:
        script = "\n".join(config.commands)
        if directory:
            # The file's directory where the instance has it (simulated instances share the
            # API's machine; a Ray node may not have it: ship code with an entrypoint there).
            quoted = shlex.quote(directory)
            script = f"if [ -d {quoted} ]; then cd {quoted}; fi\n{script}"
        task_config = {"command": "/bin/sh", "args": ["-ec", script]}
    task = Task(TASK, driver, task_config, env=dict(config.env), resources=Resources(0, 0))
    group = TaskGroup(
        GROUP,
        count=config.nodes,
        tasks=(task,),
        reschedule_policy=NEVER_RESCHEDULE,
        share=share_request(config.resources, gang=config.nodes > 1, fleets=config.fleets),
    )
    priority = min(100, max(1, config.priority)) if priority_given else DEFAULT_PRIORITY
    return Job(
        id=name,
        name=name,
        type=JobType.BATCH,
        priority=priority,
        all_at_once=True,
        task_groups=(group,),
        meta={
            RUN_META: "task",
            STOP_CRITERIA_META: config.stop_criteria,
            NO_CAPACITY_META: NO_CAPACITY_FAIL if fail_without_capacity else NO_CAPACITY_WAIT,
            **({WAIT_LIMIT_META: f"{wait_limit_s:g}"} if wait_limit_s is not None else {}),
        },
    )


def current_ranks(job: Job, allocs: Sequence[Allocation], since_version: int) -> list[Allocation]:
    """The ranks of the run as last submitted: a run submitted again under its name (after
    it ended) starts from its new version, and its status is not the old ranks'."""
    return [a for a in allocs if a.task_group == GROUP and a.job_version >= since_version]


def run_status(
    job: Job, allocs: Sequence[Allocation], evals: Sequence[Evaluation], since_version: int = 0
) -> str:
    """dstack's run status, read from the job and its current ranks: submitted (waiting for
    capacity), provisioning, running, done, failed or terminated (stopped by the user)."""
    ranks = current_ranks(job, allocs, since_version)
    master_done = job.meta.get(STOP_CRITERIA_META) == MASTER_DONE and any(
        a.index == 0 and a.client_status is ClientStatus.COMPLETE for a in ranks
    )
    if master_done:
        return "done"  # what the workers did after the master finished does not count
    if any(a.client_status in (ClientStatus.FAILED, ClientStatus.LOST) for a in ranks):
        return "failed"
    live = [a for a in ranks if not a.client_terminal()]
    count = job.task_groups[0].count if job.task_groups else 0
    completed = sum(1 for a in ranks if a.client_status is ClientStatus.COMPLETE)
    if ranks and completed >= count and not live:
        return "done"
    if job.stop:
        return "failed" if job.meta.get(RUN_ENDED_META) == ENDED_NO_CAPACITY else "terminated"
    if live and all(a.client_status is ClientStatus.RUNNING for a in live):
        return "running"
    if live:
        return "provisioning"
    no_capacity = any(e.failed_tg_allocs and not e.blocked_eval and e.terminal() for e in evals)
    if not ranks and no_capacity and job.meta.get(NO_CAPACITY_META) == NO_CAPACITY_FAIL:
        return "failed"  # no capacity, and the run asked not to wait
    return "submitted"


def submitted_version(versions: Sequence[Job]) -> int:
    """The version the run was last submitted as (a stop adds a stopped copy after it)."""
    running = [v.version for v in versions if not v.stop]
    return max(running) if running else 0


def ended(status: str) -> bool:
    return status in ("done", "failed", "terminated")


def run_to_json(
    job: Job,
    allocs: Sequence[Allocation],
    evals: Sequence[Evaluation],
    node_of: Callable[[str], Node | None],
    since_version: int = 0,
) -> dict[str, Any]:
    group = job.task_groups[0] if job.task_groups else None
    latest: dict[int, Allocation] = {}
    for alloc in sorted(current_ranks(job, allocs, since_version), key=lambda a: a.create_index):
        latest[alloc.index] = alloc  # the newest record of each rank
    ranks = []
    for rank, alloc in sorted(latest.items()):
        node = node_of(alloc.node_id)
        blocks = len(held_ids(alloc, BLOCK_TYPE))
        total = len(node_block_ids(node)) if node is not None else 0
        ranks.append(
            {
                "Rank": rank,
                "AllocID": alloc.id,
                "Instance": alloc.node_name,
                "NodeID": alloc.node_id,
                "Fleet": node.attributes.get(FLEET_ATTRIBUTE, "") if node else "",
                "Blocks": f"{blocks}/{total}" if total else "",
                "GPUs": len(held_ids(alloc, "gpu")),
                "ClientStatus": alloc.client_status.value,
                "DesiredStatus": alloc.desired_status.value,
            }
        )
    blocked = [e for e in evals if e.status.value == "blocked"]
    waiting = blocked[-1].failed_tg_allocs.get(GROUP) if blocked else None
    return {
        "Name": job.id,
        "Status": run_status(job, allocs, evals, since_version),
        "Nodes": group.count if group else 0,
        "Priority": job.priority,
        "StopCriteria": job.meta.get(STOP_CRITERIA_META, ""),
        "SubmitTime": job.submit_time,
        "Ranks": ranks,
        "Waiting": dict(waiting.dimension_exhausted) if waiting else {},
        "WaitLimit": job.meta.get(WAIT_LIMIT_META, ""),  # seconds; "" waits for good
        "TerminationReason": job.meta.get(RUN_ENDED_META, ""),
    }
