"""The leader's node drainer (Nomad's nomad/drainer), on the leader's timers.

A drain (`drain_node`) makes the node ineligible; then, as Nomad's drainer does:
- service allocations migrate batch by batch, as their groups' `migrate` blocks allow
  (drain_groups.py): each batch is marked `DesiredTransition.Migrate` and gets a `node-drain`
  eval of its own for the job, and the reconciler stops each marked allocation and places its
  replacement elsewhere. The next batch comes when the group's replacements are healthy: a
  `DeadlineKind.MIGRATE` timer per job, set for the moment the next health is due (a
  replacement's running report plus min_healthy_time, a placement's healthy_deadline), reads
  the job again then; nothing polls;
- batch work (and a run's ranks) runs on until the drain's deadline;
- system allocations stay until nothing else is live on the node, then migrate (Nomad stops
  them once the node is otherwise done), unless the drain ignores system jobs;
- at the deadline whatever is left is forced off (`force`, the DRAIN timer); a `-force`
  drain does that at once. The drain completes (its strategy cleared, the node left
  ineligible) once nothing it waits for is live on the node (`on_finished`).

Work stays bounded: the drainer keeps the set of service jobs with allocations still to mark
on draining nodes (Nomad's job watcher's jobs), rebuilt from the state after a load, and reads
one job's allocations (the store's per-job index) or one node's (per-node index) when a drain
starts, a timer comes due, a tracked job's allocation is placed or reports running, or an
allocation on a draining node finishes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from actors.leader.core.deadlines import DeadlineKind, Deadlines
from actors.leader.core.drain_groups import NS_PER_S, JobDrain, handle_job, paced
from actors.leader.core.operator_ops import NodeEvals, OperatorWrite, require_node, with_node_evals
from actors.state import StateReader
from contracts import (
    Allocation,
    ClientStatus,
    DesiredTransition,
    DrainStrategy,
    Evaluation,
    Job,
    JobType,
    Node,
    NodeEligibility,
    PlanResult,
    TriggeredBy,
)
from contracts.job import DEFAULT_MIGRATE, MigrateStrategy
from contracts.share import is_run
from contracts.state_log import AllocClientUpdate, StateChange, UpsertAllocs, UpsertNodes

JobKey = tuple[str, str]
EvalFactory = Callable[..., Evaluation]  # (namespace, job_id, job_type, trigger, node_id=)
_SYSTEM_TYPES = (JobType.SYSTEM, JobType.SYSBATCH)


@dataclass(slots=True)
class _Left:
    """What a drain still waits for on a node."""

    others: bool = False  # live allocations other than system ones (services, batch, runs)
    system: list[Allocation] = field(default_factory=list)  # live system ones not yet marked
    any: bool = False  # anything live at all


def _ignored(job: Job | None, drain: DrainStrategy) -> bool:
    """Allocations a drain neither moves nor waits for: those of jobs gone (the scheduler
    stops them), and system ones when the drain ignores system jobs."""
    return job is None or (drain.ignore_system_jobs and job.type in _SYSTEM_TYPES)


class Drainer:
    def __init__(
        self, state: StateReader, *, now_ns: Callable[[], int], new_eval: EvalFactory
    ) -> None:
        self.state = state
        self.now_ns = now_ns
        self.new_eval = new_eval
        # Service jobs with allocations on draining nodes still to be marked.
        self.jobs: set[JobKey] = set()

    # -- timers -----------------------------------------------------------------------------

    def rebuild(self, deadlines: Deadlines) -> None:
        """After a (re)load: each drain's deadline, the jobs still draining and when each
        may go on (at once, if a batch may go now)."""
        self.jobs = set()
        for node in self.state.nodes():
            self.track_node(deadlines, node)
            if node.drain:
                self.jobs.update(self._paced_jobs_on(node.id))
        for key in list(self.jobs):
            decided = self._decide(key)
            if decided is not None and decided.drain:
                deadlines.add(self.now_ns(), DeadlineKind.MIGRATE, key)
            elif decided is not None and (decided.waiting or decided.recheck_at is not None):
                self._schedule(deadlines, key, decided)
            else:
                self.jobs.discard(key)

    def track_node(self, deadlines: Deadlines, node: Node) -> None:
        """A drain with a deadline: its timer (keyed by the drain's start, so that a drain
        replaced or cancelled finds nothing due)."""
        strategy = node.drain_strategy
        at = strategy.deadline_ns() if strategy is not None else None
        if strategy is not None and at is not None:
            deadlines.add(at, DeadlineKind.DRAIN, (node.id, strategy.started_at))

    def _schedule(self, deadlines: Deadlines, key: JobKey, decided: JobDrain) -> None:
        if decided.recheck_at is not None:
            deadlines.add(decided.recheck_at, DeadlineKind.MIGRATE, key)
        if not decided.waiting:
            self.jobs.discard(key)

    # -- decisions --------------------------------------------------------------------------

    def _decide(self, key: JobKey, draining_now: str = "") -> JobDrain | None:
        job = self.state.job(*key)
        if job is None or not paced(job):
            return None
        return handle_job(
            job,
            self.state.allocs_by_job(*key),
            on_draining_node=self._on_draining_node(draining_now),
            now_ns=self.now_ns(),
        )

    def _on_draining_node(self, draining_now: str) -> Callable[[str], bool]:
        """Is a node draining (`draining_now`: the one whose drain is being started)?"""
        known: dict[str, bool] = {}

        def check(node_id: str) -> bool:
            hit = known.get(node_id)
            if hit is None:
                node = self.state.node(node_id)
                hit = known[node_id] = node_id == draining_now or (node is not None and node.drain)
            return hit

        return check

    def _paced_jobs_on(self, node_id: str) -> set[JobKey]:
        keys: set[JobKey] = set()
        for alloc in self.state.allocs_by_node(node_id):
            key = (alloc.namespace, alloc.job_id)
            if alloc.terminal() or key in keys:
                continue
            job = self.state.job(*key)
            if job is not None and paced(job):
                keys.add(key)
        return keys

    def _mark(self, allocs: Iterable[Allocation]) -> list[StateChange]:
        """Mark for migration, with one node-drain eval per job (it names the node when the
        job's marked allocations are all on one)."""
        now = self.now_ns()
        marked: list[Allocation] = []
        nodes: dict[JobKey, set[str]] = {}
        for alloc in allocs:
            marked.append(
                dataclasses.replace(
                    alloc, desired_transition=DesiredTransition(migrate=True), modify_time=now
                )
            )
            nodes.setdefault((alloc.namespace, alloc.job_id), set()).add(alloc.node_id)
        if not marked:
            return []
        evals = []
        for (namespace, job_id), on in nodes.items():
            job = self.state.job(namespace, job_id)
            job_type = job.type if job is not None else JobType.SERVICE
            node_id = next(iter(on)) if len(on) == 1 else ""
            evals.append(
                self.new_eval(namespace, job_id, job_type, TriggeredBy.NODE_DRAIN, node_id=node_id)
            )
        return [UpsertAllocs(tuple(marked), tuple(evals))]

    def _left(self, node_id: str, drain: DrainStrategy, done: frozenset[str]) -> _Left:
        left = _Left()
        jobs: dict[JobKey, Job | None] = {}
        for alloc in self.state.allocs_by_node(node_id):
            if alloc.terminal() or alloc.id in done:
                continue
            key = (alloc.namespace, alloc.job_id)
            if key not in jobs:
                jobs[key] = self.state.job(*key)
            job = jobs[key]
            if job is None or _ignored(job, drain):
                continue
            left.any = True
            if job.type != JobType.SYSTEM:
                left.others = True
            elif not alloc.desired_transition.migrate:
                left.system.append(alloc)
        return left

    def _forced(self, node_id: str, drain: DrainStrategy) -> list[Allocation]:
        """Everything live on the node not yet marked, batch and system included; a run's
        ranks excepted (the leader ends the run instead, see runs.py)."""
        out: list[Allocation] = []
        for alloc in self.state.allocs_by_node(node_id):
            if alloc.terminal() or alloc.desired_transition.migrate:
                continue
            job = self.state.job(alloc.namespace, alloc.job_id)
            if job is None or _ignored(job, drain) or is_run(job):
                continue
            out.append(alloc)
        return out

    # -- requests and what comes due ------------------------------------------------------------

    def drain_node(
        self,
        deadlines: Deadlines,
        node_id: str,
        drain: DrainStrategy | None,
        *,
        mark_eligible: bool,
        node_evals: NodeEvals,
    ) -> OperatorWrite:
        """Start (drain set) or cancel (None) a drain; cancelling with mark_eligible makes the
        node eligible again, which re-evaluates the system jobs and blocked work."""
        node = require_node(self.state, node_id)
        now = self.now_ns()
        if drain is None:
            eligibility = NodeEligibility.ELIGIBLE if mark_eligible else node.scheduling_eligibility
            undrained = dataclasses.replace(
                node, drain_strategy=None, scheduling_eligibility=eligibility, status_updated_at=now
            )
            return with_node_evals(undrained, node, node_evals)
        strategy = dataclasses.replace(drain, started_at=drain.started_at or now)
        drained = dataclasses.replace(
            node,
            drain_strategy=strategy,
            scheduling_eligibility=NodeEligibility.INELIGIBLE,
            status_updated_at=now,
        )
        if strategy.forced:
            marks = self._forced(node_id, strategy)
        else:
            marks = self._first_batches(deadlines, node_id)
        left = self._left(node_id, strategy, frozenset())
        if not left.others and not strategy.forced:
            marks += left.system  # only system work was there: it goes now (Nomad's IsDone)
        if not left.any:
            drained = dataclasses.replace(drained, drain_strategy=None)  # nothing to wait for
        changes: list[StateChange] = [UpsertNodes((drained,)), *self._mark(marks)]
        eval_ids = tuple(e.id for c in changes if isinstance(c, UpsertAllocs) for e in c.evals)
        return OperatorWrite(changes, eval_ids)

    def _first_batches(self, deadlines: Deadlines, node_id: str) -> list[Allocation]:
        marks: list[Allocation] = []
        for key in sorted(self._paced_jobs_on(node_id)):
            decided = self._decide(key, draining_now=node_id)
            if decided is None:
                continue
            marks += decided.drain
            if decided.waiting:
                self.jobs.add(key)
            self._schedule(deadlines, key, decided)
        return marks

    def force(self, node_id: str, started_at: int) -> list[StateChange]:
        """The drain's deadline passed: everything still on the node migrates now, batch
        included. Nothing if the drain that set the deadline was cancelled or replaced
        (another `started_at`) or has completed."""
        node = self.state.node(node_id)
        strategy = node.drain_strategy if node is not None else None
        if strategy is None or strategy.started_at != started_at:
            return []
        return self._mark(self._forced(node_id, strategy))

    def job_due(self, deadlines: Deadlines, key: JobKey) -> list[StateChange]:
        """A draining job's next health came due: its next batch, if one may go now."""
        decided = self._decide(key)
        if decided is None:
            self.jobs.discard(key)
            return []
        self._schedule(deadlines, key, decided)
        return self._mark(decided.drain)

    # -- what clients report and plans place ----------------------------------------------------

    def on_client_updates(self, deadlines: Deadlines, updates: Sequence[AllocClientUpdate]) -> None:
        """Reports about to be committed: a draining job's allocation that came up will be
        healthy after its group's min_healthy_time; the job is read again then."""
        if not self.jobs:
            return
        soonest: dict[JobKey, int] = {}
        for update in updates:
            if update.client_status is not ClientStatus.RUNNING:
                continue
            alloc = self.state.alloc(update.alloc_id)
            key = (alloc.namespace, alloc.job_id) if alloc is not None else None
            if alloc is None or key is None or key not in self.jobs:
                continue
            at = update.modify_time + _ns(self._migrate(key, alloc).min_healthy_time_s)
            soonest[key] = min(soonest.get(key, at), at)
        for key, at in soonest.items():
            deadlines.add(at, DeadlineKind.MIGRATE, key)

    def on_plan(self, deadlines: Deadlines, result: PlanResult) -> None:
        """A plan about to be committed placed allocations of draining jobs: should one never
        come up, it counts (unhealthy) at its healthy_deadline, and the job is read again."""
        if not self.jobs:
            return
        soonest: dict[JobKey, int] = {}
        now = self.now_ns()
        for allocs in result.node_allocation.values():
            for alloc in allocs:
                key = (alloc.namespace, alloc.job_id)
                if key in self.jobs:
                    at = now + _ns(self._migrate(key, alloc).healthy_deadline_s)
                    soonest[key] = min(soonest.get(key, at), at)
        for key, at in soonest.items():
            deadlines.add(at, DeadlineKind.MIGRATE, key)

    def _migrate(self, key: JobKey, alloc: Allocation) -> MigrateStrategy:
        job = self.state.job(*key)
        tg = job.lookup_task_group(alloc.task_group) if job is not None else None
        return (tg.migrate if tg is not None else None) or DEFAULT_MIGRATE

    def on_finished(self, finished: Sequence[Allocation]) -> list[StateChange]:
        """Allocations about to be reported terminal: a draining node left with system work
        only has it migrate now; one left with nothing completes its drain (the strategy is
        cleared, the node stays ineligible, as in Nomad)."""
        done = frozenset(a.id for a in finished)
        completed: list[Node] = []
        system: list[Allocation] = []
        for node_id in sorted({a.node_id for a in finished}):
            node = self.state.node(node_id)
            if node is None or node.drain_strategy is None:
                continue
            left = self._left(node_id, node.drain_strategy, done)
            if left.others:
                continue
            if left.system:
                system += left.system
            elif not left.any:
                completed.append(
                    dataclasses.replace(node, drain_strategy=None, status_updated_at=self.now_ns())
                )
        changes = self._mark(system)
        if completed:
            changes.append(UpsertNodes(tuple(completed)))
        return changes


def _ns(seconds: float) -> int:
    return int(seconds * NS_PER_S)
