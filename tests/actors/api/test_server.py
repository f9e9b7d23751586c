"""The HTTP layer of the API (actors/api/server.py) on a real socket: a response leaves in
one write. In two (headers, then body), a keep-alive client waited for Nagle on every
request: the body was held until the client's delayed ACK of the headers, ~40 ms on Linux."""

from __future__ import annotations

import re
import socket
import time
from typing import cast

from actors.api.core import Api, ApiRequest, ApiResponse
from actors.api.server import ApiHttpServer


class Echo:
    """Stands in for the API core: the HTTP layer only calls `handle`."""

    def handle(self, request: ApiRequest) -> ApiResponse:
        return ApiResponse(200, {"path": request.path, "pad": "x" * 2000}, index=7)


def test_headers_and_body_arrive_together_on_a_keep_alive_connection() -> None:
    server = ApiHttpServer("127.0.0.1:0", cast(Api, Echo())).start()
    try:
        host, port = server.server_address[:2]
        with socket.create_connection((str(host), int(port)), timeout=30) as conn:
            for n in range(3):  # the same connection each time, as a keep-alive client
                conn.sendall(f"GET /v1/n{n} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
                first = conn.recv(1 << 16)  # what arrived first, whole
                head, _, body = first.partition(b"\r\n\r\n")
                length = re.search(rb"Content-Length: (\d+)", head)
                assert length is not None, head
                assert len(body) == int(length.group(1)), "the body came after the headers"
                assert b"X-Nomad-Index: 7" in head and f"/v1/n{n}".encode() in body
    finally:
        server.stop()


def _get(host: str, port: int, path: str) -> bytes:
    with socket.create_connection((host, port), timeout=10) as conn:
        conn.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := conn.recv(1 << 16):
            data += chunk
        return data


def test_silent_clients_time_out_and_extra_connections_are_refused_at_once() -> None:
    server = ApiHttpServer(
        "127.0.0.1:0", cast(Api, Echo()), max_connections=4, idle_timeout_s=0.5
    ).start()
    try:
        host, port = str(server.server_address[0]), int(server.server_address[1])
        # four clients that connect and never finish their request line
        silent = [socket.create_connection((host, port), timeout=10) for _ in range(4)]
        for conn in silent:
            conn.sendall(b"GET /v1/slo")
        time.sleep(0.1)  # the four hold every connection slot
        refused = _get(host, port, "/v1/jobs")
        assert refused.startswith(b"HTTP/1.1 503") and b"too many connections" in refused
        assert server.refused_connections >= 1
        # past the idle timeout the silent ones are disconnected (the server closes first)
        for conn in silent:
            assert conn.recv(1 << 16) == b""
            conn.close()
        deadline = time.monotonic() + 5
        while (reply := _get(host, port, "/v1/jobs")).startswith(b"HTTP/1.1 503"):
            assert time.monotonic() < deadline, "the slots were not freed"
            time.sleep(0.05)
        assert reply.startswith(b"HTTP/1.1 200") and b"/v1/jobs" in reply
    finally:
        server.stop()
    assert ApiHttpServer.request_queue_size == 1024  # the listen backlog, not 5
