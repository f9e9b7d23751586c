"""The HTTP server: a threaded stdlib server in front of the API core.

Each connection runs on its own thread (blocking queries hold theirs while they wait), so
connections are bounded: past `max_connections` a new one is answered 503 at once and
closed, and a client that stays silent for `idle_timeout_s` (its request line, headers or
body, or the next request on a keep-alive connection) is disconnected, so idle or slow
clients cannot hold every thread. The listen backlog is 1,024, not the socket module's 5,
so a burst of honest clients is queued rather than refused. Bodies over `max_body_bytes`
are refused with 413 before they are read; JSON answers carry Nomad's
`X-Nomad-Index`, `X-Nomad-KnownLeader` and `X-Nomad-LastContact` headers; errors answer with
their status and a one-line plain-text message, as Nomad does.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import orjson

from actors.api.core import Api, ApiRequest, ApiResponse

log = logging.getLogger(__name__)

DEFAULT_ADDR = "127.0.0.1:4646"
MAX_BODY_BYTES = 8 * 1024 * 1024
MAX_CONNECTIONS = 1024
IDLE_TIMEOUT_S = 30.0
LISTEN_BACKLOG = 1024
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


class _Handler(BaseHTTPRequestHandler):
    server: ApiHttpServer
    protocol_version = "HTTP/1.1"
    # Buffered: headers and body leave in one write when the request is done. Unbuffered,
    # they were two, and on a keep-alive connection Nagle held the body back until the
    # client's delayed ACK of the headers (~40 ms on Linux) on every request.
    wbufsize = 1 << 16

    def setup(self) -> None:
        # A silent client times out (socket.timeout ends the connection in handle()).
        self.timeout = self.server.idle_timeout_s
        super().setup()
        with contextlib.suppress(OSError):  # not a TCP socket
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > self.server.max_body_bytes:
            # Read and drop the body in chunks (memory stays bounded) so that a client still
            # sending it gets the 413 instead of a broken pipe; past 4x the limit, just close.
            remaining = length if length <= 4 * self.server.max_body_bytes else 0
            while remaining > 0:
                chunk = self.rfile.read(min(remaining, 1 << 16))
                if not chunk:
                    break
                remaining -= len(chunk)
            self._send(
                ApiResponse(
                    413,
                    f"request body too large: {length} bytes (limit {self.server.max_body_bytes})",
                ),
                close=True,
            )
            return
        body = self.rfile.read(length) if length > 0 else b""
        url = urlsplit(self.path)
        request = ApiRequest(
            method=self.command,
            path=url.path,
            query=dict(parse_qsl(url.query, keep_blank_values=True)),
            body=body,
            token=self.headers.get("X-Nomad-Token", ""),
        )
        self._send(self.server.api.handle(request))

    do_GET = do_POST = do_PUT = do_DELETE = _serve

    def _send(self, response: ApiResponse, close: bool = False) -> None:
        if response.content_type and isinstance(response.body, str):
            payload, content_type = response.body.encode(), response.content_type
        elif response.status >= 400 and isinstance(response.body, str):
            payload, content_type = response.body.encode() + b"\n", "text/plain; charset=utf-8"
        else:
            payload, content_type = orjson.dumps(response.body), "application/json"
        self.send_response(response.status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        if response.index is not None:
            self.send_header("X-Nomad-Index", str(response.index))
        self.send_header("X-Nomad-KnownLeader", "true")
        self.send_header("X-Nomad-LastContact", "0")
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(payload)


class ApiHttpServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = LISTEN_BACKLOG

    def __init__(
        self,
        addr: str,
        api: Api,
        max_body_bytes: int = MAX_BODY_BYTES,
        *,
        max_connections: int = MAX_CONNECTIONS,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
    ) -> None:
        super().__init__(parse_addr(addr), _Handler)
        self.api = api
        self.max_body_bytes = max_body_bytes
        self.max_connections = max_connections
        self.idle_timeout_s = idle_timeout_s
        self._open = threading.BoundedSemaphore(max_connections)
        self.refused_connections = 0
        self._thread: threading.Thread | None = None

    def process_request(self, request: Any, client_address: Any) -> None:
        """A thread for the connection if one is free; else a 503 and the door."""
        if not self._open.acquire(blocking=False):
            self.refused_connections += 1
            with contextlib.suppress(OSError):
                request.settimeout(1.0)
                request.sendall(BUSY)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._open.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._open.release()

    @property
    def address(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> ApiHttpServer:
        self._thread = threading.Thread(target=self.serve_forever, name="drover-http", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
