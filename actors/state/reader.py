"""The read interface shared by the live store and its snapshots.

`StateReader` is what the scheduler worker and the plan applier depend on. `TableReader`
implements it once over the table views, which are live `Cow*` tables in the store and their
frozen counterparts in a snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Protocol

from actors.state.cow import ShardedView
from actors.state.multimap import MultiView
from actors.state.usage import EMPTY_USAGE, NodeUsage
from contracts.allocation import Allocation
from contracts.deployment import Deployment
from contracts.evaluation import Evaluation
from contracts.job import Job
from contracts.node import Node
from contracts.scaling import ScalingEvent
from contracts.scheduler_config import DEFAULT_SCHEDULER_CONFIG, SchedulerConfiguration

JobKey = tuple[str, str]  # (namespace, job id)
CONFIG_KEY = "scheduler"  # the scheduler configuration's key in its one-record table

TABLES = ("jobs", "job_versions", "nodes", "allocs", "evals", "scaling_events", "deployment")


class StateReader(Protocol):
    def latest_index(self) -> int: ...
    def table_index(self, table: str) -> int: ...

    def job(self, namespace: str, job_id: str) -> Job | None: ...
    def jobs(self) -> Iterator[Job]: ...
    def job_versions(self, namespace: str, job_id: str) -> list[Job]: ...
    def job_version(self, namespace: str, job_id: str, version: int) -> Job | None: ...

    def node(self, node_id: str) -> Node | None: ...
    def nodes(self) -> Iterator[Node]: ...
    def node_count(self) -> int: ...
    def nodes_version(self) -> tuple[object, ...]: ...

    def alloc(self, alloc_id: str) -> Allocation | None: ...
    def allocs(self) -> Iterator[Allocation]: ...
    def allocs_by_job(self, namespace: str, job_id: str) -> list[Allocation]: ...
    def allocs_by_node(self, node_id: str) -> list[Allocation]: ...
    def alloc_count(self) -> int: ...
    def node_usage(self, node_id: str) -> NodeUsage: ...
    def node_usage_lookup(self) -> Callable[[str], NodeUsage | None]: ...

    def eval(self, eval_id: str) -> Evaluation | None: ...
    def evals(self) -> Iterator[Evaluation]: ...
    def evals_by_job(self, namespace: str, job_id: str) -> list[Evaluation]: ...
    def node_holds(self, node_id: str) -> tuple[str, ...]: ...

    def scaling_events(
        self, namespace: str, job_id: str
    ) -> dict[str, tuple[ScalingEvent, ...]]: ...

    def deployment(self, deployment_id: str) -> Deployment | None: ...
    def deployments(self) -> Iterator[Deployment]: ...
    def deployments_by_job(self, namespace: str, job_id: str) -> list[Deployment]: ...
    def latest_deployment(self, namespace: str, job_id: str) -> Deployment | None: ...

    def scheduler_config(self) -> SchedulerConfiguration: ...


class TableReader:
    """StateReader over a set of table views; subclasses bind live or frozen tables."""

    __slots__ = ()

    _latest: int
    _table_index: Mapping[str, int]
    _jobs: ShardedView[JobKey, Job]
    _versions: ShardedView[JobKey, tuple[Job, ...]]
    _nodes: ShardedView[str, Node]
    _allocs: ShardedView[str, Allocation]
    _evals: ShardedView[str, Evaluation]
    _usage: ShardedView[str, NodeUsage]
    _scaling: ShardedView[JobKey, Mapping[str, tuple[ScalingEvent, ...]]]
    _allocs_by_job: MultiView[JobKey, str]
    _allocs_by_node: MultiView[str, str]
    _evals_by_job: MultiView[JobKey, str]
    _holds: ShardedView[str, tuple[str, ...]]
    _deployments: ShardedView[JobKey, tuple[Deployment, ...]]
    _deployment_jobs: ShardedView[str, JobKey]
    _scheduler_config: ShardedView[str, SchedulerConfiguration]

    def latest_index(self) -> int:
        return self._latest

    def table_index(self, table: str) -> int:
        return self._table_index.get(table, 0)

    def table_indexes(self) -> dict[str, int]:
        """Every table's index (what a snapshot records)."""
        return dict(self._table_index)

    # Jobs

    def job(self, namespace: str, job_id: str) -> Job | None:
        return self._jobs.get((namespace, job_id))

    def jobs(self) -> Iterator[Job]:
        return self._jobs.values()

    def job_versions(self, namespace: str, job_id: str) -> list[Job]:
        return list(self._versions.get((namespace, job_id)) or ())

    def job_version(self, namespace: str, job_id: str, version: int) -> Job | None:
        for job in self._versions.get((namespace, job_id)) or ():
            if job.version == version:
                return job
        return None

    # Nodes

    def node(self, node_id: str) -> Node | None:
        return self._nodes.get(node_id)

    def nodes(self) -> Iterator[Node]:
        return self._nodes.values()

    def node_count(self) -> int:
        return len(self._nodes)

    def nodes_version(self) -> tuple[object, ...]:
        """Equal (element by element, by identity) for two readers exactly when their nodes
        tables hold the same records: the table's index and its shard dicts (see
        `ShardedView.shard_identity`). Keys caches derived from the nodes alone."""
        return (self._table_index.get("nodes", 0), *self._nodes.shard_identity())

    # Allocations

    def alloc(self, alloc_id: str) -> Allocation | None:
        return self._allocs.get(alloc_id)

    def allocs(self) -> Iterator[Allocation]:
        return self._allocs.values()

    def allocs_by_job(self, namespace: str, job_id: str) -> list[Allocation]:
        get = self._allocs.__getitem__
        return [get(i) for i in self._allocs_by_job.get((namespace, job_id))]

    def allocs_by_node(self, node_id: str) -> list[Allocation]:
        get = self._allocs.__getitem__
        return [get(i) for i in self._allocs_by_node.get(node_id)]

    def alloc_count(self) -> int:
        return len(self._allocs)

    def node_usage(self, node_id: str) -> NodeUsage:
        return self._usage.get(node_id) or EMPTY_USAGE

    def node_usage_lookup(self) -> Callable[[str], NodeUsage | None]:
        """A direct lookup for bulk readers (the scheduler walks thousands of nodes per
        evaluation): None means the node holds nothing."""
        return self._usage.lookup()

    # Evaluations

    def eval(self, eval_id: str) -> Evaluation | None:
        return self._evals.get(eval_id)

    def evals(self) -> Iterator[Evaluation]:
        return self._evals.values()

    def evals_by_job(self, namespace: str, job_id: str) -> list[Evaluation]:
        get = self._evals.__getitem__
        return [get(i) for i in self._evals_by_job.get((namespace, job_id))]

    def node_holds(self, node_id: str) -> tuple[str, ...]:
        """The blocked evaluations holding this instance for their gang (state/holds.py)."""
        return self._holds.get(node_id) or ()

    # Scaling

    def scaling_events(self, namespace: str, job_id: str) -> dict[str, tuple[ScalingEvent, ...]]:
        return dict(self._scaling.get((namespace, job_id)) or {})

    # Deployments

    def deployment(self, deployment_id: str) -> Deployment | None:
        key = self._deployment_jobs.get(deployment_id)
        if key is None:
            return None
        return next((d for d in self._deployments.get(key) or () if d.id == deployment_id), None)

    def deployments(self) -> Iterator[Deployment]:
        return (d for kept in self._deployments.values() for d in kept)

    def deployments_by_job(self, namespace: str, job_id: str) -> list[Deployment]:
        """The job's deployments, oldest first."""
        return list(self._deployments.get((namespace, job_id)) or ())

    def latest_deployment(self, namespace: str, job_id: str) -> Deployment | None:
        kept = self._deployments.get((namespace, job_id))
        return kept[-1] if kept else None

    # The scheduler configuration

    def scheduler_config(self) -> SchedulerConfiguration:
        """As last set, or Nomad's defaults (preemption for system jobs, binpack)."""
        return self._scheduler_config.get(CONFIG_KEY) or DEFAULT_SCHEDULER_CONFIG
