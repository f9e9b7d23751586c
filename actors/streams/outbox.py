"""Stream entries that many threads send, written by one thread in pipelines.

A process that sends many small messages from many threads (the HTTP API's handlers, each
registering a job with the leader) paid a Redis round trip per message on the sender's
thread: ~65 µs of its CPU in redis-py for one XADD, against ~25 µs each in a pipeline of
16, and a thread blocked on the reply meanwhile. Here the callers queue entries they have
already encoded (on their own thread, so each carries its caller's trace context) and
return at once; one thread takes whatever is queued and writes it in a single pipeline,
then the next batch. When one message at a time arrives, each goes alone, a thread wake-up
later than it would have; under load, the messages that arrive during a round trip go
together in the next.

A message whose XADD fails, or whose batch could not be written (Redis away), is handed to
its `failed` callback with the error and not retried: whether the others of the batch got
through is unknown when the connection drops, and the caller decides (the leader applies a
request id at most once, so resending is safe where the caller wants it). Stopping writes
what is queued first; a message put after that fails at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import NamedTuple

from actors.streams.bus import Fields, StreamBus

log = logging.getLogger(__name__)

# The most entries one pipeline carries; more wait for the next (a bounded write each).
MAX_BATCH = 256


class OutboxStopped(RuntimeError):
    """The outbox was stopped: nothing more is sent."""


class _Queued(NamedTuple):
    stream: str
    fields: Fields
    failed: Callable[[BaseException], None]


class StreamOutbox:
    def __init__(self, bus: StreamBus, name: str, max_batch: int = MAX_BATCH) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        self.bus = bus
        self.name = name
        self.max_batch = max_batch
        self._queue: list[_Queued] = []
        self._ready = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.batches = 0  # pipelines written
        self.entries = 0  # entries written (failed ones not counted)

    def start(self) -> StreamOutbox:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        return self

    def put(self, stream: str, fields: Fields, failed: Callable[[BaseException], None]) -> None:
        """Queue an entry for `stream`; `failed(error)` runs on the outbox's thread if it
        cannot be written (at once, on this thread, if the outbox is stopped)."""
        with self._ready:
            if not self._stopping:
                self._queue.append(_Queued(stream, fields, failed))
                self._ready.notify()
                return
        failed(OutboxStopped(f"{self.name} is stopped"))

    def stop(self, timeout_s: float = 5.0) -> None:
        """Write what is queued, then end the thread."""
        with self._ready:
            self._stopping = True
            self._ready.notify()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._queue and not self._stopping:
                    self._ready.wait()
                if not self._queue:
                    return  # stopping, and everything queued was written
                batch = self._queue[: self.max_batch]
                del self._queue[: self.max_batch]
            self._write(batch)

    def _write(self, batch: list[_Queued]) -> None:
        replies: list[str | Exception]
        try:
            replies = self.bus.xadd_fields([(q.stream, q.fields) for q in batch])
            if len(replies) != len(batch):
                raise RuntimeError(f"{len(replies)} replies to {len(batch)} entries")
        except Exception as exc:  # the batch as a whole: none of it known to be written
            replies = [exc] * len(batch)
        else:
            self.batches += 1
        for queued, reply in zip(batch, replies, strict=True):
            if isinstance(reply, Exception):
                _tell(queued, reply)
            else:
                self.entries += 1


def _tell(queued: _Queued, error: BaseException) -> None:
    try:
        queued.failed(error)
    except Exception:  # one caller's callback must not cost the others their answers
        log.exception("a failed send's callback raised")
