"""Nomad's eval broker (`nomad/eval_broker.go`) as a pure, single-threaded core.

At-least-once delivery of evaluations to schedulers: a ready heap per scheduler type,
one eval per job in flight (the rest wait in a per-job pending heap and are superseded on
ack), nack timers, re-enqueue delays and a `_failed` queue after the delivery limit.

No threads and no sleeps: time comes from an injected clock, and `tick()` (which
`dequeue` also calls) fires due nack timers and releases delayed evals. Between ticks the
broker's state reflects the last tick. The shell owns blocking dequeues, leadership
(`flush` on losing it) and the raft writes for cancelable and failed evals.

Costs: enqueue, dequeue, ack and nack are O(log n) (dequeue also O(k) in the requested
scheduler types; ack also O(m) in the superseded evals it marks cancelable). Nack timers
and delays live on `TimerHeap`s (lazy deletion, compacted when stale entries dominate).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterable, Sequence

from actors.broker.core.clock import Clock
from actors.broker.core.errors import (
    ACK_AFTER_TIMEOUT,
    TIMEOUT_REACHED,
    NackTimeoutReachedError,
    NotOutstandingError,
    TokenMismatchError,
)
from actors.broker.core.ready_queue import PendingQueue, ReadyQueue
from actors.broker.core.records import (
    FAILED_QUEUE,
    BrokerStats,
    Delivery,
    Location,
    SchedulerStats,
)
from actors.broker.core.timers import TimerHeap
from contracts.evaluation import Evaluation
from contracts.ids import new_uuid

JobKey = tuple[str, str]
"""(namespace, job_id): the unit of per-job serialisation."""


# The index each location lives in, for `check_invariants`.
_INDEX_OF = {
    Location.WAITING: "waiting",
    Location.READY: "ready",
    Location.FAILED: "ready",
    Location.PENDING: "pending",
    Location.CANCELABLE: "cancelable",
}


def job_key(evaluation: Evaluation) -> JobKey:
    return (evaluation.namespace, evaluation.job_id)


class _Entry:
    """One tracked eval (Nomad's `evals[id]` dequeue count plus where it currently is)."""

    __slots__ = ("dequeues", "eval", "last_failure", "location", "paused", "queue", "token")

    def __init__(self, evaluation: Evaluation) -> None:
        self.eval = evaluation
        self.location = Location.WAITING
        self.queue = evaluation.type  # the ready queue it is in, or was delivered from
        self.dequeues = 0
        self.token = ""  # set while UNACKED
        self.paused = False  # UNACKED with its nack timer stopped
        self.last_failure = ""  # why its latest delivery was nacked


class _JobRef:
    """How many of a job's evals are tracked, and the highest ModifyIndex among them."""

    __slots__ = ("max_index", "refs")

    def __init__(self) -> None:
        self.refs = 0
        self.max_index = 0


class EvalBroker:
    """Priority queues of evaluations with per-job serialisation and at-least-once delivery."""

    def __init__(
        self,
        clock: Clock,
        nack_timeout_s: float = 60.0,
        delivery_limit: int = 3,
        initial_nack_delay_s: float = 1.0,
        subsequent_nack_delay_s: float = 20.0,
        rng: random.Random | None = None,
    ) -> None:
        if nack_timeout_s < 0:
            raise ValueError("timeout cannot be negative")
        self._clock = clock
        self._nack_timeout = nack_timeout_s
        self._delivery_limit = delivery_limit
        self._initial_nack_delay = initial_nack_delay_s
        self._subsequent_nack_delay = subsequent_nack_delay_s
        self._rng = rng if rng is not None else random.Random()
        self.flush()

    def flush(self) -> None:
        """Drop all state: the broker runs only on the leader and is emptied on losing it."""
        self._entries: dict[str, _Entry] = {}
        self._ready: dict[str, ReadyQueue] = {}
        self._pending: dict[JobKey, PendingQueue] = {}
        self._job_slot: dict[JobKey, str] = {}  # Nomad's jobEvals: the one ready/in-flight eval
        self._jobs: dict[JobKey, _JobRef] = {}
        self._requeue: dict[str, Evaluation] = {}  # token -> eval parked until that ack
        self._cancelable: deque[str] = deque()
        self._waiting = TimerHeap()  # eval id -> when it becomes ready (unix s)
        self._timers = TimerHeap()  # eval id -> when its delivery is nacked (unix s)
        self._ready_by: dict[str, int] = {}
        self._unacked_by: dict[str, int] = {}
        self._total_pending = 0

    # ------------------------------------------------------------------ enqueue

    def enqueue(self, evaluation: Evaluation) -> None:
        """Track a new eval; enqueueing an ID the broker already tracks is a no-op."""
        self._process_enqueue(evaluation, "")

    def enqueue_all(self, items: Iterable[tuple[Evaluation, str]]) -> None:
        """Enqueue (eval, token) pairs; a token of the eval's outstanding delivery parks it.

        This is the reblock path: a re-enqueued eval whose delivery is still outstanding
        is enqueued when that delivery is acked and dropped when it is nacked. An empty
        token is a plain `enqueue`. (Nomad takes a map keyed by eval; our records are
        unhashable, so this takes pairs, e.g. `BlockedEvals.unblock(...)`'s result.)
        """
        for evaluation, token in items:
            self._process_enqueue(evaluation, token)

    def _process_enqueue(self, evaluation: Evaluation, token: str) -> None:
        entry = self._entries.get(evaluation.id)
        if entry is not None:
            self._note_index(evaluation)
            if token and entry.location is Location.UNACKED and entry.token == token:
                self._requeue[token] = evaluation
            return
        entry = _Entry(evaluation)
        self._entries[evaluation.id] = entry
        ref = self._jobs.get(job_key(evaluation))
        if ref is None:
            ref = self._jobs[job_key(evaluation)] = _JobRef()
        ref.refs += 1
        self._note_index(evaluation)
        due = evaluation.wait_until / 1e9
        if evaluation.wait_until > 0 and due > self._clock():
            # Delayed evals do not hold the job's slot while they wait (Nomad's delayHeap).
            self._wait(entry, due)
            return
        self._enqueue_locked(entry, evaluation.type)

    def _note_index(self, evaluation: Evaluation) -> None:
        ref = self._jobs[job_key(evaluation)]
        ref.max_index = max(ref.max_index, evaluation.modify_index)

    def _enqueue_locked(self, entry: _Entry, queue: str) -> None:
        """Make the eval ready in `queue`, unless another eval of its job holds the slot."""
        key = job_key(entry.eval)
        holder = self._job_slot.setdefault(key, entry.eval.id)
        if holder != entry.eval.id:
            pending = self._pending.get(key)
            if pending is None:
                pending = self._pending[key] = PendingQueue()
            pending.push(entry.eval)
            entry.location = Location.PENDING
            self._total_pending += 1
            return
        ready = self._ready.get(queue)
        if ready is None:
            ready = self._ready[queue] = ReadyQueue()
            self._ready_by.setdefault(queue, 0)
            self._unacked_by.setdefault(queue, 0)
        ready.push(entry.eval)
        entry.queue = queue
        entry.location = Location.FAILED if queue == FAILED_QUEUE else Location.READY
        self._ready_by[queue] += 1

    def _wait(self, entry: _Entry, due: float) -> None:
        entry.location = Location.WAITING
        self._waiting.arm(entry.eval.id, due)

    # ------------------------------------------------------------------ dequeue

    def dequeue(self, schedulers: Sequence[str]) -> Delivery | None:
        """Deliver the highest-priority ready eval among `schedulers`, or None.

        Ties in priority across scheduler types are broken at random so no type starves
        (Nomad's `scanForSchedulers`). Non-blocking: the shell waits and retries.
        """
        self.tick()
        eligible: list[str] = []
        best = 0
        for name in dict.fromkeys(schedulers):
            ready = self._ready.get(name)
            if not ready:
                continue
            priority = ready.top_priority()
            if not eligible or priority > best:
                eligible, best = [name], priority
            elif priority == best:
                eligible.append(name)
        if not eligible:
            return None
        queue = eligible[0] if len(eligible) == 1 else self._rng.choice(eligible)
        entry = self._entries[self._ready[queue].pop()]
        self._ready_by[queue] -= 1
        self._unacked_by[queue] += 1
        entry.location = Location.UNACKED
        entry.token = new_uuid()
        entry.dequeues += 1
        entry.paused = False
        self._timers.arm(entry.eval.id, self._clock() + self._nack_timeout)
        wait_index = self._jobs[job_key(entry.eval)].max_index
        return Delivery(entry.eval, entry.token, max(wait_index, entry.eval.modify_index))

    # ------------------------------------------------------------------ ack / nack

    def ack(self, eval_id: str, token: str) -> None:
        """The delivery succeeded: forget the eval, promote one pending eval of its job.

        The other pending evals of the job become cancelable (Nomad PR #14621): the
        promoted one is newer or more important, and its WaitIndex covers theirs.
        """
        requeued = self._requeue.pop(token, None)
        entry = self._outstanding(eval_id, token)
        self._timers.cancel(eval_id)
        self._unacked_by[entry.queue] -= 1
        self._forget(entry)
        key = job_key(entry.eval)
        del self._job_slot[key]
        pending = self._pending.pop(key, None)
        if pending:
            promoted = self._entries[pending.pop()]
            superseded = pending.drain()
            self._total_pending -= 1 + len(superseded)
            for other in superseded:
                self._entries[other].location = Location.CANCELABLE
                self._cancelable.append(other)
            self._enqueue_locked(promoted, promoted.eval.type)
        if requeued is not None:
            self._process_enqueue(requeued, "")

    def nack(self, eval_id: str, token: str, reason: str = "") -> None:
        """The delivery failed (`reason`: the worker's why): redeliver after a delay, or fail
        it at the delivery limit."""
        self._requeue.pop(token, None)
        entry = self._lookup(eval_id, token)
        entry.last_failure = reason or "nacked without a reason"
        self._nack(entry, self._clock())

    def last_failure(self, eval_id: str) -> str:
        """Why the eval's latest delivery failed ("" if none did)."""
        entry = self._entries.get(eval_id)
        return entry.last_failure if entry is not None else ""

    def _nack(self, entry: _Entry, at: float) -> None:
        """Nack at time `at` (a timer's deadline when it fired unobserved between ticks)."""
        self._requeue.pop(entry.token, None)
        self._timers.cancel(entry.eval.id)
        self._unacked_by[entry.queue] -= 1
        entry.token = ""
        entry.paused = False
        # The eval keeps its job's slot: a nacked eval is still the job's in-flight one.
        if entry.dequeues >= self._delivery_limit:
            self._enqueue_locked(entry, FAILED_QUEUE)
            return
        delay = self._nack_delay(entry.dequeues)
        if delay > 0:
            self._wait(entry, at + delay)
        else:
            self._enqueue_locked(entry, entry.eval.type)

    def _nack_delay(self, dequeues: int) -> float:
        """Nomad's nackReenqueueDelay: none, then the initial delay, then compounding."""
        if dequeues <= 0:
            return 0.0
        if dequeues == 1:
            return self._initial_nack_delay
        return (dequeues - 1) * self._subsequent_nack_delay

    # ------------------------------------------------------------------ nack timers

    @property
    def delivery_limit(self) -> int:
        return self._delivery_limit

    def delivery_count(self, eval_id: str) -> int:
        """How many times the eval was handed out (1 on its first delivery); 0 if unknown."""
        entry = self._entries.get(eval_id)
        return entry.dequeues if entry is not None else 0

    def outstanding(self, eval_id: str) -> str | None:
        """The token of the eval's outstanding delivery, if it has one."""
        entry = self._entries.get(eval_id)
        if entry is None or entry.location is not Location.UNACKED:
            return None
        return entry.token

    def outstanding_reset(self, eval_id: str, token: str) -> None:
        """Restart the nack timer: the worker is still making progress (a no-op if paused)."""
        entry = self._outstanding(eval_id, token, TIMEOUT_REACHED)
        if not entry.paused:
            self._timers.arm(eval_id, self._clock() + self._nack_timeout)

    def pause_nack_timeout(self, eval_id: str, token: str) -> None:
        """Stop the nack timer while the eval waits on the plan queue (unbounded time)."""
        entry = self._outstanding(eval_id, token, TIMEOUT_REACHED)
        self._timers.cancel(eval_id)
        entry.paused = True

    def resume_nack_timeout(self, eval_id: str, token: str) -> None:
        """Restart the full nack timeout after `pause_nack_timeout`."""
        entry = self._outstanding(eval_id, token, TIMEOUT_REACHED)
        entry.paused = False
        self._timers.arm(eval_id, self._clock() + self._nack_timeout)

    def tick(self) -> None:
        """Fire due nack timers (auto-nack), then release delayed evals that are due."""
        now = self._clock()
        while (fired := self._timers.pop_due(now)) is not None:
            entry = self._entries[fired[0]]
            entry.last_failure = (
                f"no ack within {self._nack_timeout:g}s (the worker hung, died or lost Redis)"
            )
            self._nack(entry, fired[1])
        while (due := self._waiting.pop_due(now)) is not None:
            entry = self._entries[due[0]]
            self._enqueue_locked(entry, entry.eval.type)

    def _lookup(self, eval_id: str, token: str) -> _Entry:
        entry = self._entries.get(eval_id)
        if entry is None or entry.location is not Location.UNACKED:
            raise NotOutstandingError(eval_id)
        if entry.token != token:
            raise TokenMismatchError(eval_id)
        return entry

    def _outstanding(
        self,
        eval_id: str,
        token: str,
        expired_message: str = ACK_AFTER_TIMEOUT,
    ) -> _Entry:
        """Look up a live delivery; one whose timer is overdue is nacked now and refused."""
        entry = self._lookup(eval_id, token)
        deadline = self._timers.deadline(eval_id)
        if deadline is not None and deadline <= self._clock():
            self._nack(entry, deadline)
            raise NackTimeoutReachedError(eval_id, expired_message)
        return entry

    # ------------------------------------------------------------------ cancelable

    def take_cancelable(self, max_n: int) -> list[Evaluation]:
        """Hand over up to `max_n` superseded evals, oldest first, for the leader to cancel.

        The caller writes them with status canceled and `CANCELED_DESCRIPTION` (Nomad's
        `reapCancelableEvaluations`, batches of 728, woken on ack and every 5s).
        """
        out: list[Evaluation] = []
        while self._cancelable and len(out) < max_n:
            entry = self._entries[self._cancelable.popleft()]
            self._forget(entry)
            out.append(entry.eval)
        return out

    def _forget(self, entry: _Entry) -> None:
        del self._entries[entry.eval.id]
        key = job_key(entry.eval)
        ref = self._jobs[key]
        ref.refs -= 1
        if ref.refs == 0:
            del self._jobs[key]

    # ------------------------------------------------------------------ inspection

    def location(self, eval_id: str) -> Location | None:
        """Where the eval is, or None if the broker does not track it (e.g. acked)."""
        entry = self._entries.get(eval_id)
        return None if entry is None else entry.location

    def __len__(self) -> int:
        return len(self._entries)

    def unacked_count(self) -> int:
        """`stats().total_unacked` without building the stats (the leader asks every turn)."""
        return sum(self._unacked_by.values())

    def ready_count(self) -> int:
        """`stats().total_ready`, the failed queue included, without building the stats."""
        return sum(self._ready_by.values())

    def failed_count(self) -> int:
        """`stats().total_failed` without building the stats."""
        return self._ready_by.get(FAILED_QUEUE, 0)

    def stats(self) -> BrokerStats:
        by_scheduler = {
            name: SchedulerStats(ready=self._ready_by[name], unacked=self._unacked_by[name])
            for name in self._ready_by
        }
        return BrokerStats(
            total_ready=sum(self._ready_by.values()),
            total_unacked=sum(self._unacked_by.values()),
            total_pending=self._total_pending,
            total_waiting=len(self._waiting),
            total_cancelable=len(self._cancelable),
            total_failed=self._ready_by.get(FAILED_QUEUE, 0),
            by_scheduler=by_scheduler,
        )

    def check_invariants(self) -> None:
        """Cross-check every index against the entries; O(n), for tests and debugging."""
        seen: dict[str, str] = {}

        def place(eval_id: str, where: str) -> None:
            if eval_id in seen:
                raise AssertionError(f"{eval_id} in both {seen[eval_id]} and {where}")
            seen[eval_id] = where

        for name, ready in self._ready.items():
            if len(ready) != self._ready_by[name]:
                raise AssertionError(f"ready count of {name} is off")
            for eval_id in ready:
                place(eval_id, f"ready:{name}")
                entry = self._entries[eval_id]
                if entry.queue != name or entry.location not in (Location.READY, Location.FAILED):
                    raise AssertionError(f"{eval_id} in ready:{name} but {entry.location}")
        for key, pending in self._pending.items():
            for eval_id in pending:
                place(eval_id, f"pending:{key}")
                if self._entries[eval_id].location is not Location.PENDING:
                    raise AssertionError(f"{eval_id} in pending but not PENDING")
        for eval_id in self._waiting:
            place(eval_id, "waiting")
        for eval_id in self._cancelable:
            place(eval_id, "cancelable")
        unacked = {n: 0 for n in self._unacked_by}
        refs: dict[JobKey, int] = {}
        for eval_id, entry in self._entries.items():
            key = job_key(entry.eval)
            refs[key] = refs.get(key, 0) + 1
            if entry.location is Location.UNACKED:
                place(eval_id, "unacked")
                unacked[entry.queue] += 1
                if (eval_id in self._timers) == entry.paused:
                    raise AssertionError(f"{eval_id}: timer armed iff not paused")
            elif seen.get(eval_id, "").split(":")[0] != _INDEX_OF[entry.location]:
                raise AssertionError(f"{eval_id} is {entry.location}, in {seen.get(eval_id)}")
            holds_slot = entry.location in (Location.READY, Location.FAILED, Location.UNACKED)
            if holds_slot and self._job_slot.get(key) != eval_id:
                raise AssertionError(f"{eval_id} is {entry.location} without its job's slot")
        if len(seen) != len(self._entries) or unacked != self._unacked_by:
            raise AssertionError("an entry is missing from every index, or unacked is off")
        if sum(len(p) for p in self._pending.values()) != self._total_pending:
            raise AssertionError("pending count is off")
        if {k: r.refs for k, r in self._jobs.items()} != refs:
            raise AssertionError("job reference counts are off")
        if any(self._entries[i].location is not Location.UNACKED for i in self._timers):
            raise AssertionError("a nack timer is armed for an eval not outstanding")
        for key, holder in self._job_slot.items():
            if holder not in self._entries or job_key(self._entries[holder].eval) != key:
                raise AssertionError(f"slot of {key} held by an unknown eval")
