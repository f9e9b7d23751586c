"""Desired vs actual for service and batch jobs (Nomad's reconcile_cluster.go).

Given the job's current version and all of its allocations, decide per task group what to
place, stop, migrate, update in place or replace (destructive update). The output is a list
of intentions; the generic scheduler turns them into a plan.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from actors.worker.core.scheduler.deployment_rules import (
    canary_names,
    cancelled,
    for_version,
    new_deployment,
    rolling_limit,
    stale_canary,
    strategy_of,
    with_group,
)
from actors.worker.core.scheduler.placements import Placements
from actors.worker.core.scheduler.tasks_updated import tasks_updated
from contracts import (
    Allocation,
    ClientStatus,
    Job,
    Node,
    NodeStatus,
    TaskGroup,
    UpdateStrategy,
)
from contracts.allocation import alloc_name
from contracts.deployment import (
    DESCRIPTION_NEWER_JOB,
    DESCRIPTION_STOPPED_JOB,
    Deployment,
    DeploymentStatus,
)
from contracts.evaluation import DesiredUpdates
from contracts.ids import new_uuid
from contracts.job import DEFAULT_BATCH_RESCHEDULE, DEFAULT_SERVICE_RESCHEDULE

# Nomad's stop descriptions, kept verbatim: users grep for them.
ALLOC_NOT_NEEDED = "alloc not needed due to job update"
ALLOC_MIGRATING = "alloc is being migrated"
ALLOC_UPDATING = "alloc is being updated due to job update"
ALLOC_LOST = "alloc is lost since its node is down"
ALLOC_RESCHEDULED = "alloc was rescheduled because it failed"
ALLOC_NODE_TAINTED = "alloc not needed as node is tainted"
_HALTED = frozenset({DeploymentStatus.PAUSED, DeploymentStatus.FAILED})


@dataclass(slots=True)
class Placement:
    name: str
    task_group: TaskGroup
    previous: Allocation | None = None
    # Stop `previous` in the same plan, atomically with this placement (updates, migrations).
    stop_previous: str = ""
    reschedule: bool = False
    canary: bool = False

    @property
    def index(self) -> int:
        return int(self.name[self.name.rfind("[") + 1 : -1])


@dataclass(slots=True)
class Stop:
    alloc: Allocation
    description: str
    client_status: ClientStatus | None = None


@dataclass(slots=True)
class GroupUpdates:
    place: int = 0
    stop: int = 0
    migrate: int = 0
    in_place_update: int = 0
    destructive_update: int = 0
    ignore: int = 0
    canary: int = 0

    def freeze(self) -> DesiredUpdates:
        # Field by field: dataclasses.asdict deep-copies each int (~60 us an eval).
        return DesiredUpdates(
            place=self.place,
            stop=self.stop,
            migrate=self.migrate,
            in_place_update=self.in_place_update,
            destructive_update=self.destructive_update,
            ignore=self.ignore,
            canary=self.canary,
        )


@dataclass(slots=True)
class ReconcileResult:
    # A group's new allocations are a run, made as the scheduler reaches them (placements.py).
    place: Placements[Placement] = field(default_factory=Placements)
    destructive: list[Placement] = field(default_factory=list)
    inplace: list[Allocation] = field(default_factory=list)
    stop: list[Stop] = field(default_factory=list)
    desired_tg_updates: dict[str, GroupUpdates] = field(
        default_factory=lambda: defaultdict(GroupUpdates)
    )
    # The deployment this evaluation creates, the ones it cancels, and the one the job's
    # placements and in-place updates join ("": none active).
    deployment: Deployment | None = None
    deployment_updates: list[Deployment] = field(default_factory=list)
    deployment_id: str = ""


class NameIndex:
    """Hands out `job.group[i]` names: free indexes below count first (Nomad's allocNameIndex)."""

    def __init__(self, job_id: str, group: str, count: int, used: Iterable[int]) -> None:
        self.job_id = job_id
        self.group = group
        self.count = count
        self.used = set(used)

    def next(self, n: int) -> list[str]:
        return list(self.iter_next(n))

    def iter_next(self, n: int) -> Iterator[str]:
        """`next(n)` one name at a time: the count may be far beyond what gets placed."""
        given = 0
        for idx in range(self.count):
            if given == n:
                return
            if idx not in self.used:
                self.used.add(idx)
                given += 1
                yield alloc_name(self.job_id, self.group, idx)
        # Free indexes exhausted: reuse low indexes, as Nomad does.
        idx = 0
        while given < n:
            yield alloc_name(self.job_id, self.group, idx)
            given += 1
            idx += 1

    def release(self, idx: int) -> None:
        self.used.discard(idx)


def tainted_nodes(
    allocs: Iterable[Allocation], lookup: Callable[[str], Node | None]
) -> dict[str, Node | None]:
    """Nodes of these allocations that are gone, down, disconnected or draining."""
    tainted: dict[str, Node | None] = {}
    seen: set[str] = set()
    for alloc in allocs:
        node_id = alloc.node_id
        if node_id in seen:
            continue
        seen.add(node_id)
        node = lookup(node_id)
        if node is None or node.status in (NodeStatus.DOWN, NodeStatus.DISCONNECTED) or node.drain:
            tainted[node_id] = node
    return tainted


class Reconciler:
    def __init__(
        self,
        job: Job | None,
        allocs: Iterable[Allocation],
        tainted: Mapping[str, Node | None],
        *,
        batch: bool,
        job_version: Callable[[int], Job | None],
        now_ns: int,
        inplace_ok: Callable[[Allocation, TaskGroup], bool] | None = None,
        deployment: Deployment | None = None,
        deployment_of: Callable[[str], Deployment | None] | None = None,
        new_id: Callable[[], str] | None = None,
    ) -> None:
        self.job = job
        self.allocs = list(allocs)
        self.tainted = tainted
        self.batch = batch
        self.job_version = job_version
        self.now_ns = now_ns
        # Can this alloc stay where it is under the new job version? (Nomad's allocUpdateFn
        # checks the node still exists, is in the job's datacenters and pool, and passes
        # the stack.) None: always.
        self.inplace_ok = inplace_ok
        # The job's latest deployment; `current` once known to be this version's.
        self.deployment = deployment
        self.current: Deployment | None = None
        self.deployment_of = deployment_of or (lambda _id: None)
        self.new_id = new_id or new_uuid
        self.result = ReconcileResult()

    def compute(self) -> ReconcileResult:
        by_group: dict[str, list[Allocation]] = defaultdict(list)
        for alloc in self.allocs:
            by_group[alloc.task_group].append(alloc)
        job = self.job
        latest = self.deployment
        if job is None or job.stop:
            if latest is not None and latest.active:
                self._cancel(latest, DESCRIPTION_STOPPED_JOB)
            for group, allocs in by_group.items():
                self._stop_all(group, allocs)
            return self.result
        if latest is not None and not for_version(latest, job):
            if latest.active:
                self._cancel(latest, DESCRIPTION_NEWER_JOB)
            latest = None
        self.current = latest
        for tg in job.task_groups:
            self._compute_group(job, tg, by_group.pop(tg.name, []))
        for group, allocs in by_group.items():  # groups removed from the job
            self._stop_all(group, allocs)
        joined = self.result.deployment or (
            latest if latest is not None and latest.active else None
        )
        self.result.deployment_id = joined.id if joined is not None else ""
        return self.result

    def _canaries(
        self, strategy: UpdateStrategy, untainted: list[Allocation], group: str
    ) -> list[Allocation]:
        """The current deployment's canaries among `untainted`; canaries of an earlier
        deployment that were never promoted are stopped."""
        current = self.current
        canaries = []
        for alloc in list(untainted):
            if stale_canary(alloc, current, self.deployment_of):
                untainted.remove(alloc)
                self._stop(alloc, ALLOC_NOT_NEEDED, group)
            elif (
                current is not None
                and alloc.deployment_id == current.id
                and current.is_canary(alloc.id)
            ):
                canaries.append(alloc)
        return canaries

    def _cancel(self, deployment: Deployment, description: str) -> None:
        self.result.deployment_updates.append(cancelled(deployment, description, self.now_ns))

    def _stop(self, alloc: Allocation, description: str, group: str) -> None:
        lost = self._on_lost_node(alloc) and not alloc.client_terminal()
        self.result.stop.append(Stop(alloc, description, ClientStatus.LOST if lost else None))
        self.result.desired_tg_updates[group].stop += 1

    def _stop_all(self, group: str, allocs: list[Allocation]) -> None:
        for alloc in allocs:
            if not alloc.server_terminal() and not alloc.client_terminal():
                self._stop(alloc, ALLOC_NOT_NEEDED, group)

    def _on_lost_node(self, alloc: Allocation) -> bool:
        if alloc.node_id not in self.tainted:
            return False
        node = self.tainted[alloc.node_id]
        return node is None or node.status in (NodeStatus.DOWN, NodeStatus.DISCONNECTED)

    def _held_by_deployment(self, alloc: Allocation) -> bool:
        """Nomad's updateByReschedulable: a failed allocation of the active deployment is
        replaced only once the deployment watcher allows it (desired transition
        `reschedule`, set when the group has a progress deadline); without one the watcher
        fails the deployment instead, and the allocation is replaced after that. As in
        Nomad, one the watcher never marks (health set by hand, or healthy before it
        failed) waits for the deployment to end."""
        current = self.current
        return (
            current is not None
            and current.active
            and alloc.deployment_id == current.id
            and alloc.task_group in current.task_groups  # a group the deployment watches
            and not alloc.desired_transition.reschedule
        )

    def _compute_group(self, job: Job, tg: TaskGroup, allocs: list[Allocation]) -> None:
        updates = self.result.desired_tg_updates[tg.name]
        live = [a for a in allocs if not a.server_terminal()]
        if tg.count == 0:
            self._stop_all(tg.name, live)
            return
        policy = tg.reschedule_policy or (
            DEFAULT_BATCH_RESCHEDULE if self.batch else DEFAULT_SERVICE_RESCHEDULE
        )
        untainted: list[Allocation] = []
        migrate: list[Allocation] = []
        lost: list[Allocation] = []
        reschedule: list[Allocation] = []
        for alloc in live:
            if self.batch and alloc.client_terminal() and alloc.job_version < job.version:
                # Nomad's filterOldTerminalAllocs: finished batch work of an older version
                # does not count toward the new version's count.
                updates.ignore += 1
                continue
            if alloc.desired_transition.migrate and not alloc.client_terminal():
                # Nomad's filterByTainted: a live allocation marked to migrate (a drained
                # node, `alloc stop`) always migrates, whatever its node.
                migrate.append(alloc)
                continue
            if (
                alloc.node_id in self.tainted
                and self._on_lost_node(alloc)
                and not alloc.client_terminal()
            ):
                lost.append(alloc)
                continue
            status = alloc.client_status
            if status is ClientStatus.FAILED:
                if self._held_by_deployment(alloc):
                    untainted.append(alloc)  # the deployment watcher has not allowed it yet
                elif alloc.reschedule_eligible(policy, self.now_ns) and not alloc.next_allocation:
                    reschedule.append(alloc)
                else:
                    untainted.append(alloc)  # out of attempts: it keeps its slot
            elif status is ClientStatus.COMPLETE:
                if self.batch:
                    untainted.append(alloc)  # batch work that finished is never re-run
                else:
                    updates.ignore += 1
            elif status is ClientStatus.LOST:
                updates.ignore += 1
            else:
                untainted.append(alloc)

        strategy = strategy_of(tg, self.batch)
        current = self.current
        state = current.task_groups.get(tg.name) if current is not None else None
        promoted = state is not None and state.promoted
        canaries = self._canaries(strategy, untainted, tg.name) if strategy else []
        if canaries and promoted:
            # Promoted canaries replace the allocations whose names they took.
            taken = {a.name for a in canaries}
            ours = {a.id for a in canaries}
            for alloc in [a for a in untainted if a.name in taken and a.id not in ours]:
                if not _same_version(alloc, job):
                    untainted.remove(alloc)
                    self._stop(alloc, ALLOC_NOT_NEEDED, tg.name)
        elif canaries:
            # Canaries waiting for promotion run beside the group's count.
            ours = {a.id for a in canaries}
            untainted[:] = [a for a in untainted if a.id not in ours]
            updates.ignore += len(canaries)

        names = NameIndex(
            job.id, tg.name, tg.count, (a.index for a in (*untainted, *migrate, *reschedule, *lost))
        )

        for alloc in lost:
            self._stop(alloc, ALLOC_LOST, tg.name)

        # Scale down: migrating allocations first, then the highest name indexes.
        excess = len(untainted) + len(migrate) - tg.count
        if excess > 0:
            for alloc in sorted(migrate, key=lambda a: a.index, reverse=True)[:excess]:
                migrate.remove(alloc)
                self._stop(alloc, ALLOC_NOT_NEEDED, tg.name)
                names.release(alloc.index)
                excess -= 1
        if excess > 0:
            for alloc in sorted(untainted, key=lambda a: a.index, reverse=True)[:excess]:
                untainted.remove(alloc)
                self._stop(alloc, ALLOC_NOT_NEEDED, tg.name)
                names.release(alloc.index)

        destructive: list[Allocation] = []
        for alloc in untainted:
            if alloc.client_terminal() or _same_version(alloc, job):
                updates.ignore += 1
                continue
            old = self.job_version(alloc.job_version)
            if tasks_updated(old, job, tg.name) or (
                self.inplace_ok is not None and not self.inplace_ok(alloc, tg)
            ):
                destructive.append(alloc)
            else:
                self.result.inplace.append(alloc)
                updates.in_place_update += 1

        limit = len(destructive)
        halted = current is not None and current.status in _HALTED
        defer_new = False
        if strategy is not None:
            require_canary = (
                bool(destructive)
                and strategy.canary > 0
                and len(canaries) < strategy.canary
                and not promoted
            )
            canary_state = require_canary or (state is not None and state.needs_promotion)
            if current is None and tg.count > 0:
                updating = bool(destructive) or updates.in_place_update > 0
                if updating or not any(_same_version(a, job) for a in allocs):
                    created = self.result.deployment or new_deployment(
                        job, self.new_id(), self.now_ns
                    )
                    wanted = strategy.canary if require_canary else 0
                    self.result.deployment = with_group(created, tg, strategy, wanted)
            if require_canary and not halted:
                for name in canary_names(canaries, destructive, strategy.canary - len(canaries)):
                    self.result.place.append(Placement(name, tg, canary=True))
                    updates.canary += 1
            limit = rolling_limit(
                strategy,
                len(destructive),
                current,
                untainted,
                halted=halted,
                canary_state=canary_state,
            )
            defer_new = halted or canary_state
        # Rolling updates: at most max_parallel replacements in flight at once.
        elif destructive and tg.update is not None and tg.update.max_parallel > 0:
            in_flight = sum(
                1
                for a in untainted
                if _same_version(a, job) and a.client_status is ClientStatus.PENDING
            )
            limit = max(0, tg.update.max_parallel - in_flight)
        destructive.sort(key=lambda a: a.index)
        for alloc in destructive[:limit]:
            self.result.destructive.append(
                Placement(alloc.name, tg, previous=alloc, stop_previous=ALLOC_UPDATING)
            )
            updates.destructive_update += 1
        updates.ignore += len(destructive) - min(limit, len(destructive))

        for alloc in migrate:
            self.result.place.append(
                Placement(alloc.name, tg, previous=alloc, stop_previous=ALLOC_MIGRATING)
            )
            updates.migrate += 1

        existing = len(untainted) + len(migrate)
        for alloc in reschedule:
            if existing >= tg.count:
                break
            self.result.place.append(
                Placement(
                    alloc.name, tg, previous=alloc, stop_previous=ALLOC_RESCHEDULED, reschedule=True
                )
            )
            updates.place += 1
            existing += 1
        for alloc in lost:
            if existing >= tg.count:
                break
            self.result.place.append(Placement(alloc.name, tg, previous=alloc))
            updates.place += 1
            existing += 1
        if existing < tg.count and not defer_new:
            missing = tg.count - existing
            fresh = (Placement(name, tg) for name in names.iter_next(missing))
            self.result.place.add_run(tg.name, missing, fresh)
            updates.place += missing


def _same_version(alloc: Allocation, job: Job) -> bool:
    if alloc.job_modify_index and job.job_modify_index:
        return alloc.job_modify_index == job.job_modify_index
    return alloc.job_version == job.version
