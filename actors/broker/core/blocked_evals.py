"""Nomad's blocked-eval tracker (`nomad/blocked_evals.go`) as a pure core.

An eval that could not place everything is blocked until capacity that could help appears.
At most one blocked eval per job is kept: the newer by max(CreateIndex, SnapshotIndex);
the loser becomes a duplicate for the leader to cancel. Evals are *captured* (their
constraints are expressible by computed node class, so `class_eligibility` says which
classes can help) or *escaped* (any capacity change may help). System evals with a
node_id are also indexed by node for `unblock_node`.

Methods return the evals to enqueue as `Unblocked(eval, token)` pairs, ready for
`EvalBroker.enqueue_all`. Each eval is a NEW record with status pending; the tracker
keeps no state about it afterwards. What the caller must persist: Nomad leaves an
unblocked eval `blocked` in the state store and only enqueues it; here the caller should
write the pending record first and enqueue the stored version (so the broker's
`wait_index` covers its new ModifyIndex, and a new leader restoring evals enqueues it
rather than blocking it again). Duplicates (`take_duplicates`) are written as canceled
with `duplicate_blocked_description(job_id)`. Nothing here writes state.

Costs: block, untrack and unblock_node are O(1) plus what they release. `unblock(class)`
visits captured evals grouped by their set of ineligible classes, so evals that ruled the
class out are skipped a group at a time instead of one by one (Nomad scans them all).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple, TypeVar

from actors.broker.core.eval_broker import JobKey, job_key
from contracts.evaluation import EvalStatus, Evaluation, TriggeredBy
from contracts.job import JobType

K = TypeVar("K")


def duplicate_blocked_description(job_id: str) -> str:
    """StatusDescription for a canceled duplicate blocked eval (Nomad's text)."""
    return f'existing blocked evaluation exists for job "{job_id}"'


class Unblocked(NamedTuple):
    """An eval to enqueue, with the token of the delivery that reblocked it ("" if none)."""

    eval: Evaluation
    token: str


class BlockOutcome(StrEnum):
    BLOCKED = "blocked"  # tracked until an unblock
    DUPLICATE = "duplicate"  # the job's tracked blocked eval is newer: this one awaits cancel
    UNBLOCKED = "unblocked"  # it missed an unblock while being scheduled: enqueue it now


@dataclass(frozen=True, slots=True)
class BlockResult:
    outcome: BlockOutcome
    enqueue: Unblocked | None = None  # set when outcome is UNBLOCKED


@dataclass(frozen=True, slots=True)
class BlockedStats:
    total_blocked: int = 0  # captured + escaped
    total_escaped: int = 0
    total_captured: int = 0
    total_by_node: int = 0  # system evals indexed by node (also counted above)
    total_duplicates: int = 0  # awaiting `take_duplicates`


class _Blocked:
    __slots__ = ("eval", "ineligible", "token")

    def __init__(self, evaluation: Evaluation, token: str) -> None:
        self.eval = evaluation
        self.token = token
        # None marks an escaped eval; otherwise the classes it explicitly ruled out.
        self.ineligible: frozenset[str] | None = (
            None
            if evaluation.escaped_computed_class
            else frozenset(c for c, ok in evaluation.class_eligibility.items() if not ok)
        )

    @property
    def node_id(self) -> str:
        """The node a system eval waits on ("" when not node-indexed)."""
        is_system = self.eval.type == JobType.SYSTEM
        return self.eval.node_id if is_system else ""


def _latest_index(evaluation: Evaluation) -> int:
    return max(evaluation.create_index, evaluation.snapshot_index)


class BlockedEvals:
    """Blocked evals by job, computed class and node, released by capacity changes."""

    def __init__(self) -> None:
        self.flush()

    def flush(self) -> None:
        """Drop all state (leadership lost)."""
        self._by_id: dict[str, _Blocked] = {}
        self._jobs: dict[JobKey, str] = {}
        self._escaped: dict[str, _Blocked] = {}
        self._captured: dict[frozenset[str], dict[str, _Blocked]] = {}
        self._by_node: dict[str, dict[str, _Blocked]] = {}
        self._max_plans: dict[str, _Blocked] = {}
        self._class_unblocks: dict[str, int] = {}  # computed class -> last unblock index
        self._node_unblocks: dict[str, int] = {}  # node id -> last unblock_node index
        self._duplicates: deque[Evaluation] = deque()

    # ------------------------------------------------------------------ block

    def block(self, evaluation: Evaluation, token: str = "") -> BlockResult:
        """Track a blocked eval, keep only the newest per job, or release it at once.

        `token` is the outstanding delivery's token when a worker reblocks the eval it
        is processing (Nomad's `Reblock`); it travels with the eval to `enqueue_all`.
        """
        existing_id = self._jobs.get(job_key(evaluation))
        if existing_id is not None:
            existing = self._by_id[existing_id]
            if existing_id == evaluation.id:
                self._remove(existing)  # the same eval again: replace, nothing to cancel
            elif _latest_index(existing.eval) <= _latest_index(evaluation):
                self._remove(existing)
                self._duplicates.append(existing.eval)
            else:
                self._duplicates.append(evaluation)
                return BlockResult(BlockOutcome.DUPLICATE)
        if self._missed_unblock(evaluation):
            return BlockResult(BlockOutcome.UNBLOCKED, Unblocked(_pending(evaluation), token))
        self._add(_Blocked(evaluation, token))
        return BlockResult(BlockOutcome.BLOCKED)

    def reblock(self, evaluation: Evaluation, token: str) -> BlockResult:
        """`block` for an eval whose delivery (`token`) is still outstanding."""
        return self.block(evaluation, token)

    def _missed_unblock(self, evaluation: Evaluation) -> bool:
        """Was capacity that could help freed after the scheduler's snapshot?

        The scheduler ran against a snapshot at SnapshotIndex; an unblock at a later
        index happened while the eval was in flight and would otherwise be lost.
        A class the eval never saw counts: the scheduler could not rule it out.
        """
        snapshot = evaluation.snapshot_index
        node_id = evaluation.node_id if evaluation.type == JobType.SYSTEM else ""
        if node_id and self._node_unblocks.get(node_id, -1) > snapshot:
            return True
        if evaluation.escaped_computed_class:
            return max(self._class_unblocks.values(), default=0) > snapshot
        eligibility = evaluation.class_eligibility
        return any(
            index > snapshot and eligibility.get(cls, True)
            for cls, index in self._class_unblocks.items()
        )

    # ------------------------------------------------------------------ unblock

    def unblock(self, computed_class: str, index: int) -> list[Unblocked]:
        """Capacity freed on nodes of `computed_class` at raft `index`.

        Releases every escaped eval, and every captured eval that did not explicitly
        mark the class ineligible (an unseen class unblocks too).
        """
        # The newest index wins (a restored broker notes capacity out of index order).
        self._class_unblocks[computed_class] = max(
            self._class_unblocks.get(computed_class, 0), index
        )
        out: list[Unblocked] = []
        if computed_class:
            out.extend(self._release(b) for b in list(self._escaped.values()))
        for ineligible, group in list(self._captured.items()):
            if computed_class not in ineligible:
                out.extend(self._release(b) for b in list(group.values()))
        return out

    def unblock_node(self, node_id: str, index: int) -> list[Unblocked]:
        """Capacity changed on one node: release the system evals waiting on it."""
        if not node_id:
            return []
        self._node_unblocks[node_id] = max(self._node_unblocks.get(node_id, 0), index)
        return [self._release(b) for b in list(self._by_node.get(node_id, {}).values())]

    def unblock_failed(self) -> list[Unblocked]:
        """Release evals blocked after the scheduler hit its plan-attempt limit.

        The leader calls this every minute (Nomad's `failedEvalUnblockInterval`).
        """
        return [self._release(b) for b in list(self._max_plans.values())]

    def untrack(self, namespace: str, job_id: str) -> Evaluation | None:
        """Forget the job's blocked eval: a later eval of the job completed without failures.

        Returns the dropped eval (its stored status is left to the caller, as in Nomad).
        """
        eval_id = self._jobs.get((namespace, job_id))
        if eval_id is None:
            return None
        blocked = self._by_id[eval_id]
        self._remove(blocked)
        return blocked.eval

    def prune_unblock_indexes(self, min_index: int) -> None:
        """Forget unblock indexes below `min_index` (Nomad prunes those older than 15 min)."""
        for table in (self._class_unblocks, self._node_unblocks):
            for key in [k for k, i in table.items() if i < min_index]:
                del table[key]

    # ------------------------------------------------------------------ queries

    def take_duplicates(self, max_n: int | None = None) -> list[Evaluation]:
        """Hand over superseded blocked evals, oldest first, for the leader to cancel."""
        count = len(self._duplicates) if max_n is None else min(max_n, len(self._duplicates))
        return [self._duplicates.popleft() for _ in range(count)]

    def get(self, namespace: str, job_id: str) -> Evaluation | None:
        """The job's tracked blocked eval, if any."""
        eval_id = self._jobs.get((namespace, job_id))
        return None if eval_id is None else self._by_id[eval_id].eval

    def __len__(self) -> int:
        return len(self._by_id)

    def stats(self) -> BlockedStats:
        return BlockedStats(
            total_blocked=len(self._by_id),
            total_escaped=len(self._escaped),
            total_captured=len(self._by_id) - len(self._escaped),
            total_by_node=sum(len(g) for g in self._by_node.values()),
            total_duplicates=len(self._duplicates),
        )

    # ------------------------------------------------------------------ indexes

    def _add(self, blocked: _Blocked) -> None:
        eval_id = blocked.eval.id
        self._by_id[eval_id] = blocked
        self._jobs[job_key(blocked.eval)] = eval_id
        if blocked.ineligible is None:
            self._escaped[eval_id] = blocked
        else:
            self._captured.setdefault(blocked.ineligible, {})[eval_id] = blocked
        if blocked.node_id:
            self._by_node.setdefault(blocked.node_id, {})[eval_id] = blocked
        if blocked.eval.triggered_by == TriggeredBy.MAX_PLAN_ATTEMPTS:
            self._max_plans[eval_id] = blocked

    def _remove(self, blocked: _Blocked) -> None:
        eval_id = blocked.eval.id
        del self._by_id[eval_id]
        del self._jobs[job_key(blocked.eval)]
        if blocked.ineligible is None:
            del self._escaped[eval_id]
        else:
            _discard(self._captured, blocked.ineligible, eval_id)
        if blocked.node_id:
            _discard(self._by_node, blocked.node_id, eval_id)
        self._max_plans.pop(eval_id, None)

    def _release(self, blocked: _Blocked) -> Unblocked:
        self._remove(blocked)
        return Unblocked(_pending(blocked.eval), blocked.token)


def _discard(groups: dict[K, dict[str, _Blocked]], key: K, eval_id: str) -> None:
    group = groups[key]
    del group[eval_id]
    if not group:
        del groups[key]


def _pending(evaluation: Evaluation) -> Evaluation:
    return dataclasses.replace(evaluation, status=EvalStatus.PENDING)
