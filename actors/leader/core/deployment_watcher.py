"""The leader's deployment watcher (Nomad's nomad/deploymentwatcher), on the leader's timers.

Health: an allocation placed into an active deployment is healthy once it has run for the
group's `min_healthy_time` (a timer started by its client's "running" report), and unhealthy
if it fails first or is not healthy by its `healthy_deadline` (a timer started when the plan
placed it). With `health_check = "manual"` only the API sets health. drover's tasks have no
service checks, so "checks" and "task_states" both mean every task running, which is what
the client's "running" report says.

Decisions after each health change, as Nomad's watcher makes them:
- an unhealthy allocation fails the deployment when its group has no `progress_deadline`
  (0), or when it is out of reschedule attempts; with `auto_revert` the job goes back to
  its latest stable version (a new version and eval). Otherwise (Nomad's
  shouldFailEarly) it is allowed a replacement: its desired transition `reschedule` is set
  (the reconciler replaces a failed allocation of an active deployment only then) and
  an eval follows. A group that made no progress by its `progress_deadline` fails the
  deployment the same way;
- every group healthy at its count (and promoted, if it had canaries): the deployment is
  successful and the job version stable;
- all canaries healthy and every canary group `auto_promote`: the deployment is promoted;
- otherwise a `deployment-watcher` eval lets the scheduler place the next batch.

Promotion, pause and resume, failing and setting allocations' health are requests (the
`/v1/deployment/...` endpoints). Decisions are gathered in a `Pending` per turn, so that
several health changes of one deployment become one record and one eval.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence

from actors.leader.core.deadlines import DeadlineKind, Deadlines
from actors.leader.core.job_lifecycle import revert_job, set_stable
from actors.state import StateReader
from contracts import Allocation, ClientStatus, Evaluation, Job, PlanResult, TriggeredBy
from contracts.deployment import (
    DESCRIPTION_FAILED_ALLOCATIONS,
    DESCRIPTION_FAILED_BY_USER,
    DESCRIPTION_PAUSED,
    DESCRIPTION_PROGRESS_DEADLINE,
    DESCRIPTION_RUNNING,
    DESCRIPTION_SUCCESSFUL,
    Deployment,
    DeploymentState,
    DeploymentStatus,
)
from contracts.errors import NotFoundError, ValidationError
from contracts.job import DEFAULT_SERVICE_RESCHEDULE, JobType, UpdateStrategy
from contracts.state_log import (
    AllocClientUpdate,
    StateChange,
    UpsertAllocs,
    UpsertDeployments,
    UpsertEvals,
)

NS_PER_S = 1_000_000_000
EvalFactory = Callable[[str, str, str, TriggeredBy], Evaluation]
_UNHEALTHY_STATUSES = frozenset({ClientStatus.FAILED, ClientStatus.LOST, ClientStatus.COMPLETE})


class Pending:
    """Deployment records, evals and other changes decided in one turn, not yet committed."""

    def __init__(self, state: StateReader, new_eval: EvalFactory) -> None:
        self.state = state
        self.new_eval = new_eval
        self.records: dict[str, Deployment] = {}
        self.evals: dict[tuple[str, str], Evaluation] = {}
        self.other: list[StateChange] = []
        self.allocs: dict[str, Allocation] = {}  # marked for replacement

    def get(self, deployment_id: str) -> Deployment | None:
        return self.records.get(deployment_id) or self.state.deployment(deployment_id)

    def put(self, deployment: Deployment) -> None:
        self.records[deployment.id] = deployment

    def evaluate(self, deployment: Deployment) -> Evaluation:
        key = (deployment.namespace, deployment.job_id)
        if key not in self.evals:
            self.evals[key] = self.new_eval(
                deployment.namespace,
                deployment.job_id,
                JobType.SERVICE.value,
                TriggeredBy.DEPLOYMENT_WATCHER,
            )
        return self.evals[key]

    def changes(self, after: Sequence[StateChange] = ()) -> list[StateChange]:
        """The turn's changes, to commit after `after` (what else the turn decided). An
        allocation marked for replacement is written whole, so one that an earlier change
        of the same commit rewrote (a drain marking it to migrate) is marked on that record,
        not on the one read before the commit."""
        out: list[StateChange] = []
        if self.records:
            out.append(UpsertDeployments(tuple(self.records.values())))
        out += self.other
        if self.allocs:
            marked = dict(self.allocs)
            for change in after:
                if isinstance(change, UpsertAllocs):
                    for alloc in change.allocs:
                        if alloc.id in marked:
                            transition = dataclasses.replace(
                                alloc.desired_transition, reschedule=True
                            )
                            marked[alloc.id] = dataclasses.replace(
                                alloc, desired_transition=transition
                            )
            out.append(UpsertAllocs(tuple(marked.values())))
        if self.evals:
            out.append(UpsertEvals(tuple(self.evals.values())))
        return out


class DeploymentWatcher:
    def __init__(
        self, state: StateReader, *, now_ns: Callable[[], int], new_id: Callable[[], str]
    ) -> None:
        self.state = state
        self.now_ns = now_ns
        self.new_id = new_id

    # -- timers -----------------------------------------------------------------------------

    def rebuild(self, deadlines: Deadlines) -> None:
        """Timers for every active deployment (after a load): its allocations' health, from
        now (the time they started running is not recorded), and its progress deadlines."""
        for deployment in list(self.state.deployments()):
            if not deployment.active:
                continue
            self._time_progress(deadlines, deployment)
            for alloc in self.state.allocs_by_job(deployment.namespace, deployment.job_id):
                if alloc.deployment_id == deployment.id and not alloc.terminal():
                    self._time_alloc(deadlines, deployment, alloc, placed=True)

    def track_plan(
        self, deadlines: Deadlines, deployments: Iterable[Deployment], result: PlanResult
    ) -> None:
        """A plan about to be committed placed or updated these allocations into these
        deployments: their health deadlines start (and, already running, their healthy
        timers: an in-place update joins the deployment running)."""
        by_id = {d.id: d for d in deployments if d.active}
        for allocs in result.node_allocation.values():
            for alloc in allocs:
                deployment = by_id.get(alloc.deployment_id)
                if deployment is not None:
                    self._time_alloc(deadlines, deployment, alloc, placed=True)
        for deployment in by_id.values():
            self._time_progress(deadlines, deployment)

    def _time_alloc(
        self, deadlines: Deadlines, deployment: Deployment, alloc: Allocation, *, placed: bool
    ) -> None:
        strategy = self._strategy(deployment, alloc.task_group)
        if strategy is None or strategy.health_check == "manual":
            return
        if deployment.health_of(alloc.id) is not None:
            return
        now = self.now_ns()
        if placed:
            at = now + int(strategy.healthy_deadline_s * NS_PER_S)
            deadlines.add(at, DeadlineKind.ALLOC_HEALTH, (deployment.id, alloc.id, "deadline"))
        if alloc.client_status is ClientStatus.RUNNING:
            at = now + int(strategy.min_healthy_time_s * NS_PER_S)
            deadlines.add(at, DeadlineKind.ALLOC_HEALTH, (deployment.id, alloc.id, "healthy"))

    def _time_progress(self, deadlines: Deadlines, deployment: Deployment) -> None:
        for state in deployment.task_groups.values():
            if state.require_progress_by:
                key = (deployment.id, state.require_progress_by)
                deadlines.add(state.require_progress_by, DeadlineKind.PROGRESS, key)

    def _strategy(self, deployment: Deployment, group: str) -> UpdateStrategy | None:
        job = self._job(deployment)
        tg = job.lookup_task_group(group) if job is not None else None
        return tg.update if tg is not None else None

    def _job(self, deployment: Deployment) -> Job | None:
        return self.state.job_version(
            deployment.namespace, deployment.job_id, deployment.job_version
        ) or self.state.job(deployment.namespace, deployment.job_id)

    # -- what happens -------------------------------------------------------------------------

    def on_client_updates(
        self, deadlines: Deadlines, updates: Sequence[AllocClientUpdate], pending: Pending
    ) -> None:
        """Reports about to be committed: a running allocation starts its healthy timer; one
        that failed (or, as a service, exited) before it was healthy is unhealthy. One the
        server stopped (a stop, a migration, a newer version) gets no health: Nomad's client
        stops watching an allocation's health once its desired status is stop or evict
        (allochealth's AllocStoppedCh), so its tasks' exit says nothing about the rollout."""
        for update in updates:
            alloc = self.state.alloc(update.alloc_id)
            if alloc is None or not alloc.deployment_id or alloc.server_terminal():
                continue
            deployment = pending.get(alloc.deployment_id)
            if deployment is None or not deployment.active:
                continue
            if deployment.health_of(alloc.id) is not None:
                continue
            if update.client_status is ClientStatus.RUNNING:
                running = dataclasses.replace(alloc, client_status=ClientStatus.RUNNING)
                self._time_alloc(deadlines, deployment, running, placed=False)
            elif update.client_status in _UNHEALTHY_STATUSES:
                strategy = self._strategy(deployment, alloc.task_group)
                if strategy is not None and strategy.health_check != "manual":
                    self.set_health(deadlines, pending, deployment, (), (alloc.id,))

    def due(
        self,
        deadlines: Deadlines,
        kind: DeadlineKind,
        key: tuple[str | int, ...],
        pending: Pending,
    ) -> None:
        deployment = pending.get(str(key[0]))
        if deployment is None or not deployment.active:
            return
        if kind is DeadlineKind.PROGRESS:
            self._progress_due(deadlines, pending, deployment, int(key[1]))
            return
        alloc_id, what = str(key[1]), str(key[2])
        if deployment.health_of(alloc_id) is not None:
            return
        alloc = self.state.alloc(alloc_id)
        if what == "healthy":
            running = alloc is not None and alloc.client_status is ClientStatus.RUNNING
            if running and alloc is not None and not alloc.server_terminal():
                self.set_health(deadlines, pending, deployment, (alloc_id,), ())
        elif alloc is None or not alloc.server_terminal():
            self.set_health(deadlines, pending, deployment, (), (alloc_id,))

    def _progress_due(
        self, deadlines: Deadlines, pending: Pending, deployment: Deployment, at: int
    ) -> None:
        if deployment.status is not DeploymentStatus.RUNNING:
            return
        late = [
            name
            for name, state in deployment.task_groups.items()
            if state.require_progress_by == at and not _group_done(state)
        ]
        if late:
            self.fail(deadlines, pending, deployment, DESCRIPTION_PROGRESS_DEADLINE)

    def set_health(
        self,
        deadlines: Deadlines,
        pending: Pending,
        deployment: Deployment,
        healthy: Iterable[str],
        unhealthy: Iterable[str],
        *,
        by_user: bool = False,
    ) -> None:
        """Record allocations' health and decide what follows (`by_user`: set through the
        API, where an unhealthy allocation always fails the deployment)."""
        unhealthy = tuple(unhealthy)
        groups = dict(deployment.task_groups)
        now = self.now_ns()
        for ids, is_healthy in ((healthy, True), (unhealthy, False)):
            for alloc_id in ids:
                alloc = self.state.alloc(alloc_id)
                if alloc is None or alloc.task_group not in groups:
                    continue
                state = groups[alloc.task_group]
                if state.health_of(alloc_id) is not None:
                    continue
                if is_healthy:
                    progress = now + int(state.progress_deadline_s * NS_PER_S)
                    state = dataclasses.replace(
                        state,
                        healthy_ids=(*state.healthy_ids, alloc_id),
                        require_progress_by=max(state.require_progress_by, progress)
                        if state.progress_deadline_s > 0
                        else 0,
                    )
                else:
                    state = dataclasses.replace(
                        state, unhealthy_ids=(*state.unhealthy_ids, alloc_id)
                    )
                groups[alloc.task_group] = state
        updated = dataclasses.replace(deployment, task_groups=groups, modify_time=now)
        pending.put(updated)
        self._time_progress(deadlines, updated)
        self._decide(deadlines, pending, updated, fail_on_unhealthy=by_user and bool(unhealthy))

    def _decide(
        self,
        deadlines: Deadlines,
        pending: Pending,
        deployment: Deployment,
        *,
        fail_on_unhealthy: bool = False,
    ) -> None:
        if not deployment.active:
            return
        if any(state.unhealthy_ids for state in deployment.task_groups.values()):
            if fail_on_unhealthy or self._fails_early(deployment):
                self.fail(deadlines, pending, deployment, DESCRIPTION_FAILED_ALLOCATIONS)
                return
            self._allow_replacements(pending, deployment)
        if all(_group_done(s) for s in deployment.task_groups.values()):
            pending.put(
                dataclasses.replace(
                    deployment,
                    status=DeploymentStatus.SUCCESSFUL,
                    status_description=DESCRIPTION_SUCCESSFUL,
                    modify_time=self.now_ns(),
                )
            )
            self._mark_stable(pending, deployment)
            return
        if deployment.status is DeploymentStatus.RUNNING and _auto_promotable(deployment):
            deployment = _promoted(deployment, None, self.now_ns())
            pending.put(deployment)
        if deployment.status is DeploymentStatus.RUNNING:
            pending.evaluate(deployment)

    def _unhealthy_live(self, deployment: Deployment) -> Iterable[Allocation]:
        """Unhealthy allocations not yet stopped or replaced."""
        for state in deployment.task_groups.values():
            for alloc_id in state.unhealthy_ids:
                alloc = self.state.alloc(alloc_id)
                if alloc is not None and not alloc.server_terminal() and not alloc.next_allocation:
                    yield alloc

    def _fails_early(self, deployment: Deployment) -> bool:
        """Nomad's shouldFailEarly: an unhealthy allocation fails the deployment at once if
        its group has no progress deadline, or if it cannot be rescheduled again (waiting
        for the deadline could bring no healthy replacement)."""
        if any(
            s.unhealthy_ids and s.progress_deadline_s <= 0 for s in deployment.task_groups.values()
        ):
            return True
        job = self._job(deployment)
        now = self.now_ns()
        for alloc in self._unhealthy_live(deployment):
            tg = job.lookup_task_group(alloc.task_group) if job is not None else None
            policy = (
                tg.reschedule_policy if tg is not None else None
            ) or DEFAULT_SERVICE_RESCHEDULE
            if not alloc.reschedule_eligible(policy, now):
                return True
        return False

    def _allow_replacements(self, pending: Pending, deployment: Deployment) -> None:
        """Unhealthy allocations marked for replacement (Nomad's allowReplacements), with an
        eval for the scheduler to place them."""
        now = self.now_ns()
        marked = False
        for alloc in self._unhealthy_live(deployment):
            if alloc.desired_transition.reschedule or alloc.id in pending.allocs:
                continue
            transition = dataclasses.replace(alloc.desired_transition, reschedule=True)
            pending.allocs[alloc.id] = dataclasses.replace(
                alloc, desired_transition=transition, modify_time=now
            )
            marked = True
        if marked:
            pending.evaluate(deployment)

    def _mark_stable(self, pending: Pending, deployment: Deployment) -> None:
        try:
            write = set_stable(
                self.state, deployment.namespace, deployment.job_id, deployment.job_version, True
            )
        except NotFoundError:
            return  # the job or that version is gone
        if write.change is not None:
            pending.other.append(write.change)

    def fail(
        self, deadlines: Deadlines, pending: Pending, deployment: Deployment, description: str
    ) -> None:
        """Fail the deployment; with auto_revert, register the job's latest stable version."""
        reverted = False
        if any(s.auto_revert for s in deployment.task_groups.values()):
            description, reverted = self._revert(pending, deployment, description)
        pending.put(
            dataclasses.replace(
                deployment,
                status=DeploymentStatus.FAILED,
                status_description=description,
                modify_time=self.now_ns(),
            )
        )
        if not reverted:
            pending.evaluate(deployment)

    def _revert(
        self, pending: Pending, deployment: Deployment, description: str
    ) -> tuple[str, bool]:
        job = self.state.job(deployment.namespace, deployment.job_id)
        if job is None:
            return description, False
        stable = sorted(
            (
                v
                for v in self.state.job_versions(job.namespace, job.id)
                if v.stable and v.version < deployment.job_version
            ),
            key=lambda v: v.version,
        )
        if not stable:
            return f"{description} - no stable job version to auto revert to", False
        target = stable[-1]
        if not target.spec_changed(job):
            return (
                f"{description} - not rolling back to stable job version {target.version}"
                " as current job has same specification",
                False,
            )
        write = revert_job(
            self.state,
            job.namespace,
            job.id,
            target.version,
            now_ns=self.now_ns(),
            new_id=self.new_id,
        )
        if write.change is not None:
            pending.other.append(write.change)
        return f"{description} - rolling back to job version {target.version}", True

    # -- requests (the /v1/deployment endpoints) ------------------------------------------------

    def require(self, deployment_id: str) -> Deployment:
        deployment = self.state.deployment(deployment_id)
        if deployment is None:
            raise NotFoundError(f"deployment {deployment_id!r} not found")
        return deployment

    def promote(self, pending: Pending, deployment_id: str, groups: Sequence[str]) -> None:
        """Nomad's Deployment.Promote: the named groups (none: all) whose canaries are all
        healthy; refused if a group's are not."""
        deployment = self.require(deployment_id)
        if not deployment.active:
            raise ValidationError("can't promote terminal deployment")
        chosen = list(groups) or [
            n for n, s in deployment.task_groups.items() if s.desired_canaries
        ]
        if not any(
            deployment.task_groups.get(n, DeploymentState()).desired_canaries for n in chosen
        ):
            raise ValidationError("no canaries to promote")
        for name in chosen:
            state = deployment.task_groups.get(name)
            if state is None:
                raise ValidationError(f"deployment has no task group {name!r}")
            healthy = sum(1 for c in state.placed_canaries if c in state.healthy_ids)
            if healthy < state.desired_canaries:
                raise ValidationError(
                    f'Task group "{name}" has {healthy}/{state.desired_canaries}'
                    " healthy allocations"
                )
        promoted = _promoted(deployment, chosen, self.now_ns())
        pending.put(promoted)
        pending.evaluate(promoted)

    def pause(self, pending: Pending, deployment_id: str, pause: bool) -> None:
        deployment = self.require(deployment_id)
        if not deployment.active:
            verb = "pause" if pause else "resume"
            raise ValidationError(f"can't {verb} terminal deployment")
        status = DeploymentStatus.PAUSED if pause else DeploymentStatus.RUNNING
        description = DESCRIPTION_PAUSED if pause else DESCRIPTION_RUNNING
        updated = dataclasses.replace(
            deployment, status=status, status_description=description, modify_time=self.now_ns()
        )
        pending.put(updated)
        if not pause:
            pending.evaluate(updated)

    def fail_request(self, deadlines: Deadlines, pending: Pending, deployment_id: str) -> None:
        deployment = self.require(deployment_id)
        if not deployment.active:
            raise ValidationError("can't fail terminal deployment")
        self.fail(deadlines, pending, deployment, DESCRIPTION_FAILED_BY_USER)

    def set_health_request(
        self,
        deadlines: Deadlines,
        pending: Pending,
        deployment_id: str,
        healthy: Sequence[str],
        unhealthy: Sequence[str],
    ) -> None:
        deployment = self.require(deployment_id)
        if not deployment.active:
            raise ValidationError("can't set health of allocations for a terminal deployment")
        for alloc_id in (*healthy, *unhealthy):
            alloc = self.state.alloc(alloc_id)
            if alloc is None or alloc.deployment_id != deployment.id:
                raise ValidationError(
                    f"Deployment {deployment.id!r} has no allocation {alloc_id!r}"
                )
        # Nomad's SetAllocHealth: allocations a user says are unhealthy fail the
        # deployment whatever its progress deadline.
        self.set_health(deadlines, pending, deployment, healthy, unhealthy, by_user=True)


def _group_done(state: DeploymentState) -> bool:
    if state.needs_promotion:
        return False
    return state.healthy_allocs >= max(state.desired_total, state.desired_canaries)


def _auto_promotable(deployment: Deployment) -> bool:
    canary_groups = [s for s in deployment.task_groups.values() if s.needs_promotion]
    if not canary_groups or not all(s.auto_promote for s in canary_groups):
        return False
    return all(
        sum(1 for c in s.placed_canaries if c in s.healthy_ids) >= s.desired_canaries
        for s in canary_groups
    )


def _promoted(deployment: Deployment, groups: Sequence[str] | None, now_ns: int) -> Deployment:
    chosen = set(groups) if groups is not None else set(deployment.task_groups)
    task_groups = {
        name: dataclasses.replace(state, promoted=True)
        if name in chosen and state.desired_canaries
        else state
        for name, state in deployment.task_groups.items()
    }
    return dataclasses.replace(
        deployment,
        task_groups=task_groups,
        status_description=DESCRIPTION_RUNNING,
        modify_time=now_ns,
    )
