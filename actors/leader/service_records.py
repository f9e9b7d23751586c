"""The leader service's records: its counters, the feed it hands committed entries to (the
eval broker it hosts), a batch's answers, and the error of a staged commit the log refused."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from actors.leader.durable_log import Outbox
from actors.state import StateReader
from actors.streams.bus import encoded
from contracts.copying import replacer
from contracts.messages import LeaderResponse
from contracts.state_log import LogEntry


@dataclass
class LeaderStats:
    term: int = 0
    index: int = 0
    plans: int = 0
    partial_plans: int = 0
    rejected_nodes: int = 0
    stale_plans: int = 0
    requests: int = 0
    placed: int = 0  # new allocations committed by plans
    commits: int = 0  # durable commits (a batch's staged requests share one)
    held_plans: int = 0  # plans held back by `hold_plans` (a test failpoint)
    local_evals: int = 0  # evals this leader scheduled itself (local_scheduling.py)
    loop_errors: int = 0  # turns that failed on an unexpected error (store rebuilt)
    log_moved: int = 0  # commits refused for a log that had moved (decided again)


class CommitFeed(Protocol):
    """What the leader hands every entry once it is durable and applied to its store (or
    staged, under `hold`): the eval broker it hosts (actors/broker/service.py)."""

    def reset(self) -> None: ...

    def abandon(self) -> None: ...

    def restore(self, state: StateReader, tail: Sequence[LogEntry] = ()) -> None:
        """Track the evals pending or blocked in a store the leader rebuilt (`tail`: the
        entries replayed after its snapshot that made capacity)."""
        ...

    def on_commit(self, entry: LogEntry, state: StateReader) -> None: ...

    def complete(self, eval_id: str, token: str) -> bool:
        """The delivery's eval was completed by its plan's commit: acked here, so that the
        worker need not; False if that delivery is no longer outstanding."""
        ...

    def deliver(self) -> int:
        """After commits: deliver what they made ready (or made room for) at once."""
        ...

    def hold(self) -> None:
        """Entries fed until `release` are staged, not durable: what they make ready may be
        taken by the leader itself, nothing goes out to the workers."""
        ...

    def release(self, durable: bool) -> None:
        """The held entries are durable (what they made goes out), or were lost (dropped)."""
        ...


class StagedCommitLost(RuntimeError):
    """Staged entries could not be made durable; the store was rebuilt from the log."""


_with_visible_index = replacer(LeaderResponse, "visible_index")


def visible_at(answer: tuple[str, str, object], index: int) -> tuple[str, str, object]:
    """An answer to publish, saying what the leader had committed when it answered."""
    stream, kind, response = answer
    assert isinstance(response, LeaderResponse)
    return stream, kind, _with_visible_index(response, index)


@dataclass
class BatchAnswers:
    """A batch's answers (reply stream, type name, response) and its messages to ack: they
    leave with the batch's commit (`outbox`) or, when the batch committed nothing, on their
    own (`sent` stays False)."""

    answers: list[tuple[str, str, object]]
    acks: tuple[str, str, Sequence[str]]  # (stream, group, message ids)
    maxlen: int  # each reply stream's approximate cap
    sent: bool = False

    def seen_at(self, index: int) -> None:
        """The answers say that the leader had committed up to `index` when it answered."""
        self.answers = [visible_at(answer, index) for answer in self.answers]

    def outbox(self) -> Outbox:
        """Encoded for the commit's script as `StreamBus.publish_each` would write them."""
        stream, group, ids = self.acks
        return Outbox(encoded(self.answers), self.maxlen, stream, group, ids)
