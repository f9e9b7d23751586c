"""Redis killed with SIGKILL under a stream of registrations: the embedded server is started
again on its AOF, every actor reconnects with backoff, and scheduling goes on where it
stopped. Real Ray actors, real HTTP, the embedded Redis.

Checked: every job the API acknowledged (HTTP 200) is there after the restart and gets its
allocation running; a registration made while Redis is away is refused with a 503 that says
so (the client retries it); no job gets a second allocation; every evaluation ends terminal.
"""

from __future__ import annotations

import os
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from actors.agent.core import FleetSpec
from actors.api.core.shapes import job_to_nomad
from contracts import Job, Resources, Task, TaskGroup
from launch.system import DroverSystem, SystemConfig

DEADLINE_S = 90.0


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DroverSystem]:
    config = SystemConfig(
        data_dir=Path(tmp_path_factory.mktemp("drover-redis-faults")),
        workers=2,
        num_cpus=2,
        fleets=[FleetSpec(name="sim", count=4, cpu_mhz=8000, memory_mb=16384)],
        http_addr="127.0.0.1:0",
        heartbeat_ttl_s=30.0,  # an outage of a few seconds must not mark nodes down
        heartbeat_s=0.5,
    )
    with DroverSystem(config) as running:
        yield running


def http(system: DroverSystem, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = orjson.dumps(body) if body is not None else None
    request = urllib.request.Request(system.http_address + path, data=data, method=method)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, orjson.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode().strip()
    except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
        return 0, str(exc)


def job_body(job_id: str) -> dict[str, Any]:
    task = Task("t", "mock", {"run_for": "1h"}, resources=Resources(50, 32))
    job = Job(job_id, job_id, datacenters=("dc1",), task_groups=(TaskGroup("g", 1, tasks=(task,)),))
    return {"Job": job_to_nomad(job)}


def wait_for(check: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what}: not reached in {DEADLINE_S} s"
        time.sleep(0.1)


def register_until_acknowledged(system: DroverSystem, job_id: str, refusals: list[str]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        status, reply = http(system, "POST", "/v1/jobs", job_body(job_id))
        if status == 200:
            return
        assert status == 503, (status, reply)
        refusals.append(str(reply))
        assert time.monotonic() < deadline, f"{job_id} never acknowledged: {reply}"
        time.sleep(0.05)


def running(system: DroverSystem, job_id: str) -> list[dict[str, Any]]:
    status, allocs = http(system, "GET", f"/v1/job/{job_id}/allocations")
    if status != 200:
        return []
    return [a for a in allocs if a["ClientStatus"] == "running"]


def test_redis_killed_under_load_comes_back_and_nothing_acknowledged_is_lost(
    system: DroverSystem,
) -> None:
    assert system.redis is not None and system.redis.owned
    refusals: list[str] = []
    before = [f"before-{i}" for i in range(8)]
    for job_id in before:
        register_until_acknowledged(system, job_id, refusals)
    wait_for(lambda: all(running(system, j) for j in before), "the first jobs running")
    pid = system.redis.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    killed_at = time.monotonic()
    during = [f"during-{i}" for i in range(12)]
    for job_id in during:
        register_until_acknowledged(system, job_id, refusals)
    wait_for(lambda: system.redis_restarts >= 1, "the embedded Redis started again")
    assert system.redis.pid != pid
    everything = before + during
    wait_for(lambda: all(running(system, j) for j in everything), "every job running")
    recovered_s = time.monotonic() - killed_at
    for job_id in everything:
        status, job = http(system, "GET", f"/v1/job/{job_id}")
        assert status == 200 and job["ID"] == job_id
        assert len(running(system, job_id)) == 1  # placed once, never twice
    # A write refused while Redis was away says why (or, sent just before, that its answer
    # did not come: it may still be applied, and a retry registers the job again).
    assert all("Redis is unreachable" in r or "did not answer" in r for r in refusals), refusals
    wait_for(
        lambda: all(
            e["Status"] in ("complete", "failed", "canceled")
            for e in http(system, "GET", "/v1/evaluations")[1]
        ),
        "every evaluation terminal",
    )
    assert recovered_s < DEADLINE_S
