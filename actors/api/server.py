"""The HTTP server: HTTP/1.1 on asyncio streams in front of the API core.

One event-loop thread holds every connection, so an idle or slow client costs a few KB, not
a thread: 5,000 clients that never finish their request line leave a normal request's
latency as it was. The API core is synchronous (it reads a replica's snapshot, may wait for
it), so a request's `Api.begin` runs on a thread pool. A write handler's last step, its
write to the leader, is queued from there (the leader link's outbox writes many in one
pipeline) and not waited for on it: the loop awaits the leader's answer (set on the
leader link's reader thread) and `Api.finish` renders it, so
writes in flight hold no thread (loop_inbox.py hands answers to the loop in batches). A
blocking query (`?index=N`) does not hold a pool thread while it waits: it is answered with
`wait=0` at once, and while the answer's index has not passed N the connection waits on the
loop for the replica's next change (one watcher thread for all of them), then asks again.

Limits: past `max_connections` a new connection is answered 503 at once and closed; a
client silent for `idle_timeout_s` (its request line, headers or body, the next request on
a keep-alive connection, or a TLS handshake) is disconnected; headers over 64 KB are a 431;
bodies over `max_body_bytes` a 413, before they are read. The listen backlog is 1,024.
With `ssl_context` (`-tls-cert`/`-tls-key`, like Nomad's `tls` block) it serves HTTPS.
JSON answers carry Nomad's `X-Nomad-Index`, `X-Nomad-KnownLeader` and `X-Nomad-LastContact`;
errors answer with their status and a one-line plain-text message, as Nomad does. Bodies
must come with a Content-Length (a chunked one is a 411), as with the stdlib server before.

A handler may answer with a `StreamBody` (core/streaming.py; `/v1/event/stream`): it is sent
with chunked transfer encoding as it produces chunks, read on the pool at each change of the
replica and each heartbeat, until it ends, the client leaves or the server stops; a client
that does not take what was sent within `idle_timeout_s` is disconnected.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import http
import logging
import socket
import ssl
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import orjson

from actors.api.core import Api, ApiError, ApiRequest, ApiResponse
from actors.api.core.api import WriteInFlight
from actors.api.core.blocking import query_options
from actors.api.core.streaming import MultiQuery, StreamBody
from actors.api.loop_inbox import LoopInbox
from actors.process_settings import lower_thread_priority

log = logging.getLogger(__name__)

DEFAULT_ADDR = "127.0.0.1:4646"
MAX_BODY_BYTES = 8 * 1024 * 1024
MAX_CONNECTIONS = 16_384
IDLE_TIMEOUT_S = 30.0
LISTEN_BACKLOG = 1024
HEADER_LIMIT = 64 * 1024
REFUSAL_LINGER_S = 1.0  # a refused connection's 503 is sent and its input read for this long
# Handlers read and parse; a write (write_then in the core: all but a node's evaluate) waits
# for the leader on the loop, holding none of them.
# Before, every write held its thread until the leader answered, and the threads bounded the
# writes a leader turn could take: at 16, 32 clients registering small jobs left half of them
# queued here (1,000 jobs/s offered by 32 clients: 64 threads 654 / 802 / 806 evals/s against
# 604 / 616 / 737 at 16). Blocking queries wait on the loop too.
HANDLER_THREADS = 64
BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Content-Length: 40\r\nConnection: close\r\n\r\n"
    b"too many connections; retry in a moment\n"
)


def parse_addr(addr: str) -> tuple[str, int]:
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"http address: expected HOST:PORT, got {addr!r}")
    return host or "127.0.0.1", int(port)


def tls_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    """A server context for HTTPS (TLS 1.2 or later) from PEM files; ValueError naming the
    file that cannot be used."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"-tls-cert {cert_file} / -tls-key {key_file}: {exc}") from None
    return context


class _BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class ApiHttpServer:
    kind = "asyncio"
    request_queue_size = LISTEN_BACKLOG

    def __init__(
        self,
        addr: str,
        api: Api,
        max_body_bytes: int = MAX_BODY_BYTES,
        *,
        max_connections: int = MAX_CONNECTIONS,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        ssl_context: ssl.SSLContext | None = None,
        handler_threads: int = HANDLER_THREADS,
        niceness: int | None = None,
    ) -> None:
        """Binds at once (the address is known before `start()` serves it). `niceness`:
        the nice value its threads (the event loop and the handlers) run at, if that is a
        lower priority than the starting thread's (Linux)."""
        self.api = api
        self.max_body_bytes = max_body_bytes
        self.max_connections = max_connections
        self.idle_timeout_s = idle_timeout_s
        self.ssl_context = ssl_context
        self.refused_connections = 0
        self.open_connections = 0
        self._sock = socket.create_server(parse_addr(addr), backlog=LISTEN_BACKLOG)
        self.server_address: tuple[Any, ...] = self._sock.getsockname()
        self.niceness = niceness
        self._pool = ThreadPoolExecutor(
            handler_threads, thread_name_prefix="drover-http", initializer=self._lower_priority
        )
        self._loop = asyncio.new_event_loop()
        self._inbox = LoopInbox(self._loop)
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._ready = threading.Event()
        self._change: asyncio.Future[None] | None = None  # resolved at the replica's next change
        self._watching = False
        self._stopping = threading.Event()

    @property
    def address(self) -> str:
        host, port = self.server_address[:2]
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://{host}:{port}"

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> ApiHttpServer:
        self._thread = threading.Thread(target=self._run, name="drover-http", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        return self

    def _lower_priority(self) -> None:
        if self.niceness is not None:
            lower_thread_priority(self.niceness)

    def _run(self) -> None:
        self._lower_priority()  # the threads this one starts (the replica's watcher) inherit it
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._open())
        self._ready.set()
        self._loop.run_forever()
        self._loop.close()

    async def _open(self) -> None:
        self._server = await asyncio.start_server(
            self._connection,
            sock=self._sock,
            # asyncio listens on the socket again, with its own backlog (100 unless told):
            # past 100 pending connections, SYNs were dropped and clients waited 1 s to retry.
            backlog=LISTEN_BACKLOG,
            ssl=self.ssl_context,
            ssl_handshake_timeout=self.idle_timeout_s if self.ssl_context else None,
            limit=HEADER_LIMIT,
        )

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None and self._thread.is_alive():

            def close() -> None:
                if self._server is not None:
                    self._server.close()
                for task in asyncio.all_tasks(self._loop):
                    task.cancel()
                self._loop.call_later(0.05, self._loop.stop)

            self._loop.call_soon_threadsafe(close)
            self._thread.join(timeout=5)
        else:
            self._sock.close()
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- a connection ---------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.open_connections >= self.max_connections:
            self.refused_connections += 1
            with contextlib.suppress(Exception):
                writer.write(BUSY)
                async with asyncio.timeout(REFUSAL_LINGER_S):
                    await writer.drain()
                    # A lingering close: the 503 is followed by our FIN, and what the client
                    # sent is read until it closes too. Closed with its request unread, the
                    # socket sent a reset, which could reach the client before it read the
                    # 503 ("connection reset by peer" instead of "too many connections").
                    writer.write_eof()
                    while await reader.read(1 << 16):
                        pass
            writer.close()
            return
        self.open_connections += 1
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):  # not a TCP socket
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while await self._one_request(reader, writer):
                pass
        except (ConnectionError, asyncio.CancelledError, ssl.SSLError):
            pass
        finally:
            self.open_connections -= 1
            with contextlib.suppress(Exception):
                writer.close()

    async def _one_request(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Read, answer; True to keep the connection for the next request."""
        timeout = self.idle_timeout_s
        try:
            # asyncio.timeout, not wait_for: no task made per read (two reads per request).
            async with asyncio.timeout(timeout):
                head = await reader.readuntil(b"\r\n\r\n")
        except (TimeoutError, asyncio.IncompleteReadError):
            return False  # silent too long, or gone
        except asyncio.LimitOverrunError:
            await self._send(writer, ApiResponse(431, "request headers too large"), close=True)
            return False
        try:
            method, target, version, headers = _parse_head(head)
            length = _content_length(headers)
        except _BadRequest as bad:
            await self._send(writer, ApiResponse(bad.status, str(bad)), close=True)
            return False
        if length > self.max_body_bytes:
            await self._drain_body(reader, length)
            message = f"request body too large: {length} bytes (limit {self.max_body_bytes})"
            await self._send(writer, ApiResponse(413, message), close=True)
            return False
        try:
            body = b""
            if length:
                async with asyncio.timeout(timeout):
                    body = await reader.readexactly(length)
        except (TimeoutError, asyncio.IncompleteReadError):
            return False
        url = urlsplit(target)
        request = ApiRequest(
            method=method,
            path=url.path,
            query=MultiQuery(parse_qsl(url.query, keep_blank_values=True)),
            body=body,
            token=headers.get("x-nomad-token", ""),
        )
        response = await self._answer(request)
        if isinstance(response.body, StreamBody):
            await self._stream(reader, writer, response.body)
            return False
        connection = headers.get("connection", "").lower()
        keep = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
        await self._send(writer, response, close=not keep)
        return keep

    async def _drain_body(self, reader: asyncio.StreamReader, length: int) -> None:
        # Read and drop it in chunks (memory bounded) so that a client still sending gets
        # the 413 instead of a broken pipe; past 4x the limit, just close.
        remaining = length if length <= 4 * self.max_body_bytes else 0
        with contextlib.suppress(TimeoutError, ConnectionError):
            while remaining > 0:
                async with asyncio.timeout(self.idle_timeout_s):
                    chunk = await reader.read(min(remaining, 1 << 16))
                if not chunk:
                    return
                remaining -= len(chunk)

    async def _send(self, writer: asyncio.StreamWriter, response: ApiResponse, close: bool) -> None:
        writer.write(_encode(response, close))
        await writer.drain()

    # -- answering ------------------------------------------------------------------------

    async def _handle(self, request: ApiRequest) -> ApiResponse:
        work = self._pool.submit(self.api.begin, request)
        try:
            done = await self._inbox.settled(work)
        except asyncio.CancelledError:  # the server stops (or the task is cancelled)
            if not work.cancel():  # running already: a write it sends is given up at once
                work.add_done_callback(_give_up_write)
            raise
        if done.cancelled():  # the pool was shut down: the server stops
            raise asyncio.CancelledError
        started = done.result()  # begin answers its own errors
        if isinstance(started, ApiResponse):
            return started
        return await self._finish_write(started)

    async def _finish_write(self, flight: WriteInFlight) -> ApiResponse:
        """Wait on the loop for the leader's answer to a write the handler sent: no thread
        is held meanwhile, so the writes in flight are not bounded by the handler threads."""
        answer = flight.answer
        try:
            async with asyncio.timeout(flight.timeout_s):
                await self._inbox.settled(answer)
        except TimeoutError:
            if not answer.done() or answer.cancelled():  # else it came with the deadline
                message = (
                    f"the leader did not answer request {flight.request_id} within"
                    f" {flight.timeout_s:g}s; the write may still be applied"
                )
                return ApiResponse(503, message)
        finally:
            answer.cancel()  # forgets it if it is still waiting (no-op once answered)
        return self.api.finish(flight, answer)

    async def _answer(self, request: ApiRequest) -> ApiResponse:
        if request.method != "GET" or "index" not in request.query:
            return await self._handle(request)
        try:
            min_index, wait_s = query_options(request.query)
        except ApiError:
            return await self._handle(request)  # the core names the bad parameter
        if min_index == 0 or not hasattr(self.api, "backend"):
            return await self._handle(request)
        deadline = self._loop.time() + wait_s
        query = request.query
        wait_0 = (
            query.with_value("wait", "0")
            if isinstance(query, MultiQuery)
            else {**query, "wait": "0"}
        )
        now_only = dataclasses.replace(request, query=wait_0)
        while True:
            change = self._next_change()
            response = await self._handle(now_only)
            remaining = deadline - self._loop.time()
            if response.status != 200 or response.index is None or response.index > min_index:
                return response
            if remaining <= 0:
                return response
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await asyncio.shield(change)

    async def _stream(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, body: StreamBody
    ) -> None:
        """Send `body` as it comes, then close the connection."""
        loop = self._loop
        gone = loop.create_task(_until_eof(reader))
        ended = False  # the terminating chunk was written
        try:
            writer.write(_stream_head(body.content_type))
            beat_at = loop.time() + body.heartbeat_s
            watched = hasattr(self.api, "backend")
            while not gone.done():
                # Woken by the replica's next change; an API without one (tests) only beats.
                change = self._next_change() if watched else loop.create_future()
                chunks = await loop.run_in_executor(self._pool, body.read)
                if chunks is None:
                    writer.write(b"0\r\n\r\n")
                    ended = True
                    async with asyncio.timeout(self.idle_timeout_s):
                        await writer.drain()
                    return
                if loop.time() >= beat_at:
                    chunks.append(body.heartbeat())
                    beat_at = loop.time() + body.heartbeat_s
                if not chunks:
                    await asyncio.wait(
                        (change, gone),
                        timeout=beat_at - loop.time(),
                        return_when=asyncio.FIRST_COMPLETED,
                    )
                    continue
                writer.write(b"".join(b"%x\r\n%b\r\n" % (len(c), c) for c in chunks if c))
                async with asyncio.timeout(self.idle_timeout_s):
                    await writer.drain()
        except TimeoutError:
            pass  # the client does not read what it asked for: let it go
        finally:
            if self._stopping.is_set() and not ended and not writer.is_closing():
                # The server stops: the stream ends as a finished response, as a Go handler
                # returning on shutdown ends Nomad's, so the client reads an end, not a
                # connection cut mid-chunk ("Response ended prematurely"). Here, not only
                # on CancelledError: the loop also ends once `gone` (cancelled by the stop
                # as well) is done. (Waits use asyncio.timeout: 3.11's wait_for swallowed a
                # cancel that landed as the drain it waited on completed.)
                writer.write(b"0\r\n\r\n")
            gone.cancel()
            body.close()

    def _next_change(self) -> asyncio.Future[None]:
        """A future resolved when the replica applies its next entry (one watcher thread
        serves every waiting query)."""
        if self._change is None or self._change.done():
            self._change = self._loop.create_future()
        if not self._watching:
            self._watching = True
            threading.Thread(target=self._watch, name="drover-http-watch", daemon=True).start()
        return self._change

    def _watch(self) -> None:
        backend = self.api.backend
        index: int | None = None
        while not self._stopping.is_set():
            try:
                if index is None:
                    index = backend.snapshot().latest_index()
                backend.wait_after(index, 1.0)
                # Carried to the next wait: a change applied while a read of the index
                # waited (for the API's read barrier) is still signalled.
                latest = backend.snapshot().latest_index()
                if latest > index:
                    self._loop.call_soon_threadsafe(self._changed)
                index = latest
            except Exception:  # a replica hiccup must not end the watch
                log.warning("watching the API's replica failed", exc_info=True)
                index = None
                self._stopping.wait(0.5)

    def _changed(self) -> None:
        change, self._change = self._change, None
        if change is not None and not change.done():
            change.set_result(None)


def _give_up_write(work: Future[ApiResponse | WriteInFlight]) -> None:
    """A handler finished after its request was abandoned: a write it sent is forgotten by
    the link (the leader may still apply it; nobody waits for its answer)."""
    if not work.cancelled() and work.exception() is None:
        started = work.result()
        if isinstance(started, WriteInFlight):
            started.answer.cancel()


async def _until_eof(reader: asyncio.StreamReader) -> None:
    """Returns when the client closes its side (what it sends meanwhile is dropped)."""
    with contextlib.suppress(ConnectionError, ssl.SSLError):
        while await reader.read(1 << 12):
            pass


def _stream_head(content_type: str) -> bytes:
    lines = [
        "HTTP/1.1 200 OK",
        f"Content-Type: {content_type}",
        "Cache-Control: no-cache",
        "Transfer-Encoding: chunked",
        "X-Nomad-KnownLeader: true",
        "X-Nomad-LastContact: 0",
        "Connection: close",
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _parse_head(head: bytes) -> tuple[str, str, str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _BadRequest(400, f"bad request line: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise _BadRequest(400, f"bad header line: {line[:80]!r}")
        headers[name.strip().lower()] = value.strip()
    return parts[0], parts[1], parts[2], headers


def _content_length(headers: dict[str, str]) -> int:
    if "transfer-encoding" in headers:
        raise _BadRequest(411, "a body needs a Content-Length (chunked bodies are not read)")
    raw = headers.get("content-length", "0") or "0"
    if not raw.isdigit():
        raise _BadRequest(400, f"Content-Length: expected a number of bytes, got {raw[:20]!r}")
    return int(raw)


def _encode(response: ApiResponse, close: bool) -> bytes:
    if response.content_type and isinstance(response.body, str):
        payload, content_type = response.body.encode(), response.content_type
    elif response.status >= 400 and isinstance(response.body, str):
        # The error text alone, as Nomad writes it (clients compare it exactly).
        payload, content_type = response.body.encode(), "text/plain; charset=utf-8"
    else:
        payload, content_type = orjson.dumps(response.body), "application/json"
    try:
        phrase = http.HTTPStatus(response.status).phrase
    except ValueError:
        phrase = ""
    lines = [
        f"HTTP/1.1 {response.status} {phrase}",
        f"Content-Type: {content_type}",
        f"Content-Length: {len(payload)}",
    ]
    if response.index is not None:
        lines.append(f"X-Nomad-Index: {response.index}")
    lines += ["X-Nomad-KnownLeader: true", "X-Nomad-LastContact: 0"]
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload
