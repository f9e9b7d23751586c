"""The leader's durable, fenced state log in Redis (see commit.lua, which it wraps).

A commit succeeds only if the committer still holds the current term, its view of the last
index is right, and every fenced plan still carries its eval's outstanding delivery token;
then the entries are appended to the log stream with IDs equal to their indexes. A stale
leader therefore can never commit, and neither can a worker whose eval was redelivered.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import redis

from actors.streams.bus import as_text
from actors.streams.names import StreamNames
from contracts.state_log import LogEntry, decode_entry, encode_entry

log = logging.getLogger(__name__)

_SCRIPT = (Path(__file__).with_name("commit.lua")).read_text()


class LogGap(RuntimeError):
    """Entries a reader needs were trimmed from the log (they are in a snapshot)."""


class NotLeaderError(RuntimeError):
    """A newer leader holds the term: this one must stop writing."""


@dataclass(frozen=True, slots=True)
class Fence:
    """Commit only while `eval_id`'s outstanding delivery token is `token`."""

    eval_id: str
    token: str


@dataclass(frozen=True, slots=True)
class Outbox:
    """Answers that leave with a commit, and the requests they answer acked, in the commit's
    own script: one round trip for the turn, and no answer before its entries are durable.
    An answer that cannot be written (a reply stream that is not a stream) is logged and
    left out, as the ack would be: the commit stands and retrying cannot deliver it."""

    replies: Sequence[tuple[str, Mapping[bytes, bytes]]]  # (reply stream, encoded message)
    maxlen: int  # each reply stream's approximate cap
    ack_stream: str = ""
    ack_group: str = ""
    ack_ids: Sequence[str] = ()

    def keys(self) -> list[str]:
        return [stream for stream, _fields in self.replies] + [self.ack_stream]

    def args(self) -> list[bytes | str | int]:
        args: list[bytes | str | int] = [self.maxlen, len(self.replies)]
        for _stream, fields in self.replies:
            args.append(2 * len(fields))
            for name, value in fields.items():
                args += [name, value]
        args.append(self.ack_group if self.ack_ids else "")
        args += self.ack_ids
        return args


@dataclass(frozen=True, slots=True)
class CommitOutcome:
    ok: bool
    index: int
    reason: str = ""


class DurableLog:
    def __init__(self, client: redis.Redis, names: StreamNames) -> None:
        self.client = client
        self.names = names
        self._commit = client.register_script(_SCRIPT)
        self.term = 0
        self.appended_bytes = 0  # encoded entries committed by this process (snapshot pacing)

    def acquire_term(self) -> int:
        """Become leader: every commit of an older term fails from now on."""
        self.term = int(self.client.incr(self.names.term_key))
        return self.term

    def last_index(self) -> int:
        raw = self.client.get(self.names.index_key)
        return int(raw) if raw else 0

    def commit(
        self,
        expected_index: int,
        entries: Sequence[LogEntry],
        fences: Sequence[Fence | None],
        outbox: Outbox | None = None,
    ) -> CommitOutcome:
        """Append `entries` if the fences hold (commit.lua); with an `outbox`, its answers
        go out and its requests are acked in the same script, only if the commit succeeds."""
        args: list[bytes | str | int] = [self.term, expected_index, len(entries)]
        size = 0
        for entry, fence in zip(entries, fences, strict=True):
            raw = encode_entry(entry)
            size += len(raw)
            args += [raw, fence.eval_id if fence else "", fence.token if fence else ""]
        keys = [self.names.index_key, self.names.term_key, self.names.log, self.names.tokens_key]
        if outbox is not None:
            keys += outbox.keys()
            args += outbox.args()
        reply = self._commit(keys=keys, args=args)
        if int(reply[0]) == 1:
            self.appended_bytes += size
            for error in reply[2:]:
                log.error("committed at %s, but not written: %s", reply[1], as_text(error))
            return CommitOutcome(True, int(reply[1]))
        reason = as_text(reply[1])
        if reason == "term":
            raise NotLeaderError(f"term {self.term} is no longer current")
        return CommitOutcome(False, int(reply[2]), reason)

    def entries_after(self, index: int, batch: int = 1000) -> Iterator[LogEntry]:
        """Replay the log from `index` (exclusive), in order. Raises LogGap if the entry
        after `index` was trimmed (load the snapshot first)."""
        start = f"{index + 1}-0"
        expected = index + 1
        while True:
            rows = self.client.xrange(self.names.log, min=start, count=batch)
            if not rows:
                return
            for row_id, fields in rows:
                if fields is None:
                    raise LogGap(f"log entry {row_id!r} has no fields")
                entry = decode_entry(fields[b"e"])
                if entry.index != expected:
                    raise LogGap(f"the log has entry {entry.index} next, not {expected}")
                expected += 1
                yield entry
            last_id = rows[-1][0].decode() if isinstance(rows[-1][0], bytes) else rows[-1][0]
            start = f"({last_id}"
