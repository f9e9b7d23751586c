"""The HTTP layer of the API (actors/api/server.py) on a real socket: a response leaves in
one write. In two (headers, then body), a keep-alive client waited for Nagle on every
request: the body was held until the client's delayed ACK of the headers, ~40 ms on Linux."""

from __future__ import annotations

import re
import socket
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
