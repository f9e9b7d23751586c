"""The eval broker service, hosted by the leader (as Nomad's broker runs on its leader).

    leader's commits --(feed, on the leader's thread)--> BrokerFeed: enqueue / block / unblock
    acks stream --(EvalAck)--> ack / nack
    tick: nack timeouts, delayed evals
    deliver: while workers have room, dequeue and publish EvalDelivery; the delivery's token
        is written to the fencing hash in the same transaction, so the leader can refuse
        anything an older delivery of the same eval sends.
    writes the broker decides (released, canceled, failed evals) go to the leader.

The leader hands it every entry once it is durable and applied to the leader's store (or,
at a batch's end, staged entries under `hold`: the leader may take what they make ready for
itself, nothing goes out before `release`), and
resets it before rebuilding that store (at start, or after a failed commit), feeding it the
snapshot and the log again: the broker keeps no replica of its own, and nothing is decoded
twice. Its loop (acks, deliveries) runs on a thread of its own in the leader's process.

At-least-once: an unacked delivery comes back after the nack timeout with a new token; after
the delivery limit it is failed with a follow-up eval. A new leader starts a new broker:
every pending eval is enqueued again and every blocked one blocked again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

import redis

from actors.broker.core import BlockedEvals, EvalBroker, NotOutstandingError
from actors.broker.core.errors import EvalBrokerError
from actors.broker.core.feed import BrokerFeed
from actors.broker.tracing import BrokerTracing
from actors.process_settings import when_idle
from actors.runtime.reconnect import UNREACHABLE, Reconnecting
from actors.state import StateReader
from actors.streams import GroupConsumer, StreamBus
from actors.streams.envelope import encode_message, registry_of
from actors.streams.names import BROKER_GROUP, LEADER_GROUP, WORKERS_GROUP, StreamNames
from actors.streams.wake import WakeableReads
from contracts import EvalStatus, Evaluation
from contracts.ids import new_uuid
from contracts.messages import AckOutcome, EvalAck, EvalDelivery, LeaderRequest, RequestKind
from contracts.state_log import LogEntry, UpsertAllocs, UpsertEvals, UpsertJob
from observability import Telemetry

log = logging.getLogger(__name__)

SCHEDULER_TYPES = ("service", "batch", "system", "sysbatch")


class BrokerService:
    def __init__(
        self,
        client: redis.Redis,
        names: StreamNames,
        *,
        capacity: int = 2,
        nack_timeout_s: float = 60.0,
        delivery_limit: int = 3,
        telemetry: Telemetry | None = None,
        ack_block_ms: int = 20,
    ) -> None:
        self.tracing = BrokerTracing(telemetry or Telemetry.disabled("broker"), names.deliveries)
        self.client = client
        self.names = names
        self.bus = StreamBus(client)
        self.capacity = capacity  # deliveries in flight at once: one per worker
        self._limits = (nack_timeout_s, delivery_limit)
        self.lock = threading.RLock()  # the leader's thread (feed) and the loop share the cores
        self._held = False  # entries fed are staged, not yet durable (`hold`)
        self._abandoned = False  # the hosting leader was deposed (`abandon`): send nothing
        self.reset()
        self._writes: list[Evaluation] = []
        # Evals the leader acked on its thread (complete) whose tokens the loop deletes.
        self._completed: list[str] = []
        self.stats = {
            "delivered": 0,
            "acked": 0,
            "acked_on_commit": 0,  # of those, by the leader as it committed the plan
            "delivered_local": 0,  # to the leader itself (local_scheduling.py)
            "acked_local": 0,  # of "acked", settled by the leader itself (not on commit)
            "nacked": 0,
            "stale_acks": 0,
        }
        # The loop blocks reading acks; evals the leader's commits enqueue cut that short.
        self.reads = WakeableReads(client)
        self._acks = GroupConsumer(
            StreamBus(self.reads.client),
            names.acks,
            BROKER_GROUP,
            "broker",
            registry_of(EvalAck),
            self._handle_acks,
            batch=256,
            block_ms=ack_block_ms,
        )

    def reset(self) -> None:
        """Empty broker cores: at start, and before the leader rebuilds its store from the
        snapshot and the log (then `restore` tracks what is still pending or blocked).
        Deliveries in flight are forgotten: they are delivered again under new tokens, which
        fence out whatever the old deliveries' workers still send."""
        nack_timeout_s, delivery_limit = self._limits
        with self.lock:
            self.broker = EvalBroker(
                time.time, nack_timeout_s=nack_timeout_s, delivery_limit=delivery_limit
            )
            self.blocked = BlockedEvals()
            self.feed = BrokerFeed(self.broker, self.blocked, new_id=new_uuid, now_ns=time.time_ns)
            # Delivered to the leader itself (take_local): their tokens live in memory only.
            self._local: set[str] = set()
            # What entries fed under `hold` (not yet durable) made: sent out on `release`.
            self._held_writes: list[Evaluation] = []
            self._held_handed: list[EvalDelivery] = []

    def abandon(self) -> None:
        """The leader hosting this broker was deposed: empty it, drop the eval writes and
        token deletions it has not sent, and stop its loop, so that it delivers, writes and
        acks nothing a newer leader now decides (its acks stream is read under the same
        group and consumer name). What a turn already sent before this returns is sent."""
        with self.lock:  # one step: the loop sees the old broker or none at all
            self._abandoned = True
            self.reset()
            self._writes, self._completed = [], []
        self.reads.wake()  # out of its blocking read of acks

    def start(self) -> None:
        self.bus.ensure_group(self.names.acks, BROKER_GROUP)
        self.tracing.watch_backlog(
            self.bus,
            [
                (self.names.deliveries, WORKERS_GROUP),
                (self.names.acks, BROKER_GROUP),
                (self.names.requests, LEADER_GROUP),
            ],
        )

    def run(self, stop: threading.Event) -> None:
        reconnecting = Reconnecting(stop, "broker")
        while not stop.is_set() and not self._abandoned:
            try:
                if not reconnecting(self.poll_once):
                    when_idle()
            except UNREACHABLE:
                return  # raised only once stop is set

    def poll_once(self) -> bool:
        """One turn: acks read, queues ticked, deliveries and writes sent. False if there
        was nothing to do."""
        self.reads.arm()
        try:
            if self._abandoned:  # checked once armed: an abandon before found nothing to wake
                return False
            acked = self._acks.poll_once(wait=not self._work_waiting())
        finally:
            self.reads.disarm()
        with self.lock:
            self.broker.tick()
            # While held, what the broker decides may rest on entries not yet durable (an ack
            # promoting a held job's eval, which cancels older ones): it waits for release.
            held = self._held
            writes = self._writes + ([] if held else self.feed.housekeeping())
            self._writes = []
            deliveries = [] if held else self._dequeue_ready()
        # An eval failed at its delivery limit was acked on the core, not by a worker: its
        # last token must go too, or the worker still holding it could commit over FAILED.
        failed = [e.id for e in writes if e.status is EvalStatus.FAILED]
        with self.lock:
            if self._abandoned:  # while this turn ran: what it took goes nowhere
                return False
            done, self._completed = self._completed, []
        if failed or done:
            self._forget_tokens(failed + done)
        if deliveries:
            self._publish(deliveries)
        if writes:
            request = LeaderRequest(RequestKind.UPDATE_EVALS, evals=tuple(writes))
            self.bus.publish(self.names.requests, [("LeaderRequest", request)])
        return bool(acked or deliveries or writes or done)

    # -- feeding -------------------------------------------------------------------------------

    def on_commit(self, entry: LogEntry, state: StateReader) -> None:
        """One entry the leader made durable (or staged, under `hold`) and applied to `state`
        (its store), on the leader's thread."""
        with self.lock:
            writes = self.feed.apply(entry, state)
            if self._held:
                self._held_writes += writes
            else:
                self._writes += writes
            if entry.trace and isinstance(entry.change, UpsertJob | UpsertEvals | UpsertAllocs):
                self.tracing.on_entry(entry, entry.change.evals)
        # Called per entry. Ready evals go out from the leader's thread after its commit
        # (`deliver`); the loop is woken only for writes to send (and only while it is
        # blocked reading acks: a busy loop finds the work itself).
        if self.reads.armed and self._writes_waiting():
            self.reads.wake()

    def restore(self, state: StateReader, tail: Sequence[LogEntry] = ()) -> None:
        """After `reset`, once the leader has rebuilt its store: the evals still pending or
        blocked in it are tracked again (feed.py `restore`; `tail`: the entries replayed
        after the snapshot that made capacity)."""
        with self.lock:
            self._writes += self.feed.restore(state, tail)

    def hold(self) -> None:
        """Entries fed from now until `release` are staged by the leader, not yet durable: the
        leader may take what they make ready for itself (`take_local`; its plans commit with
        them), but nothing they make leaves the process before they are durable: no
        delivery goes to the workers (a worker would schedule an eval the log may never
        hold), no eval write is sent. On the leader's thread."""
        with self.lock:
            self._held = True

    def release(self, durable: bool) -> None:
        """The held entries are durable (`durable`): their writes and the deliveries handed
        on meanwhile go out. Or they were lost, the leader rebuilding its store and this
        broker from the log: what they made is dropped."""
        with self.lock:
            self._held = False
            writes, self._held_writes = self._held_writes, []
            handed, self._held_handed = self._held_handed, []
            if durable:
                self._writes += writes
        if durable and handed:
            self._publish(handed)
        if durable and writes and self.reads.armed:
            self.reads.wake()

    def deliver(self) -> int:
        """Deliver what is ready, while there is room, on the caller's thread: the leader's,
        right after its commits enqueued evals or freed room (`complete`), so that an eval
        goes out without waiting for the loop to wake. Returns how many went out."""
        with self.lock:
            if self._held:
                return 0
            deliveries = self._dequeue_ready()
        if deliveries:
            self._publish(deliveries)
        return len(deliveries)

    def complete(self, eval_id: str, token: str) -> bool:
        """The leader committed the plan that completed this delivery's eval (on the
        leader's thread): acked as the worker's ack would be, which the worker then does not
        send. False (nothing changed) if the delivery is no longer outstanding: the worker
        acks itself and the ack counts as stale."""
        with self.lock:
            if not self._settle(eval_id, token, True):
                return False
            self.stats["acked_on_commit"] += 1
            self._forget_token_later(eval_id)
        return True

    # -- evaluations the leader schedules itself (actors/leader/local_scheduling.py) ----------

    def take_local(self, types: tuple[str, ...]) -> tuple[EvalDelivery, dict[str, str]] | None:
        """A ready eval of `types` delivered to the leader itself, or None. Its token is
        kept in memory only: the leader schedules it on its own thread and commits its plans
        within the same turn, so no other holder can commit under it (a worker's delivery is
        fenced in the commit script because it computes elsewhere, for as long as it takes)."""
        with self.lock:
            taken = self.broker.dequeue(list(types))
            if taken is None:
                return None
            delivery = EvalDelivery(taken.eval, taken.token, taken.wait_index)
            count = self._delivery_count(delivery)
            trace = self.tracing.delivery_trace(delivery, count)
            self.stats["delivered_local"] += 1
            if count == 1:
                self._local.add(delivery.eval.id)
        if count > 1:
            # Delivered before: an earlier holder's token is in the hash and would still
            # pass the commit script. Fence it out as every redelivery does.
            self.client.hset(self.names.tokens_key, delivery.eval.id, delivery.token)
        return delivery, trace

    def hand_to_workers(self, delivery: EvalDelivery) -> None:
        """A delivery the leader took but leaves to the workers: sent to them as is (with
        its token written, as every worker's delivery)."""
        with self.lock:
            self._local.discard(delivery.eval.id)
            if self._held:
                self._held_handed.append(delivery)
                return
        self._publish([delivery])

    def settle_local(self, eval_id: str, token: str, ok: bool, reason: str = "") -> None:
        """Ack (or nack, with the reason) a delivery the leader scheduled."""
        with self.lock:
            if not self._settle(eval_id, token, ok, reason):
                self.stats["stale_acks"] += 1
                self._local.discard(eval_id)
            elif ok:
                self.stats["acked_local"] += 1
                self._forget_token_later(eval_id)
            else:
                self._local.discard(eval_id)

    def _settle(self, eval_id: str, token: str, ok: bool, reason: str = "") -> bool:
        """Ack (or nack) one delivery on the broker core, counted and traced; False if it
        is no longer outstanding (a late answer: it was or will be redelivered under
        another token). The caller holds the lock."""
        try:
            if ok:
                self.broker.ack(eval_id, token)
            else:
                self.broker.nack(eval_id, token, reason)
        except (NotOutstandingError, EvalBrokerError):
            return False
        self.stats["acked" if ok else "nacked"] += 1
        self.tracing.settled(eval_id, ok)
        return True

    def _forget_token_later(self, eval_id: str) -> None:
        """An acked delivery's token is deleted on the loop's next turn, unless it was never
        written (a first delivery to the leader itself). The caller holds the lock."""
        if eval_id in self._local:
            self._local.discard(eval_id)
        else:
            self._completed.append(eval_id)

    def _writes_waiting(self) -> bool:
        with self.lock:
            return bool(self._writes) or self.broker.failed_count() > 0

    def _work_waiting(self) -> bool:
        """Writes to send, tokens to delete, or a ready eval and room to deliver it."""
        with self.lock:
            if self._writes or self._completed:
                return True
            if self._held:
                return False  # ready evals wait for `release` (the leader delivers them)
            broker = self.broker  # its ready count includes the _failed queue
            room = broker.unacked_count() < self.capacity
            return broker.failed_count() > 0 or (broker.ready_count() > 0 and room)

    # -- deliveries ----------------------------------------------------------------------------

    def _dequeue_ready(self) -> list[EvalDelivery]:
        out = []
        in_flight = self.broker.unacked_count()
        while in_flight < self.capacity:
            delivery = self.broker.dequeue(list(SCHEDULER_TYPES))
            if delivery is None:
                break
            out.append(EvalDelivery(delivery.eval, delivery.token, delivery.wait_index))
            in_flight += 1
        return out

    def _publish(self, deliveries: Sequence[EvalDelivery]) -> None:
        if self._abandoned:
            return
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(
            self.names.tokens_key,
            mapping={d.eval.id: d.token for d in deliveries},
        )
        for delivery in deliveries:
            trace = self.tracing.delivery_trace(delivery, self._delivery_count(delivery))
            message = encode_message("EvalDelivery", delivery, trace)
            pipe.xadd(self.names.deliveries, message)  # type: ignore[arg-type]
        pipe.execute()
        with self.lock:  # the loop and the leader's thread both deliver
            self.stats["delivered"] += len(deliveries)

    # -- acks ----------------------------------------------------------------------------------

    def _handle_acks(self, batch: Sequence[tuple[str, str, object, dict[str, str]]]) -> None:
        done: list[str] = []
        with self.lock:
            for _message_id, _type, ack, _trace in batch:
                assert isinstance(ack, EvalAck)
                ok = ack.outcome is AckOutcome.ACK
                if not self._settle(ack.eval_id, ack.token, ok, ack.reason):
                    self.stats["stale_acks"] += 1  # a late ack for a timed-out delivery
                elif ok:
                    done.append(ack.eval_id)
        if done:
            self._forget_tokens(done)

    def _delivery_count(self, delivery: EvalDelivery) -> int:
        return self.broker.delivery_count(delivery.eval.id)

    def _forget_tokens(self, eval_ids: Sequence[str]) -> None:
        # Only if no newer delivery took the slot: compare-and-delete per eval.
        with self.lock:
            stale = [e for e in eval_ids if self.broker.outstanding(e) is None]
        if stale:
            self.client.hdel(self.names.tokens_key, *stale)
