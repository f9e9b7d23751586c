"""Stopping a whole system (real Ray actors, the embedded Redis): bounded even when the
telemetry collector is gone (which never breaks scheduling either), every failure logged
with the actor named and the rest still stopped, and the API's advertised address real while
it serves. Two systems, each shared by two tests: a start costs seconds."""

from __future__ import annotations

import logging
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
import ray
import redis

from actors.agent.core import FleetSpec
from contracts import Job, Resources, Task, TaskGroup
from launch.system import DroverSystem, SystemConfig

ACTORS = {
    "drover-leader",
    "drover-worker-0",
    "drover-agent-sim",
    "drover-autoscaler",
}

STOP_BOUND_S = 25.0
"""stop() with a collector that refuses every export. Before: each actor in turn retried its
span and metric exports for up to 10 s each (about 40 s for these four actors here); now they
stop together and each export has SHUTDOWN_EXPORT_TIMEOUT_S (about 3.5 s here). Generous: the
machine is shared."""


def small_job(job_id: str) -> Job:
    task = Task(name="t", driver="mock", config={"run_for": "1h"}, resources=Resources(cpu=100))
    return Job(
        id=job_id,
        name=job_id,
        datacenters=("dc1",),
        task_groups=(TaskGroup("g", 2, tasks=(task,)),),
    )


def config(tmp_path: Path, **overrides: Any) -> SystemConfig:
    return SystemConfig(
        data_dir=tmp_path,
        workers=1,
        num_cpus=2,
        fleets=[FleetSpec("sim", 2, 4000, 8192)],
        **overrides,
    )


def answers(socket_path: Path) -> bool:
    client = redis.Redis(unix_socket_path=str(socket_path), socket_connect_timeout=2)
    try:
        return bool(client.ping())
    except (redis.RedisError, OSError):
        return False
    finally:
        client.close()


def get(address: str, path: str) -> Any:
    with urllib.request.urlopen(f"http://{address}{path}", timeout=10) as response:
        return orjson.loads(response.read())


@dataclass
class FailingCollector:
    """One system whose actors export to an OTLP collector that is not there, as it
    scheduled and as it was stopped."""

    data_dir: Path
    failed_exports: int = 0  # the leader's failed span exports, seen while it scheduled
    scheduled_after: int = 0  # allocations of a job run once an export had failed
    stop_s: float = 0.0
    shutdown_telemetry: dict[str, Any] = field(default_factory=dict)
    ray_initialized: bool = True


@pytest.fixture(scope="module")
def failing_collector(tmp_path_factory: pytest.TempPathFactory) -> FailingCollector:
    """One system shared by the two tests below (a start costs seconds): nothing listens
    at its OTLP endpoint, and spans are exported every 100 ms (OTEL_BSP_SCHEDULE_DELAY) so
    that exports fail while it schedules. It runs a job, waits for a failed export, runs
    another, and is stopped."""
    seen = FailingCollector(tmp_path_factory.mktemp("failing-collector"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")  # nothing listens
        patch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
        # The workers schedule (a leader scheduling small jobs itself leaves them no spans).
        system = DroverSystem(config(seen.data_dir, leader_schedules=False)).start()
        try:
            client = system.client()
            client.run_job(small_job("traced"))  # spans and metrics in every actor
            client.wait_for_allocs("traced", count=2, status="running")
            leader = system.leader
            deadline = time.monotonic() + 60
            while not (failed := ray.get(leader.telemetry_stats.remote())["spans"].failures):
                assert time.monotonic() < deadline, "no span export failed"
                time.sleep(0.2)
            seen.failed_exports = failed
            client.run_job(small_job("still-going"))
            still = client.wait_for_allocs("still-going", count=2, status="running")
            seen.scheduled_after = len(still)
        finally:
            started = time.monotonic()
            system.stop()
            seen.stop_s = time.monotonic() - started
    # Gathered from each actor as it answered its shutdown, before it was killed.
    seen.shutdown_telemetry = dict(system.shutdown_telemetry)
    seen.ray_initialized = ray.is_initialized()
    return seen


def test_stop_is_bounded_with_a_failing_collector_and_counts_the_failures(
    failing_collector: FailingCollector,
) -> None:
    assert failing_collector.stop_s < STOP_BOUND_S, f"stop() took {failing_collector.stop_s:.1f}s"
    telemetry = failing_collector.shutdown_telemetry
    assert set(telemetry) == ACTORS
    for name, exports in telemetry.items():
        if name == "drover-autoscaler":
            continue  # it traces policy evaluations, and these jobs have no scaling policy
        spans = exports["spans"]
        assert spans.failures >= 1, (name, spans)
        assert spans.last_error is not None, name
    assert sum(e["metrics"].failures for e in telemetry.values()) >= 1
    assert not failing_collector.ray_initialized


def test_a_failing_exporter_never_breaks_scheduling(failing_collector: FailingCollector) -> None:
    # Exports were attempted, and failed, while the system scheduled; it scheduled on.
    assert failing_collector.failed_exports >= 1
    assert failing_collector.scheduled_after == 2
    telemetry = failing_collector.data_dir / "telemetry"
    assert not telemetry.exists() or not list(telemetry.glob("spans-*.jsonl")), (
        "with an OTLP endpoint set, spans go there, not to files"
    )


@dataclass
class Stopped:
    """What one system showed while it served and once it was stopped, with one of its
    actors (drover-worker-0) already dead."""

    status: dict[str, Any] = field(default_factory=dict)  # path: the API's answer, serving
    served: str = ""
    warnings: list[str] = field(default_factory=list)  # launch.system's, during stop()
    shutdown_telemetry: dict[str, Any] = field(default_factory=dict)
    ray_initialized: bool = True
    redis_gone: bool = False
    redis_answers: bool = True
    api_error: Exception | None = None  # asking the API once it was stopped


@pytest.fixture(scope="module")
def stopped(tmp_path_factory: pytest.TempPathFactory) -> Stopped:
    """One system shared by the two tests below (a start costs seconds): it serves the API
    with a configured RPC port, then loses a worker and is stopped."""
    seen = Stopped()
    settings = config(
        tmp_path_factory.mktemp("stopped"),
        tracing=False,
        http_addr="127.0.0.1:0",
        rpc_port=14647,
    )
    system = DroverSystem(settings).start()
    try:
        assert system.redis is not None
        socket_path = system.redis.socket_path
        seen.served = system.http_address.removeprefix("http://")
        for path in ("/v1/status/leader", "/v1/status/peers", "/v1/agent/servers", "/v1/nodes"):
            seen.status[path] = get(seen.served, path)
        ray.kill(system.workers[0], no_restart=True)  # its shutdown call can only fail
    except BaseException:
        system.stop()
        raise
    logger, handler = logging.getLogger("launch.system"), _Records()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    try:
        system.stop()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    seen.warnings = [r.getMessage() for r in handler.records]
    seen.shutdown_telemetry = dict(system.shutdown_telemetry)
    seen.ray_initialized = ray.is_initialized()
    seen.redis_gone = system.redis is None
    seen.redis_answers = answers(socket_path)
    try:
        get(seen.served, "/v1/status/leader")
    except Exception as exc:
        seen.api_error = exc
    return seen


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_stop_logs_each_failure_naming_the_actor_and_stops_the_rest(stopped: Stopped) -> None:
    failures = stopped.warnings
    assert any("drover-worker-0" in m and "already gone" in m for m in failures), failures
    assert set(stopped.shutdown_telemetry) == ACTORS - {"drover-worker-0"}
    assert not stopped.ray_initialized
    assert stopped.redis_gone and not stopped.redis_answers


def test_status_leader_is_the_advertise_host_and_the_configured_rpc_port(stopped: Stopped) -> None:
    """As Nomad reports a server (`<advertise address>:<ports.rpc>`); drover's servers talk
    through Redis, so the port only names the server: clients use the HTTP API."""
    assert stopped.status["/v1/status/leader"] == "127.0.0.1:14647"
    assert stopped.status["/v1/status/peers"] == ["127.0.0.1:14647"]
    assert stopped.status["/v1/agent/servers"] == ["127.0.0.1:14647"]
    assert any(n["Name"].startswith("sim-") for n in stopped.status["/v1/nodes"])
    assert isinstance(stopped.api_error, urllib.error.URLError)  # stopped: nothing serves
