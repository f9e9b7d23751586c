"""The replicated state machine: the leader is its single writer; replicas apply the same log.

Tables are copy-on-write, so `StateStore.snapshot()` is O(shards) and a snapshot never sees
later writes. Scheduler workers and the plan applier read through `StateReader`.
"""

from actors.state.job_status import JobActivity, compute_job_status
from actors.state.reader import StateReader
from actors.state.snapshot import StateSnapshot
from actors.state.store import StateStore
from actors.state.usage import EMPTY_USAGE, NodeUsage

__all__ = [
    "EMPTY_USAGE",
    "JobActivity",
    "NodeUsage",
    "StateReader",
    "StateSnapshot",
    "StateStore",
    "compute_job_status",
]
