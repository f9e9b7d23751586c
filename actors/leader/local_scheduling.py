"""Small evaluations scheduled on the leader's own thread, the workers taking the rest.

Nomad's leader runs scheduling workers of its own. Here the leader schedules an evaluation
the hosted broker has ready itself when its job asks for at most `max_allocs` allocations,
up to `budget_s` of each turn of its loop: the scheduler runs on the leader's store, which
is the committed state (no replica to catch up), and its plan is applied in the same thread.
A worker's path costs four process hops (the delivery, the worker's catch-up with the log,
the plan's submission and its answer) and a replica that decodes every entry; for a small
job that is many times the ~0.5 ms its scheduling takes. Measured with `bench.stream` on 2
cores (README, Performance): an idle cluster commits a registration's allocation in 5-6.5 ms
p50 instead of 9-11, and at 250 registrations a second the system keeps up (commit p99
170-210 ms) where it fell 9 s behind; Redis calls per evaluation fall from ~37 to ~17.
Larger jobs, and whatever is ready once the turn's budget is spent, go to the workers, which
schedule in parallel on their replicas as before.

The delivery is an ordinary one (a token, a delivery count, an ack or a nack), so an
evaluation that fails here is nacked, and its next delivery goes to a worker. Its token is
kept in memory only: plans and the final status are committed unfenced, on the leader's
thread within the turn that took it, where no other holder can commit (a redelivered eval
taken here has its token written, to fence out the earlier holder); a leader that loses its
term can commit nothing of it. Where it runs: at a batch's end, on its staged requests (the
broker, fed them under a hold, sends nothing they make ready to the workers before the
commit), their plans staged with them and made durable by the same commit before the
answers go out (so a registration is answered with its allocation committed, as a client
that lists them next expects); and at the end of each turn for evals other work made
ready. While the plan-hold failpoint is armed nothing is scheduled
here (a test that makes two workers' plans collide needs them at the workers).

Traced as a worker's evaluation is (`eval.schedule`, its phases, `plan.submit` parenting the
leader's `plan.apply`), under the `drover-leader` service.
"""

from __future__ import annotations

import itertools
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Protocol, runtime_checkable

from actors.state import StateReader, StateStore
from actors.state.holds import holds_of
from actors.worker.core.scheduler.factory import new_scheduler
from actors.worker.core.scheduler.planner import EvalRecords
from actors.worker.tracing import WorkerTracing
from contracts import Evaluation, Plan, PlanResult
from contracts.copying import replacer
from contracts.messages import (
    EvalDelivery,
    LeaderRequest,
    LeaderResponse,
    PlanResponse,
    PlanSubmission,
    RequestKind,
)

log = logging.getLogger(__name__)

_with_token = replacer(Plan, "eval_token")
LOCAL_TYPES = ("service", "batch")
# A job this small is scheduled in about a millisecond; larger ones gain from the workers'
# parallelism (and hold the single writer's loop no longer than that).
LOCAL_MAX_ALLOCS = 16
# The share of a turn the leader gives to scheduling before leaving the rest to the workers:
# its other work (heartbeats, the workers' plans, client reports) waits at most this long.
LOCAL_BUDGET_S = 0.05
# Evals that failed here, remembered so that their next delivery goes to a worker.
FAILED_KEPT = 1_000


@runtime_checkable
class LocalDeliveries(Protocol):
    """What the hosted broker offers the leader for evaluations it schedules itself."""

    def take_local(self, types: tuple[str, ...]) -> tuple[EvalDelivery, dict[str, str]] | None:
        """A ready eval of `types`, delivered to the leader, with its trace context; None if
        none is ready."""
        ...

    def hand_to_workers(self, delivery: EvalDelivery) -> None:
        """A taken delivery the leader will not schedule: sent to the workers as is."""
        ...

    def settle_local(self, eval_id: str, token: str, ok: bool, reason: str = "") -> None:
        """Ack (or nack) a delivery the leader took."""
        ...


class LeaderLoop(Protocol):
    """What the leader service offers: its store, and plans and requests applied on its
    thread, staged with whatever the turn staged before them (one commit at its end)."""

    store: StateStore

    def apply_local_plan(
        self, submission: PlanSubmission, trace: Mapping[str, str]
    ) -> PlanResponse: ...

    def handle(
        self, request: LeaderRequest, trace: Mapping[str, str] | None = None
    ) -> LeaderResponse: ...

    def after_flush(self, settle: Callable[[], object]) -> None:
        """Run `settle` once the turn's staged commits are durable."""
        ...


class LocalScheduling:
    def __init__(
        self,
        leader: LeaderLoop,
        deliveries: LocalDeliveries,
        tracing: WorkerTracing,
        *,
        max_allocs: int = LOCAL_MAX_ALLOCS,
        budget_s: float = LOCAL_BUDGET_S,
        clock: Callable[[], float] = time.monotonic,
        paused: Callable[[], bool] = lambda: False,
    ) -> None:
        self.leader = leader
        self.deliveries = deliveries
        self.tracing = tracing
        self.max_allocs = max_allocs
        self.budget_s = budget_s
        self.clock = clock
        self.paused = paused
        self.request_ids = itertools.count(1)
        self.incarnation = uuid.uuid4().hex[:12]
        self.stats = {"evals": 0, "handed_on": 0, "nacks": 0, "refreshes": 0}
        self.placed_only = False  # the last eval scheduled only placed allocations
        self.failed_here: OrderedDict[str, None] = OrderedDict()

    def wanted(self) -> bool:
        """Whether evals made ready now should wait for `run` (the leader may take them)
        instead of going out to the workers at once."""
        return not self.paused()

    def run(self) -> int:
        """Schedule small ready evals here for up to `budget_s`; returns how many. Nothing it
        meets stops the leader's loop: a delivery it cannot finish is nacked (a worker gets
        it next)."""
        done = 0
        deadline = self.clock() + self.budget_s
        # Evals share a snapshot while the ones before only placed allocations, as a worker
        # schedules on a replica that others' plans move past: those placements are missing
        # from it, and the leader's plan check (against its store) rejects what no longer
        # fits, the scheduler retrying on a fresh snapshot. What the check cannot correct
        # takes a fresh one: room freed (stops, evictions), evals written beside (blocked
        # evals and their holds, follow-ups), a gang's held nodes, a rejected plan (a
        # deployment is its job's own: no other eval of the run reads it). The run's evals
        # are of different jobs (the broker holds a job's next eval until the last is
        # settled, after the commit); a repeat takes a fresh one all the same. A snapshot
        # per eval was a tenth of the leader's time under many small jobs (its 16,384
        # allocation shards copied, then released; every write after it copying a shard).
        state: StateReader | None = None
        jobs: set[tuple[str, str]] = set()
        while self.clock() < deadline and not self.paused():
            try:
                taken = self.deliveries.take_local(LOCAL_TYPES)
            except Exception:  # Redis away: the broker's timeout redelivers what it took
                log.exception("taking an eval to schedule on the leader failed")
                break
            if taken is None:
                break
            delivery, trace = taken
            try:
                small = self._small(delivery.eval)
            except Exception as exc:
                log.exception("eval %s: sizing its job failed", delivery.eval.id)
                self._nack(delivery, f"{type(exc).__name__}: {exc}")
                break
            if not small or delivery.eval.id in self.failed_here:
                self.stats["handed_on"] += 1
                try:
                    self.deliveries.hand_to_workers(delivery)
                except Exception:  # Redis away: the broker's timeout redelivers it
                    log.exception("handing eval %s to the workers failed", delivery.eval.id)
                break
            job = (delivery.eval.namespace, delivery.eval.job_id)
            if state is None or job in jobs:
                state, jobs = self.leader.store.snapshot(), set()
            jobs.add(job)
            if not self.schedule(delivery, trace, state):
                break  # Redis may be away, or the store stale: the rest go to the workers
            if not self.placed_only:
                state = None
            done += 1
        return done

    def _small(self, evaluation: Evaluation) -> bool:
        job = self.leader.store.job(evaluation.namespace, evaluation.job_id)
        if job is None:  # deregistered and purged: the scheduler stops what is left
            return True
        return sum(group.count for group in job.task_groups) <= self.max_allocs

    def _nack(self, delivery: EvalDelivery, reason: str) -> None:
        self.stats["nacks"] += 1
        self.failed_here[delivery.eval.id] = None
        if len(self.failed_here) > FAILED_KEPT:
            self.failed_here.popitem(last=False)
        eval_id, token = delivery.eval.id, delivery.token
        self.leader.after_flush(lambda: self.deliveries.settle_local(eval_id, token, False, reason))

    def schedule(
        self, delivery: EvalDelivery, trace: Mapping[str, str], state: StateReader
    ) -> bool:
        """Schedule one delivery on `state` (a snapshot of the leader's store); acked (True),
        or nacked with the reason (False)."""
        self.stats["evals"] += 1
        self.placed_only = False
        with self.tracing.evaluation(delivery, trace, "") as span:
            phases = self.tracing.phases()
            try:
                planner = LeaderPlanner(self.leader, delivery, self.tracing)
                # Preemption reads every job's allocations from the scheduler's own state,
                # which a refresh after a rejected plan replaces (not from `state`).
                scheduler = new_scheduler(delivery.eval.type, state, planner)
                scheduler.phases = phases
                scheduler.process(delivery.eval)
                self.stats["refreshes"] += planner.refreshes
                error = planner.flush(self._request_id())
                acked = planner.acked_by_leader
                # An eval that held nodes (a gang's) releases them as it places: later evals
                # must see them free.
                self.placed_only = planner.placed_only and not delivery.eval.reserved_nodes
            except Exception as exc:  # nacked: a worker gets it next, never lost
                log.exception("eval %s failed on the leader", delivery.eval.id)
                error, acked = f"{type(exc).__name__}: {exc}", False
            finally:
                self.tracing.record_phases(span, phases)
            if error:
                self._nack(delivery, error)
                return False
            if not acked:
                eval_id, token = delivery.eval.id, delivery.token
                self.leader.after_flush(lambda: self.deliveries.settle_local(eval_id, token, True))
            return True

    def _request_id(self) -> str:
        return f"leader-local-{self.incarnation}-{next(self.request_ids)}"


class LeaderPlanner(EvalRecords):
    """The scheduler's Planner on the leader's thread, for one delivery: as the worker's
    StreamPlanner, with plans and the final status applied in place."""

    def __init__(self, leader: LeaderLoop, delivery: EvalDelivery, tracing: WorkerTracing) -> None:
        super().__init__()
        self.leader = leader
        self.delivery = delivery
        self.tracing = tracing
        self.attempt = 0
        self.refreshes = 0  # plans partially rejected, the scheduler retrying on fresh state
        # Whether all this eval changed was placing allocations and writing its own status
        # (what a later eval scheduled on the same snapshot can miss safely).
        self.placed_only = True

    def submit_plan(self, plan: Plan) -> tuple[PlanResult, StateReader | None]:
        self.attempt += 1
        plan = _with_token(plan, self.delivery.token)
        evals, completes = self.take_for_plan()
        # A deployment is the job's own (a run's evals are of different jobs): it taints nothing.
        if plan.node_update or evals or (completes and holds_of(completes)):
            self.placed_only = False
        submission = PlanSubmission(plan, "", self.attempt, evals, completes)
        with self.tracing.plan_submit(plan, self.attempt) as (span, trace):
            response = self.leader.apply_local_plan(submission, trace)
            if response.error:
                raise RuntimeError(response.error)
            result = response.committed(plan)
            self.tracing.plan_result(span, plan, result)
        if result.rejected_nodes or result.refresh_index:
            self.placed_only = False
        if result.refresh_index:
            self.refreshes += 1
        if response.completed:
            self.completed = submission.completes
        self.acked_by_leader = response.acked
        if not result.refresh_index:
            return result, None
        # Part of it was rejected: the leader's store already holds what rejected it.
        return result, self.leader.store.snapshot()

    def flush(self, request_id: str) -> str:
        """Commit the eval's final status (and evals not yet sent), unfenced as its plans
        are; returns the leader's error ("" if committed or nothing was left to send)."""
        evals = self.unsent()
        own = self.delivery.eval.id
        if any(e.id != own or holds_of(e) for e in evals):
            self.placed_only = False
        if not evals or self.acked_by_leader:
            return ""
        request = LeaderRequest(RequestKind.UPDATE_EVALS, request_id=request_id, evals=tuple(evals))
        response = self.leader.handle(request)
        return "" if response.ok else response.error or "eval update refused"
