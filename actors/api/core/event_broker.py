"""The event buffer and its subscribers (Nomad's nomad/stream event broker, bounded).

The buffer holds the events of the last `max_items` log indexes that made any (at most
`max_events` events between them; the newest index is always kept whole), published by the
replica's thread as it applies the log. A subscriber is a cursor: the last index it has read.
It reads at its own pace, and one that has not read an index before that index leaves the
buffer has fallen too far behind: its stream ends with an error line, as Nomad drops a
subscriber whose next item was dropped ("event dropped from buffer"), and it resubscribes
from the index it had reached. So a slow client costs the buffer nothing: the API never
holds more than the buffer for it, plus one batch (`batch_bytes`) being written.

At most `max_subscribers` streams at a time; past that a subscription is refused (429).
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import orjson

from actors.api.core.errors import ApiError
from actors.api.core.event_topics import EventFilter
from actors.api.core.events import Event
from actors.api.core.streaming import StreamBody

MAX_ITEMS = 1024
MAX_EVENTS = 10_000
MAX_SUBSCRIBERS = 64
HEARTBEAT_S = 10.0  # Nomad's
BATCH_BYTES = 1 << 20
BATCH_ITEMS = 256


@dataclass(frozen=True, slots=True)
class _Item:
    index: int
    events: tuple[Event, ...]


class EventBroker:
    def __init__(
        self,
        *,
        max_items: int = MAX_ITEMS,
        max_events: int = MAX_EVENTS,
        max_subscribers: int = MAX_SUBSCRIBERS,
        heartbeat_s: float = HEARTBEAT_S,
        batch_bytes: int = BATCH_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_items = max_items
        self.max_events = max_events
        self.max_subscribers = max_subscribers
        self.heartbeat_s = heartbeat_s
        self.batch_bytes = batch_bytes
        self.clock = clock
        self._lock = threading.Lock()
        self._items: list[_Item] = []
        self._indexes: list[int] = []
        self._events = 0
        self._dropped_through = 0  # the newest index dropped from the buffer
        self._epoch = 0  # bumped by reset(): every subscriber before it has lost events
        self.subscribers = 0
        self.refused = 0  # subscriptions refused for want of a free place
        self.dropped_subscribers = 0  # streams ended because they fell behind

    # -- the publishing side (the replica's thread) ------------------------------------------

    def publish(self, index: int, events: Sequence[Event]) -> None:
        if not events:
            return
        with self._lock:
            if self._indexes and index <= self._indexes[-1]:
                return  # already published (a replica never applies an index twice)
            self._items.append(_Item(index, tuple(events)))
            self._indexes.append(index)
            self._events += len(events)
            while len(self._items) > 1 and (
                len(self._items) > self.max_items or self._events > self.max_events
            ):
                self._drop_oldest()

    def _drop_oldest(self) -> None:
        item = self._items.pop(0)
        self._indexes.pop(0)
        self._events -= len(item.events)
        self._dropped_through = item.index

    def reset(self) -> None:
        """The replica reloaded a snapshot: what it skipped made no events, so every current
        subscriber has missed some; they end with an error and resubscribe."""
        with self._lock:
            if self._indexes:
                self._dropped_through = self._indexes[-1]
            self._items.clear()
            self._indexes.clear()
            self._events = 0
            self._epoch += 1

    def oldest_index(self) -> int:
        """The first index still held (0: none)."""
        with self._lock:
            return self._indexes[0] if self._indexes else 0

    # -- the subscribing side ------------------------------------------------------------------

    def subscribe(
        self, what: EventFilter, index: int = 0, allowed: Callable[[], bool] | None = None
    ) -> EventStream:
        """A stream of the events `what` matches from log index `index` on (0: from the
        oldest held); an index no longer held starts at the oldest held, as Nomad does.
        `allowed` is asked again at every heartbeat (a token revoked or stripped of the
        policy ends the stream). ApiError(429) when every place is taken."""
        with self._lock:
            if self.subscribers >= self.max_subscribers:
                self.refused += 1
                raise ApiError(
                    429,
                    f"too many event stream subscribers ({self.max_subscribers}); "
                    "retry in a moment",
                )
            self.subscribers += 1
            cursor = max(index - 1, self._dropped_through, 0)
            return EventStream(self, what, cursor, self._epoch, allowed)

    def _release(self) -> None:
        with self._lock:
            self.subscribers -= 1

    def _after(self, cursor: int, epoch: int) -> list[_Item] | str:
        """The items after `cursor` (at most BATCH_ITEMS), or why the subscriber is done."""
        with self._lock:
            if epoch != self._epoch:
                return (
                    "events were lost: the agent's state replica reloaded a snapshot; "
                    f"resubscribe with index={cursor + 1}"
                )
            if self._dropped_through > cursor:
                self.dropped_subscribers += 1
                return (
                    f"event dropped from buffer: this subscriber fell too far behind (read up "
                    f"to index {cursor}, the buffer now starts after {self._dropped_through}); "
                    f"resubscribe with index={cursor + 1}"
                )
            start = bisect.bisect_right(self._indexes, cursor)
            return self._items[start : start + BATCH_ITEMS]


HEARTBEAT = b"{}\n"


class EventStream(StreamBody):
    """One subscriber's stream: newline-delimited `{"Index": N, "Events": [...]}` objects,
    `{}` heartbeats, and a last `{"Error": "..."}` line when the broker drops it."""

    def __init__(
        self,
        broker: EventBroker,
        what: EventFilter,
        cursor: int,
        epoch: int,
        allowed: Callable[[], bool] | None,
    ) -> None:
        self.broker = broker
        self.what = what
        self.cursor = cursor  # the last index read (sent, or skipped by the filter)
        self.heartbeat_s = broker.heartbeat_s
        self._epoch = epoch
        self._allowed = allowed
        self._checked_at = broker.clock()
        self._ended = False
        self._closed = False

    def read(self) -> list[bytes] | None:
        if self._ended:
            return None
        if self._allowed is not None and (
            self.broker.clock() - self._checked_at >= self.heartbeat_s
        ):
            self._checked_at = self.broker.clock()
            if not self._allowed():
                return self._end("Permission denied: the token no longer allows this stream")
        items = self.broker._after(self.cursor, self._epoch)
        if isinstance(items, str):
            return self._end(items)
        lines: list[bytes] = []
        size = 0
        for item in items:
            self.cursor = item.index
            matched = [e.encoded() for e in item.events if self.what.matches(e)]
            if not matched:
                continue
            line = b'{"Index":%d,"Events":[%b]}\n' % (item.index, b",".join(matched))
            lines.append(line)
            size += len(line)
            if size >= self.broker.batch_bytes:
                break
        return lines

    def _end(self, message: str) -> list[bytes]:
        self._ended = True
        return [orjson.dumps({"Error": message}) + b"\n"]

    def heartbeat(self) -> bytes:
        return HEARTBEAT

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._ended = True
            self.broker._release()
