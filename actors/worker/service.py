"""A scheduler worker: takes one delivery at a time, schedules it on its read replica and
talks to the leader through streams.

    deliveries --(EvalDelivery)--> worker: wait until the replica reaches the wait index,
        run the scheduler; just before a plan goes, the replica catches up and the plan moves
        off nodes that filled up meanwhile (StreamPlanner.fresher_state, scheduler/rebase.py);
        each plan goes to the leader's stream and the worker waits on its
        own reply stream; a partial commit makes it wait for the refresh index and retry
        (the scheduler's retry loop); the eval's final status is written through the leader,
        fenced by the delivery token; then the broker gets an ack (or a nack on failure).
        Usually the final status rides on the last plan, and the broker (hosted by the
        leader) takes that plan's commit as the ack: the worker sends none.

A worker that dies mid-eval leaves its delivery unacked: the broker's nack timeout hands it to
another worker with a new token, and the leader refuses anything the old token still sends.

The replica is applied on the worker's own thread, at the points where the worker would wait
anyway: while it waits for a delivery, for its wait index, and for the leader's answers (one
XREAD covers the reply stream and the log). A tail thread would take the GIL from the
scheduler in the middle of its work, which costs the scheduler far more than the apply.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from functools import partial
from typing import NamedTuple

import redis
from opentelemetry.trace import INVALID_SPAN, Span

from actors.process_settings import tune_process, when_idle
from actors.runtime.reconnect import UNREACHABLE, Reconnecting
from actors.runtime.replica import LogReplica
from actors.state import StateReader
from actors.state.job_scoped import JobScopedStore
from actors.streams import GroupConsumer, StreamBus
from actors.streams.envelope import decode_message, registry_of
from actors.streams.names import WORKERS_GROUP, StreamNames
from actors.worker.core.filing import FilingPace
from actors.worker.core.scheduler import new_scheduler
from actors.worker.core.scheduler.planner import EvalRecords
from actors.worker.tracing import WorkerTracing
from contracts import Allocation, Evaluation, Plan, PlanResult
from contracts.messages import (
    AckOutcome,
    EvalAck,
    EvalDelivery,
    LeaderRequest,
    LeaderResponse,
    PlanResponse,
    PlanSubmission,
    RequestKind,
)
from contracts.state_log import decode_entry
from observability import Telemetry

log = logging.getLogger(__name__)

REPLY_TYPES = registry_of(PlanResponse, LeaderResponse)
# Rows per stream per read while waiting for a reply: log entries are applied in between, a
# bounded number at a time so that a reply is never held up behind a long backlog.
REPLY_READ_COUNT = 64
# How long the loop blocks for a delivery before applying the log that arrived meanwhile.
IDLE_BLOCK_MS = 50
# Queued allocation work filed per idle turn: a few milliseconds, so a delivery that arrives
# meanwhile waits no longer than that.
IDLE_SETTLE_ITEMS = 5_000
# Answers read but not waited for, kept until asked for (bounded: one per timed-out wait).
KEPT_REPLIES = 1_000
# Deliveries a worker holds at once: the one it schedules, and the previous one whose ack
# waits for the leader's answer to its final status (the broker's capacity is this many per
# worker).
DELIVERIES_PER_WORKER = 2
# How long a stopping worker waits for the answer its last ack depends on.
STOP_ACK_TIMEOUT_S = 2.0


class LeaderUnavailable(RuntimeError):
    """No reply from the leader in time: the eval is nacked and retried later."""


class StaleDelivery(RuntimeError):
    """The leader refused our token: the eval was redelivered to another worker."""


class ReplyChannel:
    """This worker's reply stream, read from where it last stopped."""

    def __init__(self, client: redis.Redis, stream: str) -> None:
        self.client = client
        self.stream = stream
        self.last_id = "$"
        # Replies read while waiting for another one (the answer to an eval update the
        # worker did not wait for arrives while it waits for its next plan's).
        self._kept: dict[tuple[str, int] | str, object] = {}

    def start(self) -> None:
        # Only replies sent after we start count; older ones belong to a previous incarnation.
        last = self.client.xrevrange(self.stream, count=1)
        self.last_id = last[0][0].decode() if last else "0-0"

    def wait(
        self,
        match: type,
        key: tuple[str, int] | str,
        timeout_s: float,
        replica: LogReplica | None = None,
    ) -> object:
        """The reply `match` with `key`; while waiting, applies the log to `replica`."""
        kept = self._kept.pop(key, None)
        if isinstance(kept, match):
            return kept
        deadline = time.monotonic() + timeout_s
        log_stream = replica.names.log.encode() if replica is not None else b""
        while (remaining := deadline - time.monotonic()) > 0:
            block = max(1, int(min(remaining, 1.0) * 1000))
            streams = {self.stream: self.last_id}
            if replica is not None:
                streams[replica.names.log] = replica.position()
            reply = self.client.xread(streams, count=REPLY_READ_COUNT, block=block)
            replies = []
            for stream, rows in reply or ():
                if replica is not None and _name(stream) == log_stream:
                    replica.apply_rows(rows)
                else:
                    replies = rows
            for message_id, fields in replies:
                self.last_id = _name(message_id).decode()
                _type, message, _trace = decode_message(fields, REPLY_TYPES)
                reply_key = _reply_key(message)
                if isinstance(message, match) and reply_key == key:
                    return message
                self._kept[reply_key] = message
                if len(self._kept) > KEPT_REPLIES:  # answers nobody will ask for (timed out)
                    del self._kept[next(iter(self._kept))]
        raise LeaderUnavailable(f"no {match.__name__} for {key} within {timeout_s:.0f}s")


def _name(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode()


def _reply_key(message: object) -> tuple[str, int] | str:
    if isinstance(message, PlanResponse):
        return (message.eval_id, message.attempt)
    assert isinstance(message, LeaderResponse)
    return message.request_id


class StreamPlanner(EvalRecords):
    """The scheduler's Planner over streams, for one delivery."""

    def __init__(self, worker: WorkerService, delivery: EvalDelivery) -> None:
        super().__init__()
        self.worker = worker
        self.delivery = delivery
        self.attempt = 0

    def submit_plan(self, plan: Plan) -> tuple[PlanResult, StateReader | None]:
        worker = self.worker
        self.attempt += 1
        plan = dataclasses.replace(plan, eval_token=self.delivery.token)
        evals, completes = self.take_for_plan()
        submission = PlanSubmission(plan, worker.reply.stream, self.attempt, evals, completes)
        with worker.tracing.plan_submit(plan, self.attempt) as (span, trace):
            worker.bus.publish(worker.names.requests, [("PlanSubmission", submission)], trace)
            response = worker.reply.wait(
                PlanResponse, (plan.eval_id, self.attempt), worker.reply_timeout_s, worker.replica
            )
            assert isinstance(response, PlanResponse)
            if response.error:
                raise StaleDelivery(response.error)
            result = response.committed(plan)
            worker.tracing.plan_result(span, plan, result)
        if response.completed:
            self.completed = submission.completes
        self.acked_by_leader = response.acked
        worker.stats["plans"] += 1
        if result.rejected_nodes:
            worker.stats["partial_plans"] += 1
        if not result.refresh_index:
            return result, None
        # Part of the plan was rejected: the scheduler retries on state at least this fresh.
        worker.stats["refreshes"] += 1
        worker.replica.catch_up_to(result.refresh_index, worker.wait_timeout_s)
        return result, worker.snapshot_for(self.delivery.eval)

    def fresher_state(self, since_index: int) -> StateReader | None:
        """What was committed while the scheduler computed, read just before submitting:
        placements on nodes that filled up meanwhile move before the leader sees them."""
        worker = self.worker
        worker.replica.catch_up()
        if worker.replica.index <= since_index:
            return None
        return worker.snapshot_for(self.delivery.eval)

    def flush(self) -> str:
        """Send the eval's final status (and evals not yet sent), fenced by the token;
        returns the request's id ("" if there was nothing to send). The answer is not
        awaited here: the worker acks the delivery once it comes (see WorkerService)."""
        evals = self.unsent()
        if not evals:
            return ""
        if self.acked_by_leader:
            # The delivery is settled: its token no longer fences anything in. A scheduler
            # ends with the status its completing plan carried, so this is a bug to see.
            log.warning(
                "eval %s: %d records after its completing plan were dropped",
                self.delivery.eval.id,
                len(evals),
            )
            return ""
        worker = self.worker
        request_id = f"{worker.worker_id}-{worker.incarnation}-{next(worker.request_ids)}"
        request = LeaderRequest(
            RequestKind.UPDATE_EVALS,
            request_id=request_id,
            reply_to=worker.reply.stream,
            evals=tuple(evals),
            fence_eval_id=self.delivery.eval.id,
            fence_token=self.delivery.token,
        )
        worker.bus.publish(worker.names.requests, [("LeaderRequest", request)])
        return request_id


# The reason on a worker's ack span when the leader acked the delivery with its plan.
ACKED_ON_COMMIT = "acked by the leader with the plan that completed it"


class Processed(NamedTuple):
    """How one delivery ended on the worker."""

    outcome: AckOutcome
    reason: str
    request_id: str = ""  # of the final-status request whose answer the ack waits for
    acked_by_leader: bool = False  # its completing plan's commit acked it: no ack to send


@dataclasses.dataclass(slots=True)
class UnackedEval:
    """An evaluation whose final status went to the leader and whose ack waits for its
    answer. The worker meanwhile takes the next delivery: the answer is read while it
    waits for that one's plans, so an eval costs one round trip to the leader fewer."""

    delivery: EvalDelivery
    request_id: str
    span: Span


class WorkerService:
    def __init__(
        self,
        worker_id: str,
        client: redis.Redis,
        names: StreamNames,
        *,
        wait_timeout_s: float = 5.0,
        reply_timeout_s: float = 30.0,
        telemetry: Telemetry | None = None,
    ) -> None:
        tune_process()
        self.worker_id = worker_id
        self.tracing = WorkerTracing(
            telemetry or Telemetry.disabled("worker", worker_id), names.deliveries, WORKERS_GROUP
        )
        self.client = client
        self.names = names
        self.bus = StreamBus(client)
        # Allocation records are settled per job, when an evaluation of that job reads them:
        # the scheduler reads one job's allocations and everyone's node usage. The log is
        # read compact: the records of a job are built only when that job settles.
        self.store = JobScopedStore()
        self.replica = LogReplica(
            client, names, store=self.store, decode=partial(decode_entry, compact=True)
        )
        self.reply = ReplyChannel(client, names.plan_results(worker_id))
        self.wait_timeout_s = wait_timeout_s
        self.reply_timeout_s = reply_timeout_s
        # Request ids must never repeat across restarts: the leader answers an id it already
        # applied without applying it again, so a restarted worker counting from 1 would
        # have its evals' final statuses silently dropped.
        self.incarnation = uuid.uuid4().hex[:12]
        self.request_ids = itertools.count(1)
        self.stats = {
            "evals": 0,
            "plans": 0,
            "partial_plans": 0,
            "refreshes": 0,
            "nacks": 0,
            "rebased_plans": 0,
            "rebased_nodes": 0,
            "acked_by_leader": 0,
        }
        self.unacked: UnackedEval | None = None
        self.filing = FilingPace()  # when idle turns file queued allocations (filing.py)
        self._consumer = GroupConsumer(
            self.bus,
            names.deliveries,
            WORKERS_GROUP,
            worker_id,
            registry_of(EvalDelivery),
            self._handle,
            batch=1,
            block_ms=IDLE_BLOCK_MS,
        )

    def start(self) -> None:
        self.bus.ensure_group(self.names.deliveries, WORKERS_GROUP)
        self.replica.load()
        self.reply.start()

    def _node_allocs(self) -> Callable[[str], list[Allocation]]:
        """Every job's allocations on a node, from a full snapshot taken on first use: the
        job-scoped one the scheduler works on holds only its job's (preemption needs all)."""
        full: list[StateReader] = []

        def allocs_on(node_id: str) -> list[Allocation]:
            if not full:
                full.append(self.store.snapshot())
            return full[0].allocs_by_node(node_id)

        return allocs_on

    def snapshot_for(self, evaluation: Evaluation) -> StateReader:
        return self.store.snapshot_for_job(evaluation.namespace, evaluation.job_id)

    def run(self, stop: threading.Event) -> None:
        reconnecting = Reconnecting(stop, f"worker {self.worker_id}")
        while not stop.is_set():
            try:
                reconnecting(self._turn)
            except UNREACHABLE:
                return  # raised only once stop is set
        with contextlib.suppress(redis.ConnectionError):
            # A clean stop leaves no delivery to redeliver (unless the leader is gone too).
            self.finish_unacked(timeout_s=STOP_ACK_TIMEOUT_S)

    def _turn(self) -> None:
        if self.replica.catch_up():  # what was committed while we waited (no blocking)
            self.filing.busy()
        if self._consumer.poll_once():
            self.filing.busy()
            return
        # Idle: ack what is in flight; once quiet, file some of the allocations queued per
        # job, so that a later evaluation has less to settle.
        self.finish_unacked()
        if self.filing.should_file(self.store.unfiled_allocations()):
            self.store.settle_some(IDLE_SETTLE_ITEMS)
        when_idle()

    def _handle(self, batch: Sequence[tuple[str, str, object, dict[str, str]]]) -> None:
        for message_id, _type, delivery, trace in batch:
            assert isinstance(delivery, EvalDelivery)
            with self.tracing.evaluation(delivery, trace, message_id) as span:
                processed = self.process(delivery, span)
                self.finish_unacked()  # the previous eval's answer came in meanwhile
                if processed.request_id:
                    self.unacked = UnackedEval(delivery, processed.request_id, span)
                elif processed.acked_by_leader:
                    self.stats["acked_by_leader"] += 1
                    self.tracing.ack_trace(span, AckOutcome.ACK, ACKED_ON_COMMIT)
                else:
                    self._ack(delivery, span, processed.outcome, processed.reason)

    def finish_unacked(self, timeout_s: float | None = None) -> None:
        """Ack (or nack, if the leader refused the token) the eval whose final status
        is in flight, once the leader answered."""
        pending, self.unacked = self.unacked, None
        if pending is None:
            return
        outcome, reason = AckOutcome.ACK, ""
        try:
            response = self.reply.wait(
                LeaderResponse,
                pending.request_id,
                self.reply_timeout_s if timeout_s is None else timeout_s,
                self.replica,
            )
            assert isinstance(response, LeaderResponse)
            if not response.ok:
                self.stats["nacks"] += 1
                outcome, reason = AckOutcome.NACK, response.error
        except LeaderUnavailable as exc:
            self.stats["nacks"] += 1
            outcome, reason = AckOutcome.NACK, str(exc)
        self._ack(pending.delivery, pending.span, outcome, reason)

    def _ack(self, delivery: EvalDelivery, span: Span, outcome: AckOutcome, reason: str) -> None:
        ack = EvalAck(delivery.eval.id, delivery.token, outcome, self.worker_id, reason)
        ack_trace = self.tracing.ack_trace(span, outcome, reason)
        self.bus.publish(self.names.acks, [("EvalAck", ack)], ack_trace)

    def process(self, delivery: EvalDelivery, span: Span = INVALID_SPAN) -> Processed:
        """Schedule one evaluation; any failure becomes a nack with the reason."""
        self.stats["evals"] += 1
        try:
            if not self.replica.catch_up_to(delivery.wait_index, self.wait_timeout_s):
                raise LeaderUnavailable(
                    f"replica at {self.replica.index} did not reach {delivery.wait_index}"
                )
            self.replica.catch_up()  # and whatever else is committed: the freshest snapshot
            planner = StreamPlanner(self, delivery)
            scheduler = new_scheduler(delivery.eval.type, self.snapshot_for(delivery.eval), planner)
            scheduler.node_allocs = self._node_allocs()
            scheduler.phases = self.tracing.phases()
            try:
                scheduler.process(delivery.eval)
            finally:
                self.tracing.record_phases(span, scheduler.phases)
                self.stats["rebased_plans"] += scheduler.rebases
                self.stats["rebased_nodes"] += scheduler.rebased_nodes
            return Processed(AckOutcome.ACK, "", planner.flush(), planner.acked_by_leader)
        except StaleDelivery as exc:
            self.stats["nacks"] += 1
            return Processed(AckOutcome.NACK, str(exc))
        except Exception as exc:  # a failed eval is nacked and redelivered, never lost
            log.exception("eval %s failed on %s", delivery.eval.id, self.worker_id)
            self.stats["nacks"] += 1
            return Processed(AckOutcome.NACK, f"{type(exc).__name__}: {exc}")
