"""The HTTP layer of the API (actors/api/server.py) on a real socket: a response leaves in
one write. In two (headers, then body), a keep-alive client waited for Nagle on every
request: the body was held until the client's delayed ACK of the headers, ~40 ms on Linux."""

from __future__ import annotations

import os
import re
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import cast

import orjson
import pytest

from actors.api.core import Api, ApiError, ApiRequest, ApiResponse
from actors.api.core.memory_backend import Client, MemoryBackend
from actors.api.core.shapes import job_to_nomad
from actors.api.server import ApiHttpServer, tls_context
from contracts import Job, Resources, Task, TaskGroup
from contracts.messages import LeaderRequest, LeaderResponse


class Echo:
    """Stands in for the API core: the HTTP layer calls `begin` (and `finish` only for what
    `begin` leaves in flight, a write)."""

    def begin(self, request: ApiRequest) -> ApiResponse:
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


def _self_signed(tmp: Path) -> tuple[Path, Path]:
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    argv = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    argv += ["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
    argv += ["-keyout", str(key), "-out", str(cert)]
    subprocess.run(argv, check=True, capture_output=True)
    return cert, key


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_https_with_a_certificate_and_key(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    server = ApiHttpServer(
        "127.0.0.1:0", cast(Api, Echo()), ssl_context=tls_context(str(cert), str(key))
    ).start()
    try:
        assert server.address.startswith("https://")
        trusted = ssl.create_default_context(cafile=str(cert))
        with urllib.request.urlopen(server.address + "/v1/tls", context=trusted, timeout=10) as r:
            assert r.status == 200 and orjson.loads(r.read())["path"] == "/v1/tls"
        # A plain-HTTP client is not answered in the clear.
        host, port = str(server.server_address[0]), int(server.server_address[1])
        assert not _get(host, port, "/v1/plain").startswith(b"HTTP/1.1 200")
    finally:
        server.stop()
    with pytest.raises(ValueError, match="tls-cert"):
        tls_context(str(tmp_path / "missing.pem"), str(key))


def test_thousands_of_slow_clients_leave_a_normal_request_fast() -> None:
    server = ApiHttpServer("127.0.0.1:0", cast(Api, Echo()), idle_timeout_s=30).start()
    held = []
    try:
        host, port = str(server.server_address[0]), int(server.server_address[1])
        for _ in range(2000):
            conn = socket.create_connection((host, port), timeout=10)
            conn.sendall(b"GET /v1/slow HT")  # half a request line, then nothing
            held.append(conn)
        deadline = time.monotonic() + 10
        while server.open_connections < 2000:
            assert time.monotonic() < deadline, server.open_connections
            time.sleep(0.05)
        started = time.monotonic()
        reply = _get(host, port, "/v1/normal")
        assert reply.startswith(b"HTTP/1.1 200") and b"/v1/normal" in reply
        assert time.monotonic() - started < 5  # answered, not queued behind the slow ones
        assert server.refused_connections == 0
    finally:
        for conn in held:
            conn.close()
        server.stop()


def test_the_listen_backlog_is_the_one_documented() -> None:
    """1,024 pending connections, as the server's docstring says. asyncio listens on the
    given socket again with its own backlog, 100 unless told: a burst of more new clients
    than that had SYNs dropped, and each such client waited a second to try again."""
    server = ApiHttpServer("127.0.0.1:0", cast(Api, Echo())).start()
    try:
        listening = server._sock
        info = listening.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
        # Linux's tcp_info of a listening socket: tcpi_state (byte 0) is TCP_LISTEN (10),
        # tcpi_sacked (bytes 28-31) its backlog, as `ss -l` reads it.
        assert (info[0], struct.unpack_from("I", info, 28)[0]) == (10, 1024)
    finally:
        server.stop()


def test_bad_requests_are_answered_with_the_reason() -> None:
    server = ApiHttpServer("127.0.0.1:0", cast(Api, Echo()), max_body_bytes=10).start()
    try:
        host, port = str(server.server_address[0]), int(server.server_address[1])
        for raw, status, says in (
            (b"NONSENSE\r\n\r\n", b"400", b"bad request line"),
            (
                b"POST /v1/x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
                b"411",
                b"Content-Length",
            ),
            (
                b"POST /v1/x HTTP/1.1\r\nContent-Length: 99\r\n\r\n" + b"x" * 99,
                b"413",
                b"too large",
            ),
            (b"GET /v1/x HTTP/1.1\r\nX: " + b"y" * 70_000 + b"\r\n\r\n", b"431", b"too large"),
        ):
            with socket.create_connection((host, port), timeout=10) as conn:
                conn.sendall(raw)
                data = b""
                while chunk := conn.recv(1 << 16):
                    data += chunk
            assert data.startswith(b"HTTP/1.1 " + status) and says in data, data[:200]
    finally:
        server.stop()


class Refuse:
    """An API core that refuses everything with a Nomad error text."""

    def begin(self, request: ApiRequest) -> ApiResponse:
        return ApiResponse(400, "can't promote terminal deployment")


def test_an_error_body_is_the_message_alone_as_nomad_writes_it() -> None:
    """Clients compare Nomad's error text exactly (python-nomad's deployment tests do):
    nothing is added to it, not even a newline."""
    server = ApiHttpServer("127.0.0.1:0", cast(Api, Refuse())).start()
    try:
        host, port = str(server.server_address[0]), int(server.server_address[1])
        head, _, body = _get(host, port, "/v1/deployment/promote/x").partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400") and b"Content-Type: text/plain" in head
        assert body == b"can't promote terminal deployment"
    finally:
        server.stop()


def test_blocking_queries_wait_on_the_loop_not_on_handler_threads() -> None:
    backend = MemoryBackend()
    api = Api(backend)
    server = ApiHttpServer("127.0.0.1:0", api, handler_threads=2).start()
    waiting: list[socket.socket] = []
    try:
        host, port = str(server.server_address[0]), int(server.server_address[1])
        task = Task("t", "mock", {}, resources=Resources(10, 16))
        first = Job("first", "first", task_groups=(TaskGroup("g", 1, tasks=(task,)),))
        assert Client(api)("POST", "/v1/jobs", {"Job": job_to_nomad(first)}).status == 200
        index = Client(api)("GET", "/v1/jobs").index or 0
        for _ in range(8):  # four times the handler threads
            conn = socket.create_connection((host, port), timeout=30)
            conn.sendall(
                f"GET /v1/jobs?index={index}&wait=20s HTTP/1.1\r\nHost: t\r\n\r\n".encode()
            )
            waiting.append(conn)
        time.sleep(0.3)
        started = time.monotonic()
        assert _get(host, port, "/v1/status/leader").startswith(b"HTTP/1.1 200")
        assert time.monotonic() - started < 2  # not queued behind the waiting queries
        job = Job("woken", "woken", task_groups=(TaskGroup("g", 1, tasks=(task,)),))
        assert Client(api)("POST", "/v1/jobs", {"Job": job_to_nomad(job)}).status == 200
        for conn in waiting:  # every waiting query is answered with the new index
            head = conn.recv(1 << 16)
            found = re.search(rb"X-Nomad-Index: (\d+)", head)
            assert head.startswith(b"HTTP/1.1 200") and found and int(found.group(1)) > index
            assert b"woken" in head or b"woken" in conn.recv(1 << 16)
    finally:
        for conn in waiting:
            conn.close()
        server.stop()


class NiceOf:
    """Answers with the nice value of the thread that handled the request."""

    def begin(self, request: ApiRequest) -> ApiResponse:
        nice = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        return ApiResponse(200, {"nice": nice, "caller": threading.current_thread().name})


@pytest.mark.skipif(sys.platform != "linux", reason="a nice value per thread is Linux's")
def test_its_threads_run_at_the_niceness_given_and_the_starting_thread_keeps_its_own() -> None:
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    wanted = min(19, mine + 3)
    server = ApiHttpServer("127.0.0.1:0", cast(Api, NiceOf()), niceness=wanted).start()
    try:
        host, port = server.server_address[:2]
        reply = _get(str(host), int(port), "/v1/anything")
        answer = orjson.loads(reply.partition(b"\r\n\r\n")[2])
        assert answer["caller"].startswith("drover-http")  # a handler thread answered...
        assert answer["nice"] == wanted  # ...at the niceness given
        assert server._thread is not None and server._thread.native_id is not None
        assert os.getpriority(os.PRIO_PROCESS, server._thread.native_id) == wanted  # the loop
        assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == mine
    finally:
        server.stop()


@pytest.mark.skipif(sys.platform != "linux", reason="a nice value per thread is Linux's")
def test_without_a_niceness_its_threads_keep_the_starting_threads() -> None:
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    server = ApiHttpServer("127.0.0.1:0", cast(Api, NiceOf())).start()
    try:
        host, port = server.server_address[:2]
        answer = orjson.loads(_get(str(host), int(port), "/v1/x").partition(b"\r\n\r\n")[2])
        assert answer["nice"] == mine
    finally:
        server.stop()


class HeldWrites(MemoryBackend):
    """A leader that answers only when told: submitted writes wait in `held`."""

    def __init__(self, write_timeout_s: float = 30.0) -> None:
        super().__init__()
        self.write_timeout_s = write_timeout_s
        self.held: list[tuple[LeaderRequest, Future[LeaderResponse]]] = []
        self.lock = threading.Lock()

    def submit(self, request: LeaderRequest) -> Future[LeaderResponse]:
        future: Future[LeaderResponse] = Future()
        with self.lock:
            self.held.append((request, future))
        return future

    def answer_all(self) -> None:
        with self.lock:
            held, self.held = self.held, []
        for request, future in held:
            future.set_result(self.write(request))


def _post_job(conn: socket.socket, job_id: str) -> None:
    task = Task("t", "mock", {}, resources=Resources(10, 16))
    job = Job(job_id, job_id, task_groups=(TaskGroup("g", 1, tasks=(task,)),))
    body = orjson.dumps({"Job": job_to_nomad(job)})
    head = f"POST /v1/jobs HTTP/1.1\r\nHost: t\r\nContent-Length: {len(body)}\r\n\r\n"
    conn.sendall(head.encode() + body)


def _response(conn: socket.socket) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(1 << 16)
    head, _, body = data.partition(b"\r\n\r\n")
    length = re.search(rb"Content-Length: (\d+)", head)
    assert length is not None, head
    while len(body) < int(length.group(1)):
        body += conn.recv(1 << 16)
    return head, body


def _wait_until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_writes_waiting_for_the_leader_hold_no_handler_thread() -> None:
    """A registration's handler sends its write and lets go of its thread: the writes in
    flight are not bounded by the handler threads (a leader turn takes all of them)."""
    backend = HeldWrites()
    api = Api(backend)
    server = ApiHttpServer("127.0.0.1:0", api, handler_threads=2).start()
    conns: list[socket.socket] = []
    try:
        host, port = str(server.server_address[0]), int(server.server_address[1])
        for i in range(8):  # four times the handler threads
            conns.append(socket.create_connection((host, port), timeout=30))
            _post_job(conns[-1], f"held-{i}")
        _wait_until(lambda: len(backend.held) == 8)  # all eight with the leader at once
        assert _get(host, port, "/v1/status/leader").startswith(b"HTTP/1.1 200")
        backend.answer_all()
        for i, conn in enumerate(conns):
            head, body = _response(conn)
            assert head.startswith(b"HTTP/1.1 200"), head
            answer = orjson.loads(body)
            assert answer["EvalID"] and answer["JobModifyIndex"] > 0
            assert re.search(rb"X-Nomad-Index: [1-9]", head)
            assert Client(api)("GET", f"/v1/job/held-{i}").status == 200
    finally:
        for conn in conns:
            conn.close()
        server.stop()


def test_a_write_the_leader_does_not_answer_in_time_is_a_503_and_is_given_up() -> None:
    backend = HeldWrites(write_timeout_s=0.2)
    server = ApiHttpServer("127.0.0.1:0", Api(backend)).start()
    try:
        host, port = str(server.server_address[0]), int(server.server_address[1])
        with socket.create_connection((host, port), timeout=30) as conn:
            _post_job(conn, "unanswered")
            head, body = _response(conn)
        assert head.startswith(b"HTTP/1.1 503")
        ((request, future),) = backend.held
        assert request.request_id
        assert (
            body
            == (
                f"the leader did not answer request {request.request_id} within 0.2s; the write"
                " may still be applied"
            ).encode()
        )
        assert future.cancelled()  # the link forgets it: a late answer is dropped
    finally:
        server.stop()


class AnsweredBy(HeldWrites):
    """Held writes answered, when told, by `answer` (a response, an error, or a cancel)."""

    def settle(self, outcome: Callable[[LeaderRequest, Future[LeaderResponse]], None]) -> None:
        with self.lock:
            held, self.held = self.held, []
        for request, future in held:
            outcome(request, future)


def _serve(backend: MemoryBackend) -> tuple[ApiHttpServer, str, int]:
    server = ApiHttpServer("127.0.0.1:0", Api(backend), handler_threads=2).start()
    return server, str(server.server_address[0]), int(server.server_address[1])


def test_a_refused_write_awaited_on_the_loop_reads_as_handle_answers_it() -> None:
    """The leader's refusal (a stale JobModifyIndex) reads the same whether the server
    waited for it on its loop or `handle` waited in place: 409 and the leader's text."""
    backend = HeldWrites()
    server, host, port = _serve(backend)
    task = Task("t", "mock", {}, resources=Resources(10, 16))
    job = Job("versioned", "versioned", task_groups=(TaskGroup("g", 1, tasks=(task,)),))
    stale = {"Job": job_to_nomad(job), "EnforceIndex": True, "JobModifyIndex": 999}
    try:
        body = orjson.dumps(stale)
        with socket.create_connection((host, port), timeout=30) as conn:
            head = f"POST /v1/jobs HTTP/1.1\r\nHost: t\r\nContent-Length: {len(body)}\r\n\r\n"
            conn.sendall(head.encode() + body)
            _wait_until(lambda: len(backend.held) == 1)  # with the leader, on the loop
            backend.answer_all()
            over_http = _response(conn)
        in_place = Api(MemoryBackend()).handle(ApiRequest("POST", "/v1/jobs", {}, body))
        assert in_place.status == 409
        assert over_http[0].startswith(b"HTTP/1.1 409 ")
        assert over_http[1] == str(in_place.body).encode()
    finally:
        server.stop()


def test_a_write_whose_sending_failed_later_is_answered_with_that_error() -> None:
    backend = AnsweredBy()
    server, host, port = _serve(backend)
    try:
        with socket.create_connection((host, port), timeout=30) as conn:
            _post_job(conn, "unlucky")
            _wait_until(lambda: len(backend.held) == 1)
            backend.settle(lambda _r, f: f.set_exception(ApiError(503, "Redis is unreachable")))
            head, body = _response(conn)
        assert head.startswith(b"HTTP/1.1 503") and body == b"Redis is unreachable"
    finally:
        server.stop()


def test_writes_in_flight_when_the_server_stops_are_given_up() -> None:
    backend = HeldWrites()
    server, host, port = _serve(backend)
    conns = [socket.create_connection((host, port), timeout=30) for _ in range(4)]
    try:
        for i, conn in enumerate(conns):
            _post_job(conn, f"stopped-{i}")
        _wait_until(lambda: len(backend.held) == 4)
        server.stop()
        # Nobody will answer their clients: the link would forget them (no leak there).
        _wait_until(lambda: all(future.cancelled() for _request, future in backend.held))
    finally:
        for conn in conns:
            conn.close()


def test_converted_writes_answer_with_their_index_over_http() -> None:
    """Stop, scale and evaluate render from the leader's answer on the loop: their bodies
    and X-Nomad-Index are the leader's, as when the handler waited."""
    backend = MemoryBackend()
    api = Api(backend)
    server, host, port = _serve(backend)
    task = Task("t", "mock", {}, resources=Resources(10, 16))
    job = Job("indexed", "indexed", task_groups=(TaskGroup("g", 1, tasks=(task,)),))
    try:
        assert Client(api)("POST", "/v1/jobs", {"Job": job_to_nomad(job)}).status == 200
        writes = [
            ("POST", "/v1/job/indexed/scale", {"Target": {"Group": "g"}, "Count": 2}),
            ("POST", "/v1/job/indexed/evaluate", {}),
            ("DELETE", "/v1/job/indexed", None),
        ]
        last = 0
        for method, path, payload in writes:
            body = orjson.dumps(payload) if payload is not None else b""
            with socket.create_connection((host, port), timeout=30) as conn:
                head = f"{method} {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {len(body)}\r\n\r\n"
                conn.sendall(head.encode() + body)
                reply_head, reply_body = _response(conn)
            assert reply_head.startswith(b"HTTP/1.1 200"), (path, reply_head)
            found = re.search(rb"X-Nomad-Index: (\d+)", reply_head)
            answer = orjson.loads(reply_body)
            assert found and int(found.group(1)) == answer["Index"] > last, path
            assert answer["EvalID"], path
            last = answer["Index"]
    finally:
        server.stop()
