"""The leader's decisions, as pure functions of its state: each request, plan submission,
client report or missed heartbeat becomes the state changes to commit and the reply.

The actor shell commits every change durably (fenced by index, term and eval token) before
applying it to its store, so nothing here writes: it only decides.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from actors.leader.core.client_reports import client_updates
from actors.leader.core.deadlines import DeadlineKind, Deadlines
from actors.leader.core.deployment_plan import plan_deployments
from actors.leader.core.deployment_watcher import DeploymentWatcher, Pending
from actors.leader.core.drainer import Drainer
from actors.leader.core.gc import collect_garbage
from actors.leader.core.job_lifecycle import (
    JobWrite,
    register_job,
    revert_job,
    scale_job,
    set_stable,
    stop_job,
)
from actors.leader.core.launches import LaunchWrite, dispatch
from actors.leader.core.operator_ops import (
    OperatorWrite,
    evaluate_job,
    evaluate_node,
    set_eligibility,
    stop_alloc,
)
from actors.leader.core.periodic import PeriodicDispatcher
from actors.leader.core.plan_eval import evaluate_plan
from actors.leader.core.plan_followups import preemption_evals, set_scheduler_config
from actors.leader.core.runs import end_waiting_run, runs_on_nodes, wait_deadline
from actors.state import StateReader
from contracts import (
    EvalStatus,
    Evaluation,
    Job,
    JobType,
    Node,
    NodeEligibility,
    NodeStatus,
    PlanResult,
    TriggeredBy,
)
from contracts.errors import ConflictError, NotFoundError, ValidationError
from contracts.messages import LeaderRequest, LeaderResponse, PlanSubmission, RequestKind
from contracts.state_log import (
    AllocClientUpdate,
    DeleteNodes,
    StateChange,
    UpsertAllocs,
    UpsertDeployments,
    UpsertEvals,
    UpsertJob,
    UpsertNodes,
)

_OPERATOR_KINDS = frozenset(
    {
        RequestKind.EVALUATE_JOB,
        RequestKind.STOP_ALLOC,
        RequestKind.DRAIN_NODE,
        RequestKind.NODE_ELIGIBILITY,
        RequestKind.NODE_EVALUATE,
    }
)
_DEPLOYMENT_KINDS = frozenset(
    {
        RequestKind.PROMOTE_DEPLOYMENT,
        RequestKind.PAUSE_DEPLOYMENT,
        RequestKind.FAIL_DEPLOYMENT,
        RequestKind.SET_ALLOC_HEALTH,
    }
)
NODE_DOWN_DESCRIPTION = "node heartbeat missed"


@dataclass(slots=True)
class Decision:
    """Changes to commit in order, and the reply once they are committed."""

    changes: list[StateChange] = field(default_factory=list)
    response: LeaderResponse | None = None
    job_write: JobWrite | None = None


def plan_completes_eval(result: PlanResult) -> bool:
    """A plan committed in full ends its eval's scheduling (the scheduler would not retry),
    so the final status it carries (`PlanSubmission.completes`) is written with it."""
    return not result.rejected_nodes and not result.refresh_index


class LeaderCore:
    def __init__(
        self,
        state: StateReader,
        *,
        now_ns: Callable[[], int],
        new_id: Callable[[], str],
    ) -> None:
        self.state = state
        self.now_ns = now_ns
        self.new_id = new_id
        self.deadlines = Deadlines()
        self.periodic = PeriodicDispatcher(state, now_ns=now_ns, new_id=new_id)
        self.watcher = DeploymentWatcher(state, now_ns=now_ns, new_id=new_id)
        self.drainer = Drainer(state, now_ns=now_ns, new_eval=self._eval)

    # -- timers (deadlines.py) --------------------------------------------------------------------

    def rebuild_deadlines(self) -> int:
        """After a (re)load: the timers the state implies (one pass over nodes and jobs)."""
        self.deadlines = Deadlines()
        self.drainer.rebuild(self.deadlines)
        for job in self.state.jobs():
            self._track_run(job)
        self.periodic.rebuild(self.deadlines)
        self.watcher.rebuild(self.deadlines)
        return len(self.deadlines)

    def due(self) -> list[StateChange]:
        """What the timers that came due decide: forced drains, draining jobs' next batches,
        runs that waited too long. Each run ends at most once a turn, however many of its
        nodes' drains came due, and each draining job is read once a turn."""
        now = self.now_ns()
        changes: list[StateChange] = []
        forced: list[str] = []
        migrating: dict[tuple[str, str], None] = {}
        waits: list[tuple[str, str, int]] = []
        watched = self.deployment_pending()
        for item in self.deadlines.pop_due(now):
            if item.kind is DeadlineKind.DRAIN:
                node_id, started_at = str(item.key[0]), int(item.key[1])
                node = self.state.node(node_id)
                drain = node.drain_strategy if node is not None else None
                if drain is None or drain.started_at != started_at:
                    continue  # cancelled, replaced or complete: nothing is forced
                changes += self.drainer.force(node_id, started_at)
                forced.append(node_id)
            elif item.kind is DeadlineKind.MIGRATE:
                migrating[(str(item.key[0]), str(item.key[1]))] = None
            elif item.kind is DeadlineKind.PERIODIC:
                changes += self.periodic.due(self.deadlines, item.key, item.at_ns)
            elif item.kind in (DeadlineKind.ALLOC_HEALTH, DeadlineKind.PROGRESS):
                self.watcher.due(self.deadlines, item.kind, item.key, watched)
            else:
                namespace, job_id, submit_time = item.key
                waits.append((str(namespace), str(job_id), int(submit_time)))
        for key in migrating:
            changes += self.drainer.job_due(self.deadlines, key)
        ended = {(job.namespace, job.id) for job in runs_on_nodes(self.state, forced)}
        changes += self._end_runs_on(forced)
        for namespace, job_id, submit_time in waits:
            if (namespace, job_id) not in ended:
                changes += end_waiting_run(
                    self.state, namespace, job_id, submit_time, now_ns=now, new_id=self.new_id
                )
        return changes + watched.changes(after=changes)

    def deployment_pending(self) -> Pending:
        """A turn's deployment decisions, gathered (deployment_watcher.py)."""
        return Pending(self.state, self.eval_for)

    def eval_for(
        self, namespace: str, job_id: str, job_type: str, trigger: TriggeredBy
    ) -> Evaluation:
        """A pending evaluation of the job (its priority and modify index)."""
        return self._eval(namespace, job_id, job_type, trigger)

    def _track_run(self, job: Job) -> None:
        at = wait_deadline(job)
        if at is not None:
            self.deadlines.add(at, DeadlineKind.RUN_WAIT, (job.namespace, job.id, job.submit_time))

    def _track(self, changes: Iterable[StateChange]) -> None:
        """Timers started by changes about to be committed (a drain, a run that may wait
        only so long). Pushed before the commit: if it fails, the timer finds nothing due."""
        for change in changes:
            if isinstance(change, UpsertNodes):
                for node in change.nodes:
                    self.drainer.track_node(self.deadlines, node)
            elif isinstance(change, UpsertJob):
                self._track_run(change.job)
                self.periodic.track(self.deadlines, change.job)

    # -- requests -------------------------------------------------------------------------------

    def handle(self, request: LeaderRequest) -> Decision:
        """Decide a request; errors become a failed reply naming the problem."""
        try:
            return self._handle(request)
        except (ValidationError, ConflictError, NotFoundError) as exc:
            kind = (
                "not-found"
                if isinstance(exc, NotFoundError)
                else "conflict"
                if isinstance(exc, ConflictError)
                else "invalid"
            )
            message = str(exc.args[0]) if isinstance(exc, NotFoundError) and exc.args else str(exc)
            return Decision(
                response=LeaderResponse(
                    request.request_id, ok=False, error=message, error_kind=kind
                )
            )

    def _handle(self, request: LeaderRequest) -> Decision:
        kind = request.kind
        if kind is RequestKind.REGISTER_JOB:
            if request.job is None:
                raise ValidationError("register-job: Job is required")
            return self._job_write(
                request,
                register_job(
                    self.state,
                    request.job,
                    now_ns=self.now_ns(),
                    new_id=self.new_id,
                    preserve_counts=request.preserve_counts,
                    enforce_index=request.enforce_index,
                    eval_priority=request.eval_priority,
                ),
            )
        if kind is RequestKind.STOP_JOB:
            return self._job_write(
                request,
                stop_job(
                    self.state,
                    request.namespace,
                    request.job_id,
                    now_ns=self.now_ns(),
                    new_id=self.new_id,
                    purge=request.purge,
                    eval_priority=request.eval_priority,
                ),
            )
        if kind is RequestKind.REVERT_JOB:
            return self._job_write(
                request,
                revert_job(
                    self.state,
                    request.namespace,
                    request.job_id,
                    request.version,
                    now_ns=self.now_ns(),
                    new_id=self.new_id,
                    enforce_prior_version=request.enforce_index,
                ),
            )
        if kind is RequestKind.SCALE_JOB:
            return self._job_write(
                request,
                scale_job(
                    self.state,
                    request.namespace,
                    request.job_id,
                    request.group,
                    request.count,
                    message=request.message,
                    error=request.error,
                    meta=request.meta,
                    now_ns=self.now_ns(),
                    new_id=self.new_id,
                    enforce_index=request.enforce_index,
                ),
            )
        if kind is RequestKind.UPSERT_NODES:
            return Decision(
                changes=self.register_nodes(request.nodes),
                response=LeaderResponse(request.request_id, ok=True),
            )
        if kind is RequestKind.DELETE_NODES:
            return Decision(
                changes=self.deregister_nodes(request.node_ids),
                response=LeaderResponse(request.request_id, ok=True),
            )
        if kind is RequestKind.CLIENT_UPDATES:
            return Decision(
                changes=self.client_updates(request.updates),
                response=LeaderResponse(request.request_id, ok=True),
            )
        if kind is RequestKind.UPDATE_EVALS:
            return Decision(
                changes=[UpsertEvals(tuple(request.evals))] if request.evals else [],
                response=LeaderResponse(request.request_id, ok=True),
            )
        if kind is RequestKind.SET_STABLE:
            write = set_stable(
                self.state, request.namespace, request.job_id, request.version, request.stable
            )
            return self._job_write(request, write)
        if kind is RequestKind.SYSTEM_GC:
            return Decision(
                changes=collect_garbage(self.state),
                response=LeaderResponse(request.request_id, ok=True),
            )
        if kind is RequestKind.DISPATCH_JOB:
            return self._launch_write(
                request,
                dispatch(
                    self.state,
                    self.periodic.children,
                    request.namespace,
                    request.job_id,
                    meta={str(k): str(v) for k, v in request.meta.items()},
                    payload=request.payload,
                    idempotency_token=request.idempotency_token,
                    id_prefix_template=request.id_prefix_template,
                    now_ns=self.now_ns(),
                    new_id=self.new_id,
                ),
            )
        if kind in _DEPLOYMENT_KINDS:
            return self._deployment_request(request)
        if kind is RequestKind.SET_SCHEDULER_CONFIG:
            changes = set_scheduler_config(
                self.state, request.scheduler_config, request.enforce_index
            )
            response = LeaderResponse(request.request_id, ok=True, updated=bool(changes))
            return Decision(changes=changes, response=response)
        if kind is RequestKind.FORCE_PERIODIC:
            forced = self.periodic.force(request.namespace, request.job_id)
            return self._launch_write(request, forced)
        if kind in _OPERATOR_KINDS:
            return self._operator_write(request, self._operator(request))
        raise ValidationError(f"unknown request kind {kind!r}")

    def _job_write(self, request: LeaderRequest, write: JobWrite) -> Decision:
        if write.change is not None:
            self._track((write.change,))
        return Decision(
            changes=[write.change] if write.change is not None else [],
            response=LeaderResponse(
                request.request_id, ok=True, eval_id=write.eval_id, warnings=write.warnings
            ),
            job_write=write,
        )

    def _deployment_request(self, request: LeaderRequest) -> Decision:
        """Promote, pause or resume, fail, or set allocations' health (the watcher's)."""
        watched, watcher, kind = self.deployment_pending(), self.watcher, request.kind
        if kind is RequestKind.PROMOTE_DEPLOYMENT:
            watcher.promote(watched, request.deployment_id, request.groups)
        elif kind is RequestKind.PAUSE_DEPLOYMENT:
            watcher.pause(watched, request.deployment_id, request.pause)
        elif kind is RequestKind.FAIL_DEPLOYMENT:
            watcher.fail_request(self.deadlines, watched, request.deployment_id)
        else:
            watcher.set_health_request(
                self.deadlines,
                watched,
                request.deployment_id,
                request.healthy_alloc_ids,
                request.unhealthy_alloc_ids,
            )
        eval_ids = tuple(e.id for e in watched.evals.values())
        response = LeaderResponse(
            request.request_id, ok=True, eval_id=eval_ids[0] if eval_ids else ""
        )
        return Decision(changes=watched.changes(), response=response)

    def _launch_write(self, request: LeaderRequest, launched: LaunchWrite) -> Decision:
        decision = self._job_write(request, launched.write)
        existing = launched.existing
        assert decision.response is not None
        decision.response = dataclasses.replace(
            decision.response,
            dispatched_job_id=launched.child_id,
            job_create_index=existing.create_index if existing is not None else 0,
            index=existing.modify_index if existing is not None else 0,
        )
        return decision

    def _operator(self, request: LeaderRequest) -> OperatorWrite:
        kind, now = request.kind, self.now_ns()
        if kind is RequestKind.EVALUATE_JOB:
            return evaluate_job(self.state, request.namespace, request.job_id, new_eval=self._eval)
        if kind is RequestKind.STOP_ALLOC:
            return stop_alloc(self.state, request.alloc_id, now_ns=now, new_eval=self._eval)
        if not request.node_ids:
            raise ValidationError(f"{kind}: NodeID is required")
        if kind is RequestKind.NODE_EVALUATE:
            return evaluate_node(self.state, request.node_ids[0], node_evals=self.node_evals)
        if kind is RequestKind.DRAIN_NODE:
            write = self.drainer.drain_node(
                self.deadlines,
                request.node_ids[0],
                request.drain,
                mark_eligible=request.mark_eligible,
                node_evals=self.node_evals,
            )
            if request.drain is not None and request.drain.forced:
                write.changes += self._end_runs_on(request.node_ids[:1])
            return write
        return set_eligibility(
            self.state,
            request.node_ids[0],
            request.eligible,
            now_ns=now,
            node_evals=self.node_evals,
        )

    def _operator_write(self, request: LeaderRequest, write: OperatorWrite) -> Decision:
        self._track(write.changes)
        return Decision(
            changes=write.changes,
            response=LeaderResponse(
                request.request_id,
                ok=True,
                eval_id=write.eval_ids[0] if write.eval_ids else "",
                eval_ids=write.eval_ids,
            ),
        )

    # -- plans ------------------------------------------------------------------------------------

    def apply_plan(self, submission: PlanSubmission) -> tuple[list[StateChange], PlanResult]:
        """Evaluate a plan against the latest state; the changes commit what fits, with the
        evaluations the worker sent along (its blocked/follow-up evals) and what it does to
        deployments (deployment_plan.py; their watcher's timers start here)."""
        plan = submission.plan
        result = evaluate_plan(self.state, plan)
        evals = (*submission.evals, *preemption_evals(self.state, result, self.eval_for))
        if submission.completes is not None and plan_completes_eval(result):
            evals = (*evals, submission.completes)
        changes: list[StateChange] = []
        self.drainer.on_plan(self.deadlines, result)
        deployments = plan_deployments(self.state, plan, result, self.now_ns())
        if deployments:
            changes.append(UpsertDeployments(tuple(deployments)))
            self.watcher.track_plan(self.deadlines, deployments, result)
        if result.is_no_op() and not evals:
            return changes, result
        allocs = [a for allocs in result.node_update.values() for a in allocs]
        allocs += [a for allocs in result.node_allocation.values() for a in allocs]
        changes.append(UpsertAllocs(allocs=tuple(allocs), evals=tuple(evals)))
        return changes, result

    # -- nodes and clients ------------------------------------------------------------------------

    def register_nodes(self, nodes: Iterable[Node]) -> list[StateChange]:
        """Upsert nodes; a node that comes (back) up gets evals for the jobs that want it:
        every system job, plus jobs with allocations on it."""
        fresh = []
        evals: list[Evaluation] = []
        for node in nodes:
            node = node if node.computed_class else node.with_computed_class()
            previous = self.state.node(node.id)
            if previous is not None and previous.drain_strategy is not None:
                # A client registering again (a restart, a fleet redeclared) does not end a
                # drain, as in Nomad. Eligibility otherwise comes from the client: an agent
                # registers an instance that cannot be split ineligible, and eligible again
                # once it can be (an operator's `node eligibility -disable` does not survive
                # a re-registration: drover has no record of who set it).
                node = dataclasses.replace(
                    node,
                    drain_strategy=previous.drain_strategy,
                    scheduling_eligibility=NodeEligibility.INELIGIBLE,
                )
            fresh.append(node)
            became_ready = node.status is NodeStatus.READY and (
                previous is None or previous.status is not NodeStatus.READY
            )
            if became_ready or (previous is not None and previous.status != node.status):
                evals += self.node_evals(node.id, include_system=became_ready)
        changes: list[StateChange] = [UpsertNodes(tuple(fresh))]
        if evals:
            changes.append(UpsertEvals(tuple(evals)))
        return changes

    def nodes_alive(self, node_ids: Iterable[str]) -> list[StateChange]:
        """Heartbeats: a node marked down that beats again comes back up (and its jobs and
        the system jobs are re-evaluated, as on registration)."""
        revived = []
        for node_id in node_ids:
            node = self.state.node(node_id)
            if node is not None and node.status is NodeStatus.DOWN:
                revived.append(
                    dataclasses.replace(
                        node,
                        status=NodeStatus.READY,
                        status_description="",
                        status_updated_at=self.now_ns(),
                    )
                )
        return self.register_nodes(revived) if revived else []

    def mark_nodes_down(self, node_ids: Iterable[str]) -> list[StateChange]:
        """Missed heartbeats: the nodes go down and their jobs are re-evaluated, which
        replaces the lost allocations elsewhere."""
        now = self.now_ns()
        downed = []
        evals: list[Evaluation] = []
        for node_id in node_ids:
            node = self.state.node(node_id)
            if node is None or node.status is NodeStatus.DOWN:
                continue
            downed.append(
                dataclasses.replace(
                    node,
                    status=NodeStatus.DOWN,
                    status_description=NODE_DOWN_DESCRIPTION,
                    status_updated_at=now,
                )
            )
            evals += self.node_evals(node_id, include_system=False)
        if not downed:
            return []
        changes: list[StateChange] = [UpsertNodes(tuple(downed))]
        if evals:
            changes.append(UpsertEvals(tuple(evals)))
        return changes + self._end_runs_on([n.id for n in downed])

    def deregister_nodes(self, node_ids: Iterable[str]) -> list[StateChange]:
        """Nomad's node deregistration (`node purge`): the nodes leave the state and the jobs
        with allocations on them are re-evaluated, which finds those allocations lost."""
        gone = [n for n in dict.fromkeys(node_ids) if self.state.node(n) is not None]
        if not gone:
            return []
        evals = [e for node_id in gone for e in self.node_evals(node_id, include_system=False)]
        changes: list[StateChange] = [DeleteNodes(tuple(gone))]
        if evals:
            changes.append(UpsertEvals(tuple(evals)))
        return changes + self._end_runs_on(gone)

    def _end_runs_on(self, node_ids: Iterable[str]) -> list[StateChange]:
        """Runs with a rank on nodes that went away end: their jobs stop (runs.py)."""
        changes: list[StateChange] = []
        for job in runs_on_nodes(self.state, node_ids):
            write = stop_job(
                self.state, job.namespace, job.id, now_ns=self.now_ns(), new_id=self.new_id
            )
            if write.change is not None:
                changes.append(write.change)
        return changes

    def node_evals(self, node_id: str, *, include_system: bool) -> list[Evaluation]:
        """Nomad's createNodeEvals: one node-update eval per affected job."""
        jobs: dict[tuple[str, str], str] = {}
        for alloc in self.state.allocs_by_node(node_id):
            if not alloc.terminal():
                job = self.state.job(alloc.namespace, alloc.job_id)
                if job is not None:
                    jobs[(job.namespace, job.id)] = job.type
        if include_system:
            for job in self.state.jobs():
                if job.type in (JobType.SYSTEM, JobType.SYSBATCH) and not job.stop:
                    jobs[(job.namespace, job.id)] = job.type
        return [
            self._eval(namespace, job_id, job_type, TriggeredBy.NODE_UPDATE, node_id=node_id)
            for (namespace, job_id), job_type in jobs.items()
        ]

    def client_updates(self, updates: Iterable[AllocClientUpdate]) -> list[StateChange]:
        """Record what clients report (client_reports.py)."""
        return client_updates(self, updates)

    def _eval(
        self,
        namespace: str,
        job_id: str,
        job_type: str,
        trigger: TriggeredBy,
        *,
        node_id: str = "",
    ) -> Evaluation:
        job = self.state.job(namespace, job_id)
        now = self.now_ns()
        return Evaluation(
            id=self.new_id(),
            namespace=namespace,
            priority=job.priority if job else 50,
            type=str(job_type),
            triggered_by=trigger,
            job_id=job_id,
            job_modify_index=job.job_modify_index if job else 0,
            node_id=node_id,
            status=EvalStatus.PENDING,
            create_time=now,
            modify_time=now,
        )
