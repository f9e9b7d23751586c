"""Requests to the leader over its request stream, for a process that makes many at once.

`submit` puts the request on the leader's request stream with this link's response stream in
`reply_to` and returns a future; one reader thread reads the response stream and resolves the
future waiting on each answer's request id (`send` submits and waits on it: the HTTP API's
server awaits it on its event loop instead, holding no thread). Against a Ray call per
request (the API's old path), the leader pays no RPC executor thread, no pickling and no
wake-up: its loop reads requests in batches from the stream it blocks on anyway, and decides
and commits a batch together.
Requests go out through an outbox (outbox.py): `submit` encodes the request on its caller's
thread and queues it, and the outbox's thread writes whatever is queued in one pipeline, so
many handlers' requests cost one round trip and no handler waits on Redis. A request that
could not be written fails its future with the error (`send` raises it). Once written it is
on the stream, so a restarted leader still reads it (from its group's pending entries) and
answers it once: request ids are applied at most once.

Answers are keyed by request id, so a caller that timed out never gets another's answer;
an answer nobody waits for any more is dropped. The leader caps every response stream
(`REPLY_STREAM_MAXLEN`), and `stop` deletes this one.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import uuid
from concurrent.futures import Future, InvalidStateError
from concurrent.futures import TimeoutError as FutureTimeout

import redis

from actors.streams.bus import StreamBus, encoded
from actors.streams.envelope import BadMessage, decode_message, registry_of
from actors.streams.names import StreamNames
from actors.streams.outbox import StreamOutbox
from actors.streams.wake import WakeableReads
from contracts.copying import replacer
from contracts.messages import LeaderRequest, LeaderResponse

log = logging.getLogger(__name__)

RESPONSES = registry_of(LeaderResponse)
_with_reply_to = replacer(LeaderRequest, "reply_to")
READ_COUNT = 256


class LeaderUnanswered(TimeoutError):
    """The leader did not answer in time (it may be restarting, or overloaded)."""


class LeaderLink:
    def __init__(
        self, client: redis.Redis, names: StreamNames, owner: str, timeout_s: float = 30.0
    ) -> None:
        self.names = names
        self.timeout_s = timeout_s
        self.bus = StreamBus(client)
        # Unique per process: two API processes (or one restarted) never read each other's.
        self.stream = names.responses(f"{owner}-{uuid.uuid4().hex[:12]}")
        self.outbox = StreamOutbox(self.bus, f"drover-{owner}-requests")
        self._reads = WakeableReads(client)
        self._waiting: dict[str, Future[LeaderResponse]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> LeaderLink:
        self.outbox.start()
        self._thread = threading.Thread(
            target=self._read_responses, name="drover-leader-link", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.outbox.stop()  # what was submitted goes out first
        self._stop.set()
        self._reads.wake()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with contextlib.suppress(redis.RedisError):
            self.bus.client.delete(self.stream)
        self._reads.close()

    def send(self, request: LeaderRequest, timeout_s: float | None = None) -> LeaderResponse:
        """The leader's answer to `request` (which must carry a request id)."""
        future = self.submit(request)
        wait = self.timeout_s if timeout_s is None else timeout_s
        try:
            return future.result(timeout=wait)
        except FutureTimeout:
            raise LeaderUnanswered(
                f"the leader did not answer request {request.request_id} within {wait:.0f}s"
            ) from None
        finally:
            future.cancel()  # forgets the request if it is still waiting

    def submit(self, request: LeaderRequest) -> Future[LeaderResponse]:
        """Queue `request` (which must carry a request id) for the leader's stream and return
        at once: the future resolves, on this link's reader thread, with the leader's answer,
        or with the error that kept the request from being written (Redis away). Nothing
        times it out: the caller waits as long as it wants, then cancels it, which forgets
        the request (an answer arriving later is dropped)."""
        if not request.request_id:
            raise ValueError("a request sent over the stream needs a request id")
        request_id = request.request_id
        message = ("LeaderRequest", _replying_to(request, self.stream))
        ((stream, fields),) = encoded([(self.names.requests, *message)])
        future: Future[LeaderResponse] = Future()
        with self._lock:
            self._waiting[request_id] = future
        # A callback that closed over the future would make a reference cycle of every
        # request (the future holds its callbacks), left for the cyclic collector.
        future.add_done_callback(functools.partial(self._forget, request_id))
        self.outbox.put(stream, fields, lambda error: _fail(future, error))
        return future

    def _forget(self, request_id: str, future: Future[LeaderResponse]) -> None:
        with self._lock:
            if self._waiting.get(request_id) is future:
                del self._waiting[request_id]

    def _read_responses(self) -> None:
        # The stream is this link's alone (its name holds a fresh id): read it from the
        # start, so that no answer written before a read began is ever skipped.
        last_id = "0-0"
        while not self._stop.is_set():
            try:
                self._reads.arm()  # asks Redis for the connection's id after a reconnect
                if self._stop.is_set():
                    return
                reply = self._reads.client.xread(
                    {self.stream: last_id}, count=READ_COUNT, block=1000
                )
            except Exception as exc:  # never die: every later write would time out
                if not isinstance(exc, redis.ConnectionError):
                    log.exception("reading leader responses on %s failed", self.stream)
                if self._stop.wait(0.2):
                    return
                continue
            finally:
                self._reads.disarm()
            for _stream, rows in reply or ():
                for message_id, fields in rows:
                    last_id = message_id.decode() if isinstance(message_id, bytes) else message_id
                    self._answer(fields)

    def _answer(self, fields: dict[bytes, bytes]) -> None:
        try:
            _type, response, _trace = decode_message(fields, RESPONSES)
        except BadMessage as exc:
            log.error("unreadable leader response on %s: %s", self.stream, exc)
            return
        assert isinstance(response, LeaderResponse)
        with self._lock:
            future = self._waiting.pop(response.request_id, None)
        if future is not None:
            # Its caller may cancel it (given up) between the pop and here.
            with contextlib.suppress(InvalidStateError):
                future.set_result(response)


def _fail(future: Future[LeaderResponse], error: BaseException) -> None:
    with contextlib.suppress(InvalidStateError):  # its caller gave up meanwhile
        future.set_exception(error)


def _replying_to(request: LeaderRequest, stream: str) -> LeaderRequest:
    return _with_reply_to(request, stream)
