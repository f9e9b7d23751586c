"""Stream operations on one Redis client: publish, consumer groups, reads, claims, dead letters.

Pitfalls handled here (ecosystem notes 2.1-2.5):
- A restarted consumer resumes its own pending entries: its first `read_group` re-reads its
  PEL (XREADGROUP with an explicit id) before asking for new entries with `>`.
- NOGROUP (group gone after FLUSHALL, a restart without AOF, XGROUP DESTROY) recreates the group
  from the start of the stream and logs loudly, instead of failing every poll.
- Entries trimmed or deleted while pending come back without fields (XREADGROUP history) or as
  `(None, None)` (XAUTOCLAIM on 6.2; Redis 7 lists them in a third reply element instead). They
  are acked and reported, never handed on and never a crash.
- Replies are accepted in both RESP2 and RESP3 shapes.

Thread-safety: a StreamBus may be shared by threads, like its client; the per-consumer resume
cursors are guarded by a lock. No method retries: Redis connection errors propagate, and the
caller retries what is idempotent (XREADGROUP `>` and XADD without an id are not).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

import redis
from redis.typing import EncodableT, FieldT

from actors.streams.envelope import encode_message, message_type
from actors.streams.names import StreamNames
from contracts.messages import DeadLetter
from observability import inject

log = logging.getLogger(__name__)

Fields = dict[bytes, bytes]


class Entry(NamedTuple):
    """A stream entry. `deliveries` is the group's delivery counter after this read (1 for a
    first delivery), 0 for reads without a group."""

    id: str
    fields: Fields
    deliveries: int = 0


@dataclass(frozen=True, slots=True)
class ClaimResult:
    """Entries moved to the claiming consumer, and ids of pending entries that no longer
    exist in the stream (trimmed or deleted), which were acked."""

    entries: list[Entry]
    trimmed: list[str]


@dataclass(frozen=True, slots=True)
class ConsumerInfo:
    pending: int
    idle_ms: int


@dataclass(frozen=True, slots=True)
class PendingSummary:
    """A consumer group's backlog. `undelivered` counts entries after the last delivered id
    (the server's `lag` on Redis >= 7; counted, and capped at the limit given, on 6.2)."""

    stream: str
    group: str
    pending: int
    undelivered: int
    last_delivered_id: str
    consumers: dict[str, ConsumerInfo]


class StreamBus:
    """Batched stream operations. The client must return bytes (`connect()` does)."""

    def __init__(
        self,
        client: redis.Redis,
        names: StreamNames | None = None,
        *,
        dead_letter_maxlen: int | None = 100_000,
    ) -> None:
        if client.get_encoder().decode_responses:
            raise ValueError("StreamBus needs a client with decode_responses=False")
        self.client = client
        self.names = names or StreamNames()
        self.dead_letter_maxlen = dead_letter_maxlen
        # (stream, group, consumer) -> PEL cursor while re-reading own pending entries,
        # None once caught up; a missing key means "not read yet", i.e. start at "0".
        self._cursors: dict[tuple[str, str, str], str | None] = {}
        self._lock = threading.Lock()

    # -- writing ------------------------------------------------------------------------------

    def publish(
        self,
        stream: str,
        messages: Sequence[tuple[str, object]],
        trace: Mapping[str, str] | None = None,
        maxlen: int | None = None,
    ) -> list[str]:
        """XADD every (type name, message) in one pipeline (no MULTI); returns the entry ids.
        `maxlen` trims approximately (`MAXLEN ~`), so the stream may overshoot it a little.
        Without `trace`, the messages carry the context of the span current on this thread
        (none when tracing is off), so every message sent inside a traced operation is part
        of its trace."""
        return self._xadd_each([(stream, t, m) for t, m in messages], trace, maxlen)

    def publish_each(
        self,
        messages: Sequence[tuple[str, str, object]],
        maxlen: int | None = None,
        *,
        ack: tuple[str, str, Sequence[str]] | None = None,
    ) -> list[str]:
        """XADD each (stream, type name, message), to streams of their own, in one pipeline
        (answers to many requesters); carries the current span's context like `publish`.
        With `ack` (stream, group, entry ids), the pipeline also XACKs the entries that were
        answered: one round trip for both."""
        return self._xadd_each(messages, None, maxlen, ack)

    def _xadd_each(
        self,
        messages: Sequence[tuple[str, str, object]],
        trace: Mapping[str, str] | None,
        maxlen: int | None,
        ack: tuple[str, str, Sequence[str]] | None = None,
    ) -> list[str]:
        acked = ack is not None and bool(ack[2])
        if not messages:
            if acked:
                assert ack is not None
                self.ack(*ack)
            return []
        entries = encoded(messages, trace)
        if not acked:
            written: list[str] = []
            for reply in self.xadd_fields(entries, maxlen):
                if isinstance(reply, Exception):
                    raise reply  # the first refusal, as the pipeline raised it
                written.append(reply)
            return written
        assert ack is not None
        pipe = self.client.pipeline(transaction=False)
        for stream, fields in entries:
            pipe.xadd(stream, _wire(fields), maxlen=maxlen, approximate=True)
        pipe.xack(ack[0], ack[1], *ack[2])
        # The entries are acked whatever becomes of their answers (the XACK runs even if an
        # XADD before it fails): an answer that cannot be written (a reply stream that is
        # not a stream) is logged and left out, not raised; retrying cannot deliver it.
        replies = pipe.execute(raise_on_error=False)
        if isinstance(replies[-1], Exception):
            raise replies[-1]
        ids = []
        for (stream, _type, _message), reply in zip(messages, replies, strict=False):
            if isinstance(reply, Exception):
                log.error("an answer to %s could not be written: %s", stream, reply)
            else:
                ids.append(as_text(reply))
        return ids

    def xadd_fields(
        self, entries: Sequence[tuple[str, Fields]], maxlen: int | None = None
    ) -> list[str | Exception]:
        """XADD entries already encoded (`encoded`), in one pipeline: each one's id, or the
        error Redis answered it with. A connection error, or any error of a lone entry,
        is raised (nothing of the batch is known to be written)."""
        if len(entries) == 1:  # a pipeline of one costs ~20 us more CPU
            stream, fields = entries[0]
            xadd = self.client.xadd(stream, _wire(fields), maxlen=maxlen, approximate=True)
            return [as_text(xadd)]
        pipe = self.client.pipeline(transaction=False)
        for stream, fields in entries:
            pipe.xadd(stream, _wire(fields), maxlen=maxlen, approximate=True)
        replies = pipe.execute(raise_on_error=False)
        return [r if isinstance(r, Exception) else as_text(r) for r in replies]

    def dead_letter(
        self,
        stream: str,
        message_id: str,
        consumer: str,
        reason: str,
        fields: Mapping[bytes, bytes] | Mapping[str, str],
        *,
        group: str | None = None,
        trace: Mapping[str, str] | None = None,
    ) -> str:
        """Write a DeadLetter to the dead-letter stream; with `group`, XACK the original in
        the same MULTI so it is neither lost nor handled again. Returns the dead letter's id."""
        letter = DeadLetter(
            stream=stream,
            message_id=message_id,
            consumer=consumer,
            reason=reason,
            fields={as_text(k): as_text(v) for k, v in fields.items()},
        )
        log.warning("dead letter %s %s (consumer %s): %s", stream, message_id, consumer, reason)
        pipe = self.client.pipeline(transaction=True)
        pipe.xadd(
            self.names.dead_letter,
            _wire(encode_message(message_type(letter), letter, trace)),
            maxlen=self.dead_letter_maxlen,
            approximate=True,
        )
        if group is not None:
            pipe.xack(stream, group, message_id)
        return as_text(pipe.execute()[0])

    # -- consumer groups ----------------------------------------------------------------------

    def ensure_group(self, stream: str, group: str, start_id: str = "0") -> bool:
        """Create the group (and the stream, MKSTREAM); False if it already existed."""
        try:
            self.client.xgroup_create(stream, group, id=start_id, mkstream=True)
        except redis.ResponseError as exc:
            if str(exc).startswith("BUSYGROUP"):
                return False
            raise
        return True

    def read_group(
        self, stream: str, group: str, consumer: str, count: int, block_ms: int | None
    ) -> list[Entry]:
        """Up to `count` entries for `consumer`: first its own pending entries (once per
        StreamBus, or again after `rewind`), then new ones, blocking up to `block_ms`
        (None: do not block; 0: block forever)."""
        key = (stream, group, consumer)
        while True:
            with self._lock:
                cursor = self._cursors.get(key, "0")
            if cursor is None:
                break
            raw = self._xreadgroup(stream, group, consumer, cursor, count, None)
            with self._lock:
                if self._cursors.get(key, "0") == cursor:  # unless rewound meanwhile
                    self._cursors[key] = raw[-1].id if raw else None
            live = self._ack_missing(stream, group, raw)
            if live:
                return self._with_deliveries(stream, group, live)
        return [
            Entry(e.id, e.fields, 1)
            for e in self._xreadgroup(stream, group, consumer, ">", count, block_ms)
        ]

    def rewind(self, stream: str, group: str, consumer: str) -> None:
        """Make the next `read_group` of this consumer re-read its pending entries (retries)."""
        with self._lock:
            self._cursors[(stream, group, consumer)] = "0"

    def ack(self, stream: str, group: str, ids: Sequence[str]) -> int:
        if not ids:
            return 0
        return int(self.client.xack(stream, group, *ids))

    def claim_stale(
        self, stream: str, group: str, consumer: str, min_idle_ms: int, count: int
    ) -> ClaimResult:
        """XAUTOCLAIM up to `count` entries idle for `min_idle_ms` (a dead consumer's) to
        `consumer`, scanning the whole PEL. Trimmed entries are acked and reported."""
        entries: list[Entry] = []
        trimmed: list[str] = []
        cursor = "0-0"
        while len(entries) < count:
            want = count - len(entries)
            reply = self.client.xautoclaim(
                stream, group, consumer, min_idle_ms, start_id=cursor, count=want
            )
            next_cursor, live, deleted, missing = parse_autoclaim(reply)
            trimmed.extend(deleted)
            if missing:
                trimmed.extend(
                    self._find_deleted(stream, group, consumer, cursor, next_cursor, live, want)
                )
            entries.extend(live)
            cursor = next_cursor
            if cursor == "0-0":
                break
        if trimmed:
            self.ack(stream, group, trimmed)
            log.warning(
                "%s/%s: acked %d pending entries that were trimmed from the stream: %s",
                stream,
                group,
                len(trimmed),
                ", ".join(trimmed[:10]),
            )
        return ClaimResult(self._with_deliveries(stream, group, entries), trimmed)

    # -- reading without a group ----------------------------------------------------------------

    def tail(
        self, stream: str, after_id: str, count: int, block_ms: int | None = None
    ) -> list[Entry]:
        """XREAD: entries after `after_id` ("0" for all, "$" for new only), for log replicas."""
        reply = self.client.xread({stream: after_id}, count=count, block=block_ms)
        return _entries(reply)

    def range(
        self, stream: str, start: str = "-", end: str = "+", count: int | None = None
    ) -> list[Entry]:
        """XRANGE, inclusive; prefix an id with "(" for an exclusive bound."""
        return [_entry(item) for item in self.client.xrange(stream, start, end, count=count) or ()]

    def pending_summary(
        self, stream: str, group: str, *, undelivered_limit: int = 1000
    ) -> PendingSummary | None:
        """The group's backlog, or None if the stream or group does not exist."""
        try:
            groups = self.client.xinfo_groups(stream)
            info = next((g for g in groups if as_text(g["name"]) == group), None)
            if info is None:
                return None
            consumers = self.client.xinfo_consumers(stream, group)
        except redis.ResponseError as exc:
            if "no such key" in str(exc).lower() or str(exc).startswith("NOGROUP"):
                return None
            raise
        last = as_text(info["last-delivered-id"])
        lag = info.get("lag")
        if lag is None:
            after = self.client.xrange(stream, f"({last}", "+", count=undelivered_limit)
            lag = len(after or ())
        return PendingSummary(
            stream=stream,
            group=group,
            pending=int(info["pending"]),
            undelivered=int(lag),
            last_delivered_id=last,
            consumers={
                as_text(c["name"]): ConsumerInfo(int(c["pending"]), int(c["idle"]))
                for c in consumers
            },
        )

    # -- helpers ------------------------------------------------------------------------------

    def _xreadgroup(
        self,
        stream: str,
        group: str,
        consumer: str,
        start: str,
        count: int,
        block_ms: int | None,
    ) -> list[Entry]:
        try:
            reply = self.client.xreadgroup(
                group, consumer, {stream: start}, count=count, block=block_ms
            )
        except redis.ResponseError as exc:
            if not str(exc).startswith("NOGROUP"):
                raise
            log.error(
                "consumer group %r of stream %r is gone (FLUSHALL? restart without AOF? "
                "XGROUP DESTROY?); recreating it from the start of the stream",
                group,
                stream,
            )
            self.ensure_group(stream, group, "0")
            reply = self.client.xreadgroup(
                group, consumer, {stream: start}, count=count, block=block_ms
            )
        return _entries(reply)

    def _ack_missing(self, stream: str, group: str, entries: list[Entry]) -> list[Entry]:
        """Ack PEL entries whose stream entry is gone (they come back without fields)."""
        gone = [e.id for e in entries if not e.fields]
        if gone:
            self.ack(stream, group, gone)
            log.warning(
                "%s/%s: acked %d pending entries trimmed from the stream: %s",
                stream,
                group,
                len(gone),
                ", ".join(gone[:10]),
            )
        return [e for e in entries if e.fields]

    def _with_deliveries(self, stream: str, group: str, entries: list[Entry]) -> list[Entry]:
        """Fill in the delivery counters of redelivered entries (one pipelined XPENDING each)."""
        if not entries:
            return entries
        pipe = self.client.pipeline(transaction=False)
        for e in entries:
            pipe.xpending_range(stream, group, min=e.id, max=e.id, count=1)
        counts: dict[str, int] = {}
        for rows in pipe.execute():
            for row in rows:
                counts[as_text(row["message_id"])] = int(row["times_delivered"])
        return [Entry(e.id, e.fields, max(1, counts.get(e.id, 1))) for e in entries]

    def _find_deleted(
        self,
        stream: str,
        group: str,
        consumer: str,
        start: str,
        next_cursor: str,
        live: list[Entry],
        want: int,
    ) -> list[str]:
        """Ids behind Redis 6.2's `(None, None)` XAUTOCLAIM items: the claimed ones are now
        pending for `consumer` in [start, next_cursor); those absent from the stream."""
        end = "+" if next_cursor == "0-0" else f"({next_cursor}"
        # XAUTOCLAIM scans at most 10 x COUNT PEL entries, which bounds this consumer's share.
        rows = self.client.xpending_range(
            stream, group, min=start, max=end, count=10 * want + 10, consumername=consumer
        )
        known = {e.id for e in live}
        candidates = [as_text(r["message_id"]) for r in rows]
        candidates = [i for i in candidates if i not in known]
        if not candidates:
            return []
        pipe = self.client.pipeline(transaction=False)
        for entry_id in candidates:
            pipe.xrange(stream, entry_id, entry_id, count=1)
        return [i for i, found in zip(candidates, pipe.execute(), strict=True) if not found]


def encoded(
    messages: Sequence[tuple[str, str, object]], trace: Mapping[str, str] | None = None
) -> list[tuple[str, Fields]]:
    """Each (stream, type name, message) as (stream, entry fields), carrying `trace` or else
    the context of the span current on this thread: what `publish` writes (the leader's
    commit script writes a batch's answers from it too)."""
    if trace is None:
        trace = inject()
    return [
        (stream, encode_message(type_name, message, trace))
        for stream, type_name, message in messages
    ]


def _wire(fields: Fields) -> dict[FieldT, EncodableT]:
    return cast(dict[FieldT, EncodableT], fields)  # dict is invariant; bytes are both


def parse_autoclaim(reply: Any) -> tuple[str, list[Entry], list[str], int]:
    """Split an XAUTOCLAIM reply into (next cursor, live entries, ids known to be deleted,
    number of deleted entries whose id the server did not say). Redis 6.2 puts a nil (redis-py:
    `(None, None)`) where a claimed entry was deleted; Redis >= 7 drops such entries from the
    PEL and lists their ids in a third element."""
    live: list[Entry] = []
    deleted: list[str] = []
    missing = 0
    for item in reply[1] or ():
        entry_id, fields = item if item is not None else (None, None)
        if entry_id is None:
            missing += 1
        elif fields:
            live.append(Entry(as_text(entry_id), dict(fields)))
        else:
            deleted.append(as_text(entry_id))
    if len(reply) > 2:
        deleted.extend(as_text(i) for i in reply[2] or ())
    return as_text(reply[0]), live, deleted, missing


def as_text(value: Any) -> str:
    """A reply's bytes (or anything) as text, never raising on bad UTF-8."""
    if isinstance(value, bytes):
        return value.decode(errors="backslashreplace")
    return str(value)


def _entry(item: Any) -> Entry:
    entry_id, fields = item
    return Entry(as_text(entry_id), dict(fields) if fields else {})


def _entries(reply: Any) -> list[Entry]:
    """Entries of a one-stream XREAD/XREADGROUP reply, RESP2 (`[[name, entries]]`) or RESP3
    (`{name: [entries]}`) shaped; a timeout gives `[]`, `{}` or None."""
    if not reply:
        return []
    if isinstance(reply, dict):
        (items,) = reply.values()
        if items and isinstance(items[0], list):
            items = items[0]
    else:
        ((_, items),) = reply
    return [_entry(item) for item in items or ()]
