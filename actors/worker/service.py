"""A scheduler worker: takes one delivery at a time, schedules it on its read replica and
talks to the leader through streams.

    deliveries --(EvalDelivery)--> worker: wait until the replica reaches the wait index,
        run the scheduler; each plan goes to the leader's stream and the worker waits on its
        own reply stream; a partial commit makes it wait for the refresh index and retry
        (the scheduler's retry loop); the eval's final status is written through the leader,
        fenced by the delivery token; then the broker gets an ack (or a nack on failure).

A worker that dies mid-eval leaves its delivery unacked: the broker's nack timeout hands it to
another worker with a new token, and the leader refuses anything the old token still sends.

The replica is applied on the worker's own thread, at the points where the worker would wait
anyway: while it waits for a delivery, for its wait index, and for the leader's answers (one
XREAD covers the reply stream and the log). A tail thread would take the GIL from the
scheduler in the middle of its work, which costs the scheduler far more than the apply.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import threading
import time
from collections.abc import Sequence

import redis
from opentelemetry.trace import INVALID_SPAN, Span

from actors.process_settings import tune_gc
from actors.runtime.replica import LogReplica
from actors.state import StateReader
from actors.streams import GroupConsumer, StreamBus
from actors.streams.envelope import decode_message, registry_of
from actors.streams.names import WORKERS_GROUP, StreamNames
from actors.worker.core.scheduler import new_scheduler
from actors.worker.tracing import WorkerTracing
from contracts import Evaluation, Plan, PlanResult
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
from observability import Telemetry

log = logging.getLogger(__name__)

REPLY_TYPES = registry_of(PlanResponse, LeaderResponse)
# Rows per stream per read while waiting for a reply: log entries are applied in between, a
# bounded number at a time so that a reply is never held up behind a long backlog.
REPLY_READ_COUNT = 64
# How long the loop blocks for a delivery before applying the log that arrived meanwhile.
IDLE_BLOCK_MS = 50


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
                if isinstance(message, match) and _reply_key(message) == key:
                    return message
        raise LeaderUnavailable(f"no {match.__name__} for {key} within {timeout_s:.0f}s")


def _name(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode()


def _reply_key(message: object) -> tuple[str, int] | str:
    if isinstance(message, PlanResponse):
        return (message.eval_id, message.attempt)
    assert isinstance(message, LeaderResponse)
    return message.request_id


class StreamPlanner:
    """The scheduler's Planner over streams, for one delivery."""

    def __init__(self, worker: WorkerService, delivery: EvalDelivery) -> None:
        self.worker = worker
        self.delivery = delivery
        self.attempt = 0
        self.evals: list[Evaluation] = []  # created/reblocked evals, sent with the next plan
        self.final: Evaluation | None = None

    def submit_plan(self, plan: Plan) -> tuple[PlanResult, StateReader | None]:
        worker = self.worker
        self.attempt += 1
        plan = dataclasses.replace(plan, eval_token=self.delivery.token)
        submission = PlanSubmission(plan, worker.reply.stream, self.attempt, tuple(self.evals))
        self.evals.clear()
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
        worker.stats["plans"] += 1
        if result.rejected_nodes:
            worker.stats["partial_plans"] += 1
        if not result.refresh_index:
            return result, None
        # Part of the plan was rejected: the scheduler retries on state at least this fresh.
        worker.stats["refreshes"] += 1
        worker.replica.catch_up_to(result.refresh_index, worker.wait_timeout_s)
        return result, worker.replica.snapshot()

    def update_eval(self, evaluation: Evaluation) -> None:
        self.final = evaluation

    def create_eval(self, evaluation: Evaluation) -> None:
        self.evals.append(evaluation)

    def reblock_eval(self, evaluation: Evaluation) -> None:
        self.final = evaluation

    def flush(self) -> None:
        """Write the eval's final status (and evals not yet sent), fenced by the token."""
        evals = [*self.evals, *([self.final] if self.final else [])]
        if not evals:
            return
        worker = self.worker
        request_id = f"{worker.worker_id}-{next(worker.request_ids)}"
        request = LeaderRequest(
            RequestKind.UPDATE_EVALS,
            request_id=request_id,
            reply_to=worker.reply.stream,
            evals=tuple(evals),
            fence_eval_id=self.delivery.eval.id,
            fence_token=self.delivery.token,
        )
        worker.bus.publish(worker.names.requests, [("LeaderRequest", request)])
        response = worker.reply.wait(
            LeaderResponse, request_id, worker.reply_timeout_s, worker.replica
        )
        assert isinstance(response, LeaderResponse)
        if not response.ok:
            raise StaleDelivery(response.error)


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
        tune_gc()
        self.worker_id = worker_id
        self.tracing = WorkerTracing(
            telemetry or Telemetry.disabled("worker", worker_id), names.deliveries, WORKERS_GROUP
        )
        self.client = client
        self.names = names
        self.bus = StreamBus(client)
        self.replica = LogReplica(client, names)
        self.reply = ReplyChannel(client, names.plan_results(worker_id))
        self.wait_timeout_s = wait_timeout_s
        self.reply_timeout_s = reply_timeout_s
        self.request_ids = itertools.count(1)
        self.stats = {"evals": 0, "plans": 0, "partial_plans": 0, "refreshes": 0, "nacks": 0}
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

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.replica.catch_up()  # what was committed while we waited (no blocking)
                self._consumer.poll_once()
            except redis.ConnectionError:
                if stop.is_set():
                    return
                time.sleep(0.2)

    def _handle(self, batch: Sequence[tuple[str, str, object, dict[str, str]]]) -> None:
        for message_id, _type, delivery, trace in batch:
            assert isinstance(delivery, EvalDelivery)
            with self.tracing.evaluation(delivery, trace, message_id) as span:
                outcome, reason = self.process(delivery, span)
                ack = EvalAck(delivery.eval.id, delivery.token, outcome, self.worker_id, reason)
                ack_trace = self.tracing.ack_trace(span, outcome, reason)
                self.bus.publish(self.names.acks, [("EvalAck", ack)], ack_trace)

    def process(self, delivery: EvalDelivery, span: Span = INVALID_SPAN) -> tuple[AckOutcome, str]:
        """Schedule one evaluation; any failure becomes a nack with the reason."""
        self.stats["evals"] += 1
        try:
            if not self.replica.catch_up_to(delivery.wait_index, self.wait_timeout_s):
                raise LeaderUnavailable(
                    f"replica at {self.replica.index} did not reach {delivery.wait_index}"
                )
            self.replica.catch_up()  # and whatever else is committed: the freshest snapshot
            planner = StreamPlanner(self, delivery)
            scheduler = new_scheduler(delivery.eval.type, self.replica.snapshot(), planner)
            scheduler.phases = self.tracing.phases()
            try:
                scheduler.process(delivery.eval)
            finally:
                self.tracing.record_phases(span, scheduler.phases)
            planner.flush()
            return AckOutcome.ACK, ""
        except StaleDelivery as exc:
            return AckOutcome.NACK, str(exc)
        except Exception as exc:  # a failed eval is nacked and redelivered, never lost
            log.exception("eval %s failed on %s", delivery.eval.id, self.worker_id)
            self.stats["nacks"] += 1
            return AckOutcome.NACK, f"{type(exc).__name__}: {exc}"
