"""The leader's commits (a mixin of LeaderService): every decision becomes durable through
the fenced durable log (commit.lua) and only then is applied to the store.

- `_commit`: one decision's changes, fenced by a delivery token if it has one. On an unknown
  outcome (Redis away, the answer lost) the store is rebuilt from the log before anything
  else is decided on it.
- `_stage`/`_flush_staged`: a batch's unfenced requests, applied at once and made durable by
  one commit at the batch's end, which carries the batch's answers and acks.
- A log that moved under a commit (an entry appended that this leader's store lacks, which
  should not happen while it holds the term) is caught up, and the caller decides again
  (`_redecided`): changes decided on a store that lacked the appended entries are never
  committed as they are.
- `_reload`: the store rebuilt from the latest snapshot and the log after it.
"""

from __future__ import annotations

import logging
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

import redis

from actors.leader.core.leader import LeaderCore
from actors.leader.durable_log import DurableLog, Fence, NotLeaderError
from actors.leader.service_records import (
    BatchAnswers,
    CommitFeed,
    LeaderStats,
    StagedCommitLost,
)
from actors.leader.snapshots import SnapshotWriter
from actors.runtime.snapshots import SnapshotStore, load_latest
from actors.state import StateStore
from contracts.ids import new_uuid
from contracts.state_log import (
    LogEntry,
    StateChange,
    UpdateAllocsClientStatus,
    UpsertNodes,
    decode_entry,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

APPLIED_REQUESTS_KEPT = 100_000
# Decisions made again after the log moved under their commit, before giving up.
COMMIT_ATTEMPTS = 3


class LogMoved(RuntimeError):
    """The log had entries this leader's store lacked; the store has caught up with them and
    the decision must be made again."""


class CommitMethods:
    store: StateStore
    core: LeaderCore
    durable: DurableLog
    snapshots: SnapshotStore
    snapshot_writer: SnapshotWriter
    broker: CommitFeed | None
    stats: LeaderStats
    applied: OrderedDict[str, int]
    _staged: list[LogEntry] | None
    _after_flush: list[Callable[[], object]]
    _fed_through: int  # staged entries up to this index were fed early (`_feed_early`)
    _rebuilds: int  # times the store was lost (and rebuilt, or to be)
    _store_lost: bool
    _deposed: bool
    _abdicated: bool  # `_abdicate` rebuilt the store: once deposed, it is rebuilt once
    _rebuilt_for: BaseException | None  # the error the last rebuild answered
    _now_ns: Callable[[], int]

    def _deliver(self) -> None:
        raise NotImplementedError

    def _remember(self, entry: LogEntry) -> None:
        if entry.request_id:
            self.applied[entry.request_id] = entry.index
            if len(self.applied) > APPLIED_REQUESTS_KEPT:
                self.applied.popitem(last=False)

    def _commit(
        self,
        changes: Sequence[StateChange],
        fence: Fence | None = None,
        request_id: str = "",
        on_durable: Callable[[int], None] | None = None,
        trace: dict[str, str] | None = None,
        *,
        staged: bool = False,
    ) -> int | None:
        """Make changes durable, then apply them. None if the fence's token is stale.
        on_durable(index) runs between the two (to answer before the local apply). While a
        batch is staged, unfenced changes are staged; with on_durable only if `staged`
        (the caller's answer may go out before the batch is durable), which then runs
        once they are staged."""
        if not changes:
            return self.store.latest_index()
        if self._staged is not None:
            if fence is None and (on_durable is None or staged):
                index = self._stage(changes, request_id, trace)
                if on_durable is not None:
                    on_durable(index)
                return index
            self._flush_staged()  # a fenced commit expects the durable log's index
        expected = self.store.latest_index()
        entries = self._entries(changes, request_id, trace)
        fences = [fence] + [None] * (len(entries) - 1)
        try:
            outcome = self.durable.commit(expected, entries, fences)
        except NotLeaderError:
            self._deposed = True
            raise
        except BaseException:
            # Durable or not is unknown: nothing more is decided on this store until it
            # is rebuilt from the log (the leader's own scheduling reads it directly).
            self._lose_store()
            raise
        if outcome.ok:
            self.stats.commits += 1
            try:
                if on_durable is not None:
                    on_durable(outcome.index)
            finally:  # durable: the store follows even if answering failed
                self._apply_durable(entries)
            self._deliver()
            return outcome.index
        if outcome.reason.startswith("token:"):
            return None
        # The log moved under us (it should not while we hold the term). The changes were
        # decided on a store that lacks what was appended, so they are not retried as they
        # are: the store catches up and the caller decides again (`_redecided`). What was
        # committed meanwhile is remembered too, so that its requests are answered, not
        # applied again, if they come here.
        if outcome.index < expected:
            # The store holds entries the log does not (a bug let staged entries go
            # unflushed): nothing decided on it can be trusted, so it is rebuilt.
            self._lose_store()
            raise StagedCommitLost(f"the store was at {expected}, the log at {outcome.index}")
        self.stats.log_moved += 1
        self._apply_durable(self.durable.entries_after(self.store.latest_index()))
        raise LogMoved(f"the log was at {outcome.index}, not {expected}")

    def _apply_durable(self, entries: Iterable[LogEntry]) -> None:
        """Entries known to be in the log: applied, their requests remembered, and the
        broker handed them."""
        for entry in entries:
            self.store.apply(entry)
            self._remember(entry)
            self._feed(entry)
        self.stats.index = self.store.latest_index()

    def after_flush(self, settle: Callable[[], object]) -> None:
        """Run `settle` once what is staged is durable (now, if nothing is): the broker must
        not hear that an eval is done (acked, or nacked for a worker to take) before its
        plans are in the log, or it hands the job's next eval to a worker whose replica lacks
        them. Dropped if the flush fails: the broker is then rebuilt from the log."""
        if self._staged is None:
            settle()
        else:
            self._after_flush.append(settle)

    def _redecided(self, decide_and_commit: Callable[[], T]) -> T:
        """Run a decision and its commit; if the log moved under the commit, decide again on
        the caught-up store (a plan is checked again against the nodes as they now are)."""
        for _ in range(COMMIT_ATTEMPTS):
            try:
                return decide_and_commit()
            except LogMoved:
                continue
        raise RuntimeError(f"the log moved under {COMMIT_ATTEMPTS} commits in a row")

    # -- staged commits (a batch's unfenced requests) ------------------------------------------

    def _stage(
        self, changes: Sequence[StateChange], request_id: str, trace: dict[str, str] | None
    ) -> int:
        """Apply `changes` now, durable at the batch's flush. Only unfenced changes are
        staged: nothing but a lost term (or a moved log, which a leader holding its term
        never sees) can refuse them, and either way the store is rebuilt from the log."""
        assert self._staged is not None
        for entry in self._entries(changes, request_id, trace):
            self.store.apply(entry)
            self._remember(entry)
            self._staged.append(entry)
        return self.store.latest_index()

    def _entries(
        self, changes: Sequence[StateChange], request_id: str, trace: dict[str, str] | None
    ) -> list[LogEntry]:
        """`changes` as the log entries after the store's latest index: records stamped
        once here (no follower copies them again), the request id on the last one, the
        commit time on all (a staged entry's is when it was decided: durable within its
        batch)."""
        expected = self.store.latest_index()
        now_ns = time.time_ns()
        return [
            LogEntry(
                expected + i + 1,
                self.stats.term,
                self.store.stamped(change, expected + i + 1),
                request_id if i == len(changes) - 1 else "",
                trace=trace or {},
                committed_ns=now_ns,
            )
            for i, change in enumerate(changes)
        ]

    def _flush_staged(self, answers: BatchAnswers | None = None) -> None:
        """Make what is staged durable; `answers` go out with that commit (and are marked
        sent), unless nothing was staged: then they are the caller's to send."""
        staged = self._staged
        settlements, self._after_flush = self._after_flush, []
        if not staged:
            for settle in settlements:
                settle()
            return
        self._staged = []
        fed_through, self._fed_through = self._fed_through, 0
        outbox = answers.outbox() if answers is not None else None
        try:
            outcome = self.durable.commit(
                staged[0].index - 1, staged, [None] * len(staged), outbox=outbox
            )
        except NotLeaderError:
            self._deposed = True  # the loop stops; nothing more is decided on this store
            raise
        except BaseException:
            # Redis unreachable, or the answer lost: the entries may or may not be durable.
            # The store is ahead of what is known to be, so it is rebuilt from the log.
            self._lose_store()
            raise
        if not outcome.ok:
            # The log moved under the staged entries: rebuild the store from the log and let
            # the consumer retry the batch's messages one by one (each request id is applied
            # at most once, and a plan already committed is answered, not applied again).
            self._lose_store()
            raise StagedCommitLost(
                f"{len(staged)} staged entries at {staged[0].index}: {outcome.reason}"
            )
        self.stats.index = outcome.index
        self.stats.commits += 1
        if answers is not None:
            answers.sent = True
        for settle in settlements:  # durable now: deliveries may be settled...
            settle()
        for entry in staged:  # ...and the broker may act on the entries
            if entry.index > fed_through:
                self._feed(entry)
        self._deliver()

    def _feed_early(self) -> None:
        """Feed the broker what is staged now, before it is durable (it holds what they
        make: `_schedule_staged`); the flush then feeds only what was staged after."""
        assert self._staged is not None
        for entry in self._staged:
            if entry.index > self._fed_through:
                self._feed(entry)
        if self._staged:
            self._fed_through = max(self._fed_through, self._staged[-1].index)

    def _feed(self, entry: LogEntry) -> None:
        if self.broker is not None:
            self.broker.on_commit(entry, self.store)

    def _lose_store(self) -> None:
        """Rebuild the store from the log now if Redis answers, else before the next turn
        (the broker is emptied meanwhile: what it tracks may come from entries the log
        lacks, and nothing of it may go out before the rebuild restores it). A deposed leader
        abdicates instead."""
        self._store_lost = True
        self._rebuilds += 1
        # The error being handled, if any, is the one this rebuild answers: the loop does
        # not rebuild again for it (a second reset would resend what the first delivered).
        self._rebuilt_for = sys.exception()
        if self._deposed:
            self._abdicate()
            return
        try:
            self._reload()
        except redis.RedisError:
            log.warning("rebuilding the leader's store from the log failed; retrying")
            if self.broker is not None:
                self.broker.reset()

    def _abdicate(self) -> None:
        """A newer leader took the term: this one decides nothing more. Its hosted broker is
        emptied and its unsent eval writes dropped (it must not deliver or write what the
        newer leader owns), and its store is rebuilt from the log without the broker (it
        may hold staged entries that were never committed, and the actor still serves
        reads from it until it is stopped)."""
        if self.broker is not None:
            self.broker.abandon()
        if self._abdicated:
            return
        try:
            self._reload(restore_broker=False)
        except Exception:  # Redis away, or the newer leader trimmed the log meanwhile
            log.warning("a deposed leader could not rebuild its store from the log", exc_info=True)
            return
        self._abdicated = True

    def _reload(self, restore_broker: bool = True) -> None:
        """A fresh store (and core over it) from the latest snapshot and the log after it,
        swapped in only once complete (the actor's reads take snapshots of `store` from
        other threads); the broker then tracks again what is pending or blocked in it."""
        store = StateStore()
        applied: OrderedDict[str, int] = OrderedDict()
        header = load_latest(self.snapshots, store, decode_entry)
        if header is not None:
            applied.update(header.requests)
        self.snapshot_writer.loaded(store.latest_index(), self.durable.appended_bytes)
        capacity: list[LogEntry] = []  # for the broker's missed unblocks
        for entry in self.durable.entries_after(store.latest_index()):
            store.apply(entry)
            if isinstance(entry.change, UpsertNodes | UpdateAllocsClientStatus):
                capacity.append(entry)
            if entry.request_id:
                applied[entry.request_id] = entry.index
                if len(applied) > APPLIED_REQUESTS_KEPT:
                    applied.popitem(last=False)
        broker = self.broker
        if broker is not None and restore_broker:  # what is pending or blocked (restoreEvals)
            broker.reset()
            broker.restore(store, capacity)
        self.store, self.applied = store, applied
        self.core = LeaderCore(store, now_ns=self._now_ns, new_id=new_uuid)
        self.core.rebuild_deadlines()
        self.stats.index = store.latest_index()
        self._store_lost = False
