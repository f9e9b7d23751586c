"""A point-in-time, read-only view of the state store (StateStore.snapshot): the tables'
frozen shards, so taking one is O(shards) and never a copy of the data."""

from __future__ import annotations

from collections.abc import Mapping

from actors.state.chunked_cow import ChunkedFrozenMap
from actors.state.cow import FrozenMap
from actors.state.multimap import FrozenMultiMap
from actors.state.reader import JobKey, TableReader
from actors.state.usage import NodeUsage
from contracts.allocation import Allocation
from contracts.deployment import Deployment
from contracts.evaluation import Evaluation
from contracts.job import Job
from contracts.node import Node
from contracts.scaling import ScalingEvent
from contracts.scheduler_config import SchedulerConfiguration

ScalingByGroup = Mapping[str, tuple[ScalingEvent, ...]]

TABLE_SLOTS = (
    "_latest",
    "_table_index",
    "_jobs",
    "_versions",
    "_nodes",
    "_allocs",
    "_evals",
    "_usage",
    "_scaling",
    "_allocs_by_job",
    "_allocs_by_node",
    "_evals_by_job",
    "_holds",
    "_deployments",
    "_deployment_jobs",
    "_scheduler_config",
)


class StateSnapshot(TableReader):
    """A point-in-time, read-only view; taking one is O(shards), never a copy of the data."""

    __slots__ = TABLE_SLOTS

    def __init__(
        self,
        latest: int,
        table_index: dict[str, int],
        jobs: ChunkedFrozenMap[JobKey, Job],
        versions: ChunkedFrozenMap[JobKey, tuple[Job, ...]],
        nodes: FrozenMap[str, Node],
        allocs: ChunkedFrozenMap[str, Allocation],
        evals: ChunkedFrozenMap[str, Evaluation],
        usage: FrozenMap[str, NodeUsage],
        scaling: ChunkedFrozenMap[JobKey, ScalingByGroup],
        allocs_by_job: FrozenMultiMap[JobKey, str],
        allocs_by_node: FrozenMultiMap[str, str],
        evals_by_job: FrozenMultiMap[JobKey, str],
        holds: FrozenMap[str, tuple[str, ...]],
        deployments: ChunkedFrozenMap[JobKey, tuple[Deployment, ...]],
        deployment_jobs: ChunkedFrozenMap[str, JobKey],
        scheduler_config: FrozenMap[str, SchedulerConfiguration],
    ) -> None:
        self._latest = latest
        self._table_index = table_index
        self._jobs = jobs
        self._versions = versions
        self._nodes = nodes
        self._allocs = allocs
        self._evals = evals
        self._usage = usage
        self._scaling = scaling
        self._allocs_by_job = allocs_by_job
        self._allocs_by_node = allocs_by_node
        self._evals_by_job = evals_by_job
        self._holds = holds
        self._deployments = deployments
        self._deployment_jobs = deployment_jobs
        self._scheduler_config = scheduler_config
