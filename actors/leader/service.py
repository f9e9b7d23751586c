"""The leader's service loop: the single writer of cluster state.

One thread owns the store. It reads plan submissions and requests from the leader's stream in
batches, applies plans highest priority first (the plan queue), commits every decision through
the fenced durable log and only then applies it locally and replies. Missed heartbeats mark
nodes down. Requests made through the actor's methods (the API) join the same thread through
an in-process queue, so there is never a second writer.

On start it takes a new term (fencing out any older leader) and rebuilds its store from the
log before serving.

`hold_plans` is a failpoint for tests: it holds the next plans back and applies them together,
the one way to make concurrent plans collide (or keep a plan in flight) on every run.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future

import redis
from opentelemetry.trace import INVALID_SPAN, Span

from actors.leader.commits import CommitMethods
from actors.leader.core.heartbeats import HeartbeatTracker
from actors.leader.core.leader import Decision, LeaderCore, plan_completes_eval
from actors.leader.core.plan_queue import PlanQueue
from actors.leader.core.repeated_requests import repeated_answer
from actors.leader.durable_log import DurableLog, Fence, NotLeaderError
from actors.leader.local_scheduling import LocalDeliveries, LocalScheduling
from actors.leader.plan_hold import PlanHold, PlanHoldMethods
from actors.leader.service_records import (
    BatchAnswers,
    CommitFeed,
    LeaderStats,
    StagedCommitLost,
)
from actors.leader.snapshots import SnapshotPolicy, SnapshotWriter
from actors.leader.tracing import LeaderTracing
from actors.process_settings import after_state_applied, tune_process, when_idle
from actors.runtime.reconnect import UNREACHABLE, Reconnecting
from actors.runtime.snapshots import SnapshotStore
from actors.state import StateSnapshot, StateStore
from actors.streams import GroupConsumer, StreamBus
from actors.streams.envelope import registry_of
from actors.streams.names import LEADER_GROUP, StreamNames
from actors.streams.wake import WakeableReads
from actors.worker.tracing import WorkerTracing
from contracts import PlanResult
from contracts.copying import replacer
from contracts.ids import new_uuid
from contracts.messages import (
    LeaderRequest,
    LeaderResponse,
    PlanResponse,
    PlanSubmission,
    RequestKind,
)
from contracts.state_log import LogEntry
from observability import Telemetry

log = logging.getLogger(__name__)


_answered_at = replacer(LeaderResponse, "index", "job_modify_index")
LEADER_MESSAGES = registry_of(PlanSubmission, LeaderRequest)
STALE_TOKEN = "eval token is no longer outstanding (the eval was redelivered)"
# Answers are read as they come; the cap only bounds a stream whose reader went away.
REPLY_STREAM_MAXLEN = 10_000


class LeaderService(CommitMethods, PlanHoldMethods):
    def __init__(
        self,
        client: redis.Redis,
        names: StreamNames,
        *,
        heartbeat_ttl_s: float = 10.0,
        batch: int = 64,
        block_ms: int = 50,
        now_ns: Callable[[], int] = time.time_ns,
        telemetry: Telemetry | None = None,
        snapshot_policy: SnapshotPolicy | None = None,
        broker: CommitFeed | None = None,
        local_scheduling: bool = False,
    ) -> None:
        tune_process()
        self.telemetry = telemetry or Telemetry.disabled("leader")
        self.tracing = LeaderTracing(self.telemetry, names.requests)
        self.client = client
        self.names = names
        self.bus = StreamBus(client)
        self.durable = DurableLog(client, names)
        self.snapshots = SnapshotStore(client, names)
        self.snapshot_writer = SnapshotWriter(self.snapshots, snapshot_policy or SnapshotPolicy())
        self.store = StateStore()
        # The eval broker this leader hosts, fed each entry once it is durable and applied
        # (a batch's staged entries earlier, under its hold: `_schedule_staged`).
        self.broker = broker
        self.core = LeaderCore(self.store, now_ns=now_ns, new_id=new_uuid)
        self.heartbeats = HeartbeatTracker(heartbeat_ttl_s)
        self.stats = LeaderStats()
        # Requests already committed (id -> index), rebuilt from the log on start, so that a
        # request re-read after a restart is answered, not applied again.
        self.applied: OrderedDict[str, int] = OrderedDict()
        self._inbox: queue.Queue[tuple[LeaderRequest, Future[LeaderResponse]]] = queue.Queue()
        self._calls: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()  # loop-thread work
        # Entries decided and applied but not yet durable: a batch's unfenced requests
        # commit together (see `_handle_batch`); None outside a batch.
        self._staged: list[LogEntry] | None = None
        self._after_flush: list[Callable[[], object]] = []  # settlements awaiting the flush
        self._fed_through = 0  # staged entries the broker was fed before their flush
        self._rebuilds = 0
        self._rebuilt_for: BaseException | None = None  # commits.py `_lose_store`
        self._now_ns = now_ns
        # A staged flush failed and the store could not be rebuilt yet: the loop rebuilds
        # it before deciding anything else. A lost term stops the loop.
        self._store_lost = False
        self._deposed = False
        self._abdicated = False
        self.plan_hold = PlanHold()  # a failpoint for tests (plan_hold.py)
        # Small evals scheduled here, the workers taking the rest (local_scheduling.py).
        self.local: LocalScheduling | None = None
        if local_scheduling and isinstance(broker, LocalDeliveries):
            tracing = WorkerTracing(self.telemetry, names.deliveries, "leader")
            self.local = LocalScheduling(self, broker, tracing, paused=self.plan_hold.armed)
        # The loop blocks reading its stream; a request put in the inbox cuts that short.
        self.reads = WakeableReads(client)
        self._consumer = GroupConsumer(
            StreamBus(self.reads.client),
            names.requests,
            LEADER_GROUP,
            "leader",
            LEADER_MESSAGES,
            self._handle_batch,
            batch=batch,
            block_ms=block_ms,
            handler_acks=True,  # with the batch's answers (`_handle_batch`)
        )

    # -- start ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Take a new term, then rebuild the store from the log."""
        self.stats.term = self.durable.acquire_term()
        self._reload()
        now = time.monotonic()
        for node in self.store.nodes():
            self.heartbeats.beat(node.id, now)  # a restarted leader gives every node a TTL
        self.bus.ensure_group(self.names.requests, LEADER_GROUP)

    # -- the loop ------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        reconnecting = Reconnecting(stop, "leader")
        while not stop.is_set():
            try:
                reconnecting(self.poll_once)
            except NotLeaderError:
                log.error("a newer leader took over; stopping")
                self._rebuilt_for = None
                self._abdicate()
                return
            except UNREACHABLE:
                return  # raised only once stop is set
            except Exception as exc:
                # A bug must not leave the cluster without a working leader (the actor would
                # look alive): what it decided is dropped and the store rebuilt from the log.
                log.exception("leader loop failed; rebuilding its store from the log")
                self.stats.loop_errors += 1
                # Not rebuilt where it failed (StagedCommitLost: always rebuilt before).
                if exc is not self._rebuilt_for and not isinstance(exc, StagedCommitLost):
                    self._lose_store()
                self._rebuilt_for = None
                stop.wait(0.1)

    def poll_once(self) -> int:
        self._check_term()
        self._rebuilt_for = None
        if self._store_lost:
            self._reload()  # before anything is decided on it (raises while Redis is away)
        index = self.store.latest_index()
        self.reads.arm()
        try:
            handled = self._consumer.poll_once(wait=self._inbox.empty() and self._calls.empty())
        finally:
            self.reads.disarm()
        self._check_term()  # found while handling (the consumer swallows handler errors)
        handled += self._apply_held_if_due()  # released, or its deadline passed
        handled += self._drain_inbox()
        while not self._calls.empty():
            self._calls.get_nowait()()
        self._check_term()  # found by a request of the inbox (its caller got the error)
        handled += self._schedule_locally()  # what the turn's other work made ready
        now = time.monotonic()
        expired = self.heartbeats.expired(now)
        if expired:
            try:
                self._redecided(lambda: self._commit(self.core.mark_nodes_down(expired)))
            except BaseException:
                self.heartbeats.overdue(expired, now)  # still down: tried again next turn
                raise
        due_at = self.core.deadlines.next_at()
        if due_at is not None and due_at <= self._now_ns():
            self._redecided(self._commit_due)
        # Heartbeats alone change nothing: a turn counts as busy for the heap pacer only if
        # it committed something (agents beat every few seconds; each would otherwise keep
        # the idle sweep off for good).
        if self.store.latest_index() != index:
            after_state_applied()
            self._snapshot_if_due()
        else:
            when_idle()
        return handled

    def _check_term(self) -> None:
        """Raise NotLeaderError once a commit found this leader's term taken."""
        if self._deposed:
            raise NotLeaderError(f"term {self.stats.term} is no longer current")

    def _commit_due(self) -> int | None:
        """Drain what is due (deadlines, runs' wait limits) and commit it."""
        try:
            return self._commit(self.core.due())
        except BaseException:
            self.core.rebuild_deadlines()  # what was popped is due again
            raise

    def _snapshot_if_due(self) -> None:
        """Start a background snapshot once enough was committed since the last (between
        batches: nothing staged, so the store and `applied` stand at a durable index)."""
        writer = self.snapshot_writer
        if self._staged or not writer.due(self.store.latest_index(), self.durable.appended_bytes):
            return
        writer.start(
            self.store.snapshot(), self.applied, self.stats.term, self.durable.appended_bytes
        )

    def write_snapshot(self) -> int:
        """Write a snapshot now and trim the log (for the actor's callers and tests); returns
        its index. The view is taken on the loop's thread, between batches (at a durable
        index); it is encoded and written on the caller's."""
        view: Future[tuple[StateSnapshot, dict[str, int]]] = Future()
        self._calls.put(lambda: view.set_result((self.store.snapshot(), dict(self.applied))))
        self.reads.wake()
        state, applied = view.result(timeout=30)
        self.snapshot_writer.wait()
        outcome = self.snapshot_writer.write(state, applied, self.stats.term)
        if not outcome.ok:
            raise RuntimeError(f"snapshot at {state.latest_index()} not switched: {outcome.reason}")
        return state.latest_index()

    def submit(self, request: LeaderRequest, timeout_s: float = 30.0) -> LeaderResponse:
        """For the actor's methods (other threads): decided and committed on the loop thread."""
        future: Future[LeaderResponse] = Future()
        self._inbox.put((request, future))
        self.reads.wake()  # the loop may be blocked on its stream
        return future.result(timeout=timeout_s)

    def _drain_inbox(self) -> int:
        n = 0
        while True:
            try:
                request, future = self._inbox.get_nowait()
            except queue.Empty:
                return n
            n += 1
            try:
                future.set_result(self.handle(request))
            except Exception as exc:  # the caller gets the error; the loop goes on
                future.set_exception(exc)

    def _handle_batch(self, batch: Sequence[tuple[str, str, object, dict[str, str]]]) -> None:
        """Plans first (highest priority first), each answered as soon as its commit is
        durable: a worker waits on nothing but its own plan. Then the requests someone
        waits on (a worker's fenced eval update), each answered at once, and last the
        fire-and-forget ones (client reports, heartbeats, the broker's writes), in the order
        they came. Messages of one batch are concurrent, so any order is valid, and a
        producer that waits for its answer has no other request outstanding."""
        self._check_term()  # the consumer retries a failed batch one by one: decide nothing
        if self._store_lost:  # a retry right after a lost commit: rebuild first (or raise)
            self._reload()
        plans: PlanQueue[PlanSubmission] = PlanQueue()
        waited: list[LeaderRequest] = []
        others: list[LeaderRequest] = []
        traces: dict[int, dict[str, str]] = {}
        for _message_id, _type, message, trace in batch:
            traces[id(message)] = trace
            if isinstance(message, PlanSubmission):
                if not self._hold_plan(message, trace):
                    plans.push(message.plan, message)
            elif isinstance(message, LeaderRequest):
                (waited if message.reply_to else others).append(message)
        self._apply_held_if_due()  # they came first
        while (item := plans.pop()) is not None:
            _plan, submission = item
            self._apply_plan(submission, traces.get(id(submission), {}))
        # The requests' entries are staged: each is decided on the state the ones before it
        # left, applied at once, and all of them made durable by one commit at the end (a
        # fenced one flushes what is staged before it commits alone), together with the
        # plans of the small evals they made ready, scheduled here on the staged state.
        # Their answers go out with that commit.
        answers: list[tuple[str, str, object]] = []
        self._staged = []
        try:
            for request in waited:
                response = self.handle(request, traces.get(id(request), {}))
                answers.append((request.reply_to, "LeaderResponse", response))
            for request in others:
                self.handle(request, traces.get(id(request), {}))
        except BaseException:
            # What was staged is applied and remembered, so it must be durable before the
            # consumer retries the batch's messages one by one, and the requests answered
            # before the error are answered in full now (a retry could only answer them
            # with their index).
            try:
                self._flush_staged()
            finally:
                self._staged = None
            self.bus.publish_each(answers, maxlen=REPLY_STREAM_MAXLEN)
            raise
        # Handled in full: the messages are acked with the answers, which leave with the
        # batch's commit (one round trip), or on their own if it committed nothing.
        handled = [message_id for message_id, _type, _message, _trace in batch]
        acks = (self.names.requests, LEADER_GROUP, handled)
        outgoing = BatchAnswers(answers, acks, REPLY_STREAM_MAXLEN)
        self._schedule_staged(outgoing)
        if not outgoing.sent:
            self.bus.publish_each(outgoing.answers, maxlen=outgoing.maxlen, ack=outgoing.acks)

    # -- decisions -----------------------------------------------------------------------------

    def handle(
        self, request: LeaderRequest, trace: Mapping[str, str] | None = None
    ) -> LeaderResponse:
        """Decide and commit a request on the loop's thread (other threads: `submit`)."""
        if request.kind is RequestKind.NODE_HEARTBEAT or not self.tracing.enabled:
            return self._handle(request, INVALID_SPAN)
        with self.tracing.request(request, trace or {}) as span:
            return self._handle(request, span)

    def _handle(self, request: LeaderRequest, span: Span) -> LeaderResponse:
        self.stats.requests += 1
        return self._redecided(lambda: self._decide(request, span))

    def _decide(self, request: LeaderRequest, span: Span) -> LeaderResponse:
        done = self.applied.get(request.request_id) if request.request_id else None
        if done is not None:
            return self._repeated(request, done)
        if request.kind is RequestKind.NODE_HEARTBEAT:
            now = time.monotonic()
            for node_id in request.node_ids:
                self.heartbeats.beat(node_id, now)
            self._commit(self.core.nodes_alive(request.node_ids))
            return LeaderResponse(request.request_id, ok=True, index=self.store.latest_index())
        decision: Decision = self.core.handle(request)
        assert decision.response is not None
        if not decision.response.ok or not decision.changes:
            return decision.response
        fence = Fence(request.fence_eval_id, request.fence_token) if request.fence_eval_id else None
        carried = self.tracing.entry_trace(span, decision.changes, self.store)
        index = self._commit(decision.changes, fence, request.request_id, trace=carried)
        if index is None:
            return LeaderResponse(request.request_id, ok=False, error=STALE_TOKEN)
        if request.kind is RequestKind.UPSERT_NODES:
            now = time.monotonic()
            for node in request.nodes:
                self.heartbeats.beat(node.id, now)
        elif request.kind is RequestKind.DELETE_NODES:
            for node_id in request.node_ids:
                self.heartbeats.forget(node_id)
        job_modify_index = (
            decision.job_write.reply_job_modify_index(index) if decision.job_write else 0
        )
        return _answered_at(decision.response, index, job_modify_index)

    def _repeated(self, request: LeaderRequest, index: int) -> LeaderResponse:
        """The answer to a request applied before (repeated_requests.py)."""
        return repeated_answer(self.store, self.core.periodic.children, request, index)

    def apply_local_plan(
        self, submission: PlanSubmission, trace: Mapping[str, str] | None = None
    ) -> PlanResponse:
        """A plan of the leader's own scheduler (local_scheduling.py): committed unfenced,
        since its delivery's token lives in memory and no one else holds it."""
        with self.tracing.plan(submission, trace or {}) as span:
            return self._apply_plan_in(submission, span, own=True)

    def _apply_plan(
        self, submission: PlanSubmission, trace: Mapping[str, str] | None = None
    ) -> PlanResponse:
        with self.tracing.plan(submission, trace or {}) as span:
            return self._apply_plan_in(submission, span)

    def _apply_plan_in(
        self, submission: PlanSubmission, span: Span, *, own: bool = False
    ) -> PlanResponse:
        """`own`: a plan of the leader's own scheduler (see `_decide_plan`)."""
        return self._redecided(lambda: self._decide_plan(submission, span, own))

    def _decide_plan(self, submission: PlanSubmission, span: Span, own: bool) -> PlanResponse:
        """Decide, commit and answer one plan. A committed plan is answered as soon as its
        commit is durable, before this leader applies it to its own store."""
        started = time.monotonic()
        plan = submission.plan
        key = f"plan/{plan.eval_id}/{plan.eval_token}/{submission.attempt}"
        if key in self.applied:
            # Committed before a restart: the worker has long moved on or will time out and
            # nack; an empty result with a refresh makes it re-read the state if it waits.
            return self._reply(
                submission,
                PlanResponse(
                    plan.eval_id, submission.attempt, PlanResult(refresh_index=self.applied[key])
                ),
            )
        changes, result = self.core.apply_plan(submission)
        self.tracing.plan_applied(span, submission, result, self.store, started)
        if not changes:  # nothing fit (or a no-op): nothing committed
            self._count_plan(result)
            nothing = PlanResult(
                rejected_nodes=result.rejected_nodes, refresh_index=result.refresh_index
            )
            return self._reply(submission, PlanResponse(plan.eval_id, submission.attempt, nothing))
        # The leader's own plans are unfenced (their token lives in this process), staged
        # with the rest of its scheduling turn and answered as staged: their answer goes to
        # no other process; their delivery is settled once the turn is durable, and a flush
        # that fails rebuilds the store and the broker, which delivers the evals again.
        fence = Fence(plan.eval_id, plan.eval_token) if plan.eval_token and not own else None
        fresh = sum(  # new allocations (the scheduler leaves their create index at 0)
            1
            for allocs in result.node_allocation.values()
            for alloc in allocs
            if not alloc.create_index
        )
        answered: list[PlanResponse] = []

        def answer(index: int) -> None:
            self.stats.placed += fresh
            self.tracing.plan_committed(span, submission, result, index, fresh)
            refresh = max(result.refresh_index, index) if result.refresh_index else 0
            verdict = PlanResult(
                rejected_nodes=result.rejected_nodes, refresh_index=refresh, alloc_index=index
            )
            completed = submission.completes is not None and plan_completes_eval(result)
            # Nothing follows a completing plan (the scheduler ends with that status), so
            # the hosted broker acks the delivery at once: no ack round trip, and its room
            # goes to the next eval as the commit lands.
            broker = self.broker
            if not completed or broker is None:
                acked = False
            elif own:  # nothing else can settle a token that lives in this process
                acked = True
                self.after_flush(lambda: broker.complete(plan.eval_id, plan.eval_token))
            else:
                acked = broker.complete(plan.eval_id, plan.eval_token)
            response = PlanResponse(
                plan.eval_id,
                submission.attempt,
                verdict,
                lean=True,
                completed=completed,
                acked=acked,
            )
            answered.append(self._reply(submission, response))

        carried = self.tracing.entry_trace(span, changes, self.store)
        committed = self._commit(changes, fence, key, on_durable=answer, trace=carried, staged=own)
        # Counted once decided for good: a moved log (LogMoved out of the commit) decides the
        # plan again, and only that decision counts.
        self._count_plan(result)
        if committed is None:
            self.stats.stale_plans += 1
            stale = PlanResponse(plan.eval_id, submission.attempt, PlanResult(), error=STALE_TOKEN)
            return self._reply(submission, stale)
        return answered[0]

    def _count_plan(self, result: PlanResult) -> None:
        self.stats.plans += 1
        if result.rejected_nodes:
            self.stats.partial_plans += 1
            self.stats.rejected_nodes += len(result.rejected_nodes)

    def _reply(self, submission: PlanSubmission, response: PlanResponse) -> PlanResponse:
        if submission.reply_to:
            self.bus.publish(
                submission.reply_to, [("PlanResponse", response)], maxlen=REPLY_STREAM_MAXLEN
            )
        return response

    def _schedule_locally(self) -> int:
        """A turn's end: what its other work made ready (expired nodes, due deadlines, the
        actor's requests) is scheduled here as a batch's is, on an empty stage, or delivered
        to the workers. A lost commit is not the turn's failure: the store and the broker
        were rebuilt from the log, and the evals whose plans were lost are pending again."""
        if self.local is None or self.broker is None or self._store_lost:
            return 0
        if not self.local.wanted():
            self._deliver_now(self.broker)
            return 0
        assert self._staged is None, "local scheduling runs between batches"
        self._staged = []
        try:
            return self._schedule_staged()
        except StagedCommitLost as lost:
            if lost.__context__ is not None:
                raise  # the run failed first: the loop's error, with the run's as its cause
            log.warning("the leader's scheduling turn was not committed", exc_info=True)
            return 0

    def _schedule_staged(self, answers: BatchAnswers | None = None) -> int:
        """A batch's end: the small evals its staged entries made ready are scheduled here
        on the staged state, and one commit makes the entries and those plans durable (a
        commit for each was a sixth of the leader's turn under many small jobs: every
        round trip to Redis waits for a core). The broker is fed the staged entries before
        they are durable under its `hold`: the leader may take what they make ready, but no
        delivery or write leaves before the commit. If the commit fails, the store and the
        broker are rebuilt from the log and the error goes to the consumer, which retries
        the batch's messages one by one (nothing was answered). The batch's `answers` leave
        with that commit, saying that their placements are committed."""
        assert self._staged is not None, "a batch's requests are staged"
        broker, local = self.broker, self.local
        if local is None or broker is None or self._store_lost or not local.wanted():
            try:
                self._flush_staged(answers)
            finally:
                self._staged = None
            return 0
        scheduled = 0
        durable = False
        rebuilds = self._rebuilds
        broker.hold()
        try:
            try:
                self._feed_early()
                scheduled = local.run()
            except BaseException:  # what was staged was decided and is applied
                self._flush_staged()
                raise
            if scheduled and answers is not None:
                answers.seen_at(self.store.latest_index())
            self._flush_staged(answers)
            durable = True
        except BaseException as exc:
            # Whatever failed, the store and the broker are rebuilt from the log (unless
            # the failed flush did it): the broker was fed entries the log may lack, or
            # an entry fed twice, and what it would send from them is dropped.
            durable = False
            if self._rebuilds == rebuilds:
                self._lose_store()
            self._rebuilt_for = exc  # the error that leaves here, whichever rebuilt
            raise
        finally:
            self._staged = None
            self._release(broker, durable)
        self.stats.local_evals += scheduled
        self._deliver_now(broker)
        return scheduled

    @staticmethod
    def _release(broker: CommitFeed, durable: bool) -> None:
        try:
            broker.release(durable)
        except redis.RedisError:  # the broker's nack timeout redelivers what did not go out
            log.warning("deliveries held for a batch's commit did not go out", exc_info=True)

    @staticmethod
    def _deliver_now(broker: CommitFeed) -> None:
        """The batch is durable: its answers go out even if its deliveries cannot."""
        try:
            broker.deliver()
        except redis.RedisError:
            log.warning("delivering after a batch's commit failed", exc_info=True)

    def _deliver(self) -> None:
        """Deliver what commits made ready, unless this leader may take it this turn."""
        if self.broker is not None and (self.local is None or not self.local.wanted()):
            self.broker.deliver()
