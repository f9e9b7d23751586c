"""Drive the broker from the state log, as Nomad's FSM drives its broker on every commit.

The broker never learns about evaluations any other way: a pending eval in a committed entry
is enqueued, a blocked one is tracked, a completed one releases its job's blocked eval, and
capacity that appears (a node becoming ready, an allocation finishing) unblocks evals that
could use it. Decisions that change an eval's recorded status (release a blocked eval,
cancel a superseded or duplicate one, fail one past its delivery limit) are returned as
records for the leader to commit; they come back through the log like everything else.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

from actors.broker.core.blocked_evals import BlockedEvals, BlockOutcome, Unblocked
from actors.broker.core.eval_broker import EvalBroker
from actors.broker.core.records import CANCELED_DESCRIPTION, delivery_limit_description
from actors.state import StateReader
from contracts import ClientStatus, EvalStatus, Evaluation, NodeStatus, TriggeredBy
from contracts.state_log import (
    LogEntry,
    PurgeJob,
    UpdateAllocsClientStatus,
    UpsertAllocs,
    UpsertEvals,
    UpsertJob,
    UpsertNodes,
)

# Nomad's EvalFailedFollowupBaselineDelay: a failed eval's follow-up waits this long.
FAILED_FOLLOW_UP_DELAY_NS = 60 * 1_000_000_000
_TERMINAL_CLIENT = (ClientStatus.COMPLETE, ClientStatus.FAILED, ClientStatus.LOST)
_RESTORED = (EvalStatus.PENDING, EvalStatus.BLOCKED)


class BrokerFeed:
    def __init__(
        self,
        broker: EvalBroker,
        blocked: BlockedEvals,
        *,
        new_id: Callable[[], str],
        now_ns: Callable[[], int],
    ) -> None:
        self.broker = broker
        self.blocked = blocked
        self.new_id = new_id
        self.now_ns = now_ns

    def apply(self, entry: LogEntry, state: StateReader) -> list[Evaluation]:
        """Feed one committed entry (already applied to `state`); returns eval records the
        leader must write (released, canceled or failed evals)."""
        change = entry.change
        writes: list[Evaluation] = []
        evals: tuple[Evaluation, ...] = ()
        if isinstance(change, UpsertEvals | UpsertJob | PurgeJob | UpsertAllocs):
            evals = change.evals
        for submitted in evals:
            stored = state.eval(submitted.id) or submitted
            writes += self._track(stored)
        writes += self._capacity(entry, state)
        writes += self.housekeeping()
        return writes

    def _capacity(self, entry: LogEntry, state: StateReader) -> list[Evaluation]:
        """Capacity that appeared (a node ready, an allocation finished): the blocked evals
        that could use it are released."""
        change = entry.change
        writes: list[Evaluation] = []
        if isinstance(change, UpsertNodes):
            for node in change.nodes:
                if node.status is NodeStatus.READY:
                    writes += self._release(self.blocked.unblock(node.computed_class, entry.index))
                    writes += self._release(self.blocked.unblock_node(node.id, entry.index))
        elif isinstance(change, UpdateAllocsClientStatus):
            classes: set[str] = set()
            for update in change.updates:
                if update.client_status not in _TERMINAL_CLIENT:
                    continue
                node_id = update.node_id
                if not node_id:
                    alloc = state.alloc(update.alloc_id)
                    node_id = alloc.node_id if alloc else ""
                host = state.node(node_id) if node_id else None
                if host is not None and host.computed_class not in classes:
                    classes.add(host.computed_class)
                    writes += self._release(self.blocked.unblock(host.computed_class, entry.index))
        return writes

    def restore(self, state: StateReader, tail: Iterable[LogEntry] = ()) -> list[Evaluation]:
        """The broker of a leader that rebuilt its store (Nomad's restoreEvals): the evals
        pending or blocked in `state` as it finally stands, oldest first. Replaying the log
        entry by entry instead enqueued every eval it registered, whether or not a later
        entry completed it, so a new leader re-ran everything since the last snapshot.
        `tail`: the entries replayed after the snapshot; the capacity they made is noted
        first, so that a blocked eval whose release was not yet written when the old leader
        stopped is released now (a missed unblock)."""
        for node in state.nodes():  # capacity as of each ready node's last change...
            if node.status is NodeStatus.READY:
                self.blocked.unblock(node.computed_class, node.modify_index)
                self.blocked.unblock_node(node.id, node.modify_index)
        for entry in tail:  # ...and what finished in the tail (nothing is blocked yet:
            self._capacity(entry, state)  # these only note indexes)
        waiting = [e for e in state.evals() if e.status in _RESTORED]
        writes: list[Evaluation] = []
        for evaluation in sorted(waiting, key=lambda e: (e.create_index, e.id)):
            writes += self._track(evaluation)
        return writes + self.housekeeping()

    def _track(self, evaluation: Evaluation) -> list[Evaluation]:
        status = evaluation.status
        if status is EvalStatus.PENDING:
            token = self.broker.outstanding(evaluation.id)
            if token:
                # Released while a worker still holds it (it reblocked, then capacity came):
                # parked until that delivery is acked, dropped if it is nacked (Nomad's
                # requeue-with-token).
                self.broker.enqueue_all([(evaluation, token)])
            else:
                self.broker.enqueue(evaluation)
            return []
        if status is EvalStatus.BLOCKED:
            token = self.broker.outstanding(evaluation.id) or ""
            result = self.blocked.block(evaluation, token)
            if result.outcome is BlockOutcome.UNBLOCKED and result.enqueue is not None:
                return self._release([result.enqueue])
            return []
        if status is EvalStatus.COMPLETE and not evaluation.failed_tg_allocs:
            self.blocked.untrack(evaluation.namespace, evaluation.job_id)
        return []

    def _release(self, unblocked: Iterable[Unblocked]) -> list[Evaluation]:
        """Released blocked evals become pending records for the leader to write; the broker
        enqueues them when the write comes back through the log."""
        now = self.now_ns()
        return [
            dataclasses.replace(item.eval, status=EvalStatus.PENDING, modify_time=now)
            for item in unblocked
        ]

    def housekeeping(self) -> list[Evaluation]:
        """Cancel superseded and duplicate evals; fail evals past the delivery limit (with a
        follow-up eval, as Nomad's reapFailedEvaluations)."""
        now = self.now_ns()
        writes = [
            dataclasses.replace(
                e,
                status=EvalStatus.CANCELED,
                status_description=CANCELED_DESCRIPTION,
                modify_time=now,
            )
            for e in self.broker.take_cancelable(1000)
        ]
        writes += [
            dataclasses.replace(e, status=EvalStatus.CANCELED, modify_time=now)
            for e in self.blocked.take_duplicates()
        ]
        while True:
            delivery = self.broker.dequeue(["_failed"])
            if delivery is None:
                break
            failed = delivery.eval
            follow_up = Evaluation(
                id=self.new_id(),
                namespace=failed.namespace,
                priority=failed.priority,
                type=failed.type,
                triggered_by=TriggeredBy.FAILED_FOLLOW_UP,
                job_id=failed.job_id,
                job_modify_index=failed.job_modify_index,
                status=EvalStatus.PENDING,
                previous_eval=failed.id,
                wait_until=now + FAILED_FOLLOW_UP_DELAY_NS,
                create_time=now,
                modify_time=now,
            )
            writes.append(
                dataclasses.replace(
                    failed,
                    status=EvalStatus.FAILED,
                    status_description=delivery_limit_description(
                        self.broker.delivery_limit, self.broker.last_failure(failed.id)
                    ),
                    next_eval=follow_up.id,
                    modify_time=now,
                )
            )
            writes.append(follow_up)
            self.broker.ack(failed.id, delivery.token)
        return writes
