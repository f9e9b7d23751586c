"""The leader's pure decision logic (no Ray, no Redis): job lifecycle and plan evaluation."""

from actors.leader.core.job_lifecycle import (
    JOB_MAX_COUNT,
    JobWrite,
    NewId,
    register_job,
    revert_job,
    scale_job,
    set_stable,
    stop_job,
)

__all__ = [
    "JOB_MAX_COUNT",
    "JobWrite",
    "NewId",
    "register_job",
    "revert_job",
    "scale_job",
    "set_stable",
    "stop_job",
]
