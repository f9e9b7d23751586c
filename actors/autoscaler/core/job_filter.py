"""Which job registrations and evaluations the autoscaler's replica decodes.

The autoscaler reads, of jobs, only their scaling policies, the target status of the groups
that have one (count, stop, scaling events) and whether a job is a system job (its
allocations may be ignored by the `empty_ignore_system` node selector). A cluster of many
small jobs without policies would otherwise cost it a full job decode and store update for
each registration, as much as the API's replica pays. Every other registration is read as
the evaluations it carries (`decode_entry(jobs_as_evals=True, keep_job=...)`), as the
broker reads all of them.

A registration is read whole when its job has a `scaling` block in any group, is a system
or sysbatch job, carries scaling events, or is a job the replica already holds (an update
may remove a policy or change the type, and the stored version must follow). Anything not
shaped as expected is read whole too, so that the decoder names the bad field.

Of evaluations it reads only the blocked ones (cluster signals count the placements they
wait for, cluster_signals.py), yet every small job writes two others (its registration's and
its plan's): an evaluation is decoded when it is blocked or when the replica holds it (a
blocked one moving on must replace the stored record, or it would count for ever).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

SYSTEM_TYPES = frozenset({"system", "sysbatch"})
# How a group's scaling block starts in an encoded entry (a job registration, a snapshot's
# chunk): an object under that key. Meta values are strings, so only a driver's config
# holding such a key could match without a policy (the autoscaler then wakes for nothing).
SCALING_BLOCK = b'"Scaling":{'


def wants_job(change: dict[str, Any], held: Callable[[str, str], bool]) -> bool:
    """Whether the autoscaler decodes the raw `UpsertJob` change whole; `held(namespace,
    job_id)`: whether its replica holds that job."""
    job = change.get("Job")
    if not isinstance(job, dict):
        return True
    if change.get("ScalingEvents"):
        return True
    namespace, job_id = job.get("Namespace", "default"), job.get("ID")
    if not isinstance(namespace, str) or not isinstance(job_id, str):
        return True
    if job.get("Type") in SYSTEM_TYPES or held(namespace, job_id):
        return True
    groups = job.get("TaskGroups")
    if not isinstance(groups, list):
        return True
    return any(not isinstance(g, dict) or g.get("Scaling") is not None for g in groups)


def wants_eval(raw: dict[str, Any], held: Callable[[str], bool]) -> bool:
    """Whether the autoscaler decodes one raw evaluation of an entry; `held(eval_id)`:
    whether its replica holds that evaluation."""
    if raw.get("Status") == "blocked":
        return True
    eval_id = raw.get("ID")
    return not isinstance(eval_id, str) or held(eval_id)


def may_bring_policy(raw: bytes) -> bool:
    """Whether an encoded log entry may bring a scaling policy: what wakes the autoscaler's
    replica while it dozes, as it does with no policy at all (service.py). A plain byte
    search: the entries it passes over are never parsed."""
    return SCALING_BLOCK in raw
