"""The running system: real Ray actors over a real Redis (embedded), no fakes.

One system serves the module; scenarios use separate node pools so they don't interfere.
Tests run in file order; the leader-restart test comes last.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray

from actors.agent.core import FleetSpec
from actors.streams import StreamBus
from actors.streams.client import connect
from actors.streams.envelope import decode_message, registry_of
from actors.streams.names import StreamNames
from bench.core import overcommitted as audit_overcommitted
from contracts import (
    ClientStatus,
    Constraint,
    EvalStatus,
    Job,
    JobStatus,
    Resources,
    Task,
    TaskGroup,
    UpdateStrategy,
)
from contracts.messages import DeadLetter
from launch.system import DroverClient, DroverSystem, SystemConfig


def fleet(name: str, count: int, pool: str, cpu: int = 4000, mem: int = 8192) -> FleetSpec:
    return FleetSpec(
        name=name, count=count, cpu_mhz=cpu, memory_mb=mem, disk_mb=10_000, node_pool=pool
    )


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DroverSystem]:
    config = SystemConfig(
        data_dir=Path(tmp_path_factory.mktemp("drover")),
        workers=2,
        num_cpus=2,
        fleets=[fleet("e2e", 10, "e2e"), fleet("crowd", 20, "crowd", cpu=4000, mem=8192)],
        heartbeat_ttl_s=3.0,
        heartbeat_s=0.5,
        nack_timeout_s=3.0,
    )
    with DroverSystem(config) as running:
        yield running


@pytest.fixture(scope="module")
def client(system: DroverSystem) -> DroverClient:
    return system.client()


def job(
    job_id: str,
    count: int,
    pool: str,
    *,
    cpu: int = 500,
    mem: int = 256,
    run_for: str = "1h",
    constraints: tuple[Constraint, ...] = (),
) -> Job:
    task = Task(
        name="t",
        driver="mock",
        config={"run_for": run_for},
        resources=Resources(cpu=cpu, memory_mb=mem),
    )
    return Job(
        id=job_id,
        name=job_id,
        node_pool=pool,
        constraints=constraints,
        task_groups=(TaskGroup(name="g", count=count, tasks=(task,)),),
    )


def wait_until(predicate, timeout_s: float = 30.0, what: str = "condition"):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def overcommitted(system: DroverSystem) -> list[str]:
    return audit_overcommitted(
        ray.get(system.leader.nodes.remote()), ray.get(system.leader.allocs.remote())
    )


def test_service_job_runs_then_stops(client: DroverClient) -> None:
    client.run_job(job("web", 10, "e2e"))
    running = client.wait_for_allocs("web", count=10, timeout_s=30)
    assert len({a.name for a in running}) == 10
    assert wait_until(lambda: client.job("web").status is JobStatus.RUNNING, what="job running")

    client.stop_job("web")
    client.wait_for_allocs("web", count=10, status=ClientStatus.COMPLETE, timeout_s=30)
    wait_until(lambda: client.job("web").status is JobStatus.DEAD, what="job dead")
    versions = {v.version: v.status for v in client.job_versions("web")}
    assert versions == {0: JobStatus.RUNNING, 1: JobStatus.DEAD}


def test_rolling_update_replaces_allocations_max_parallel_at_a_time(client: DroverClient) -> None:
    base = job("rolling", 3, "e2e")
    group = dataclasses.replace(base.task_groups[0], update=UpdateStrategy(max_parallel=1))
    client.run_job(base.replace(task_groups=(group,)))
    first = client.wait_for_allocs("rolling", count=3, timeout_s=30)
    task = dataclasses.replace(group.tasks[0], env={"RELEASE": "2"})  # a destructive change
    client.run_job(base.replace(task_groups=(dataclasses.replace(group, tasks=(task,)),)))
    version = client.job("rolling").version

    def rolled_out() -> bool:
        live = [a for a in client.allocs("rolling") if not a.server_terminal()]
        return len(live) == 3 and all(
            a.job_version == version and a.client_status is ClientStatus.RUNNING for a in live
        )

    wait_until(rolled_out, timeout_s=60, what="every allocation on the new version")
    replaced = {a.id for a in first}
    assert all(a.id not in replaced for a in client.wait_for_allocs("rolling", count=3))


def test_concurrent_plans_collide_and_every_job_is_placed_or_blocked(
    system: DroverSystem, client: DroverClient
) -> None:
    """Two workers, a crowded pool and six 40-allocation jobs submitted at once: each worker
    plans on its own replica while the other's plan is in flight, both pick the fullest nodes
    (bin packing), and the leader partially rejects whichever plan comes second; its worker
    refreshes and retries. The pool holds 200 allocations of the 240 asked for. If the
    workers' timing kept every plan apart, the round's jobs are stopped and another goes."""
    before = ray.get(system.leader.stats.remote())
    for round_ in range(4):
        ids = [f"crowd-{round_}-{i}" for i in range(6)]
        client.run_jobs([job(job_id, 40, "crowd", cpu=400, mem=256) for job_id in ids])

        def settled(ids: list[str] = ids) -> bool:
            for job_id in ids:
                evals = ray.get(system.leader.evals_by_job.remote("default", job_id))
                if not evals or any(e.status is EvalStatus.PENDING for e in evals):
                    return False
            return True

        wait_until(settled, timeout_s=60, what="every eval settled")
        after = ray.get(system.leader.stats.remote())
        collisions = after["partial_plans"] - before["partial_plans"]
        if collisions:
            break
        for job_id in ids:
            client.stop_job(job_id)

        def freed(ids: list[str] = ids) -> bool:
            return all(a.server_terminal() for j in ids for a in client.allocs(j))

        wait_until(freed, timeout_s=60, what="the round's jobs stopped")
    assert collisions >= 1, after
    refreshes = sum(ray.get(w.stats.remote())["refreshes"] for w in system.workers)
    assert refreshes >= collisions  # every partially rejected plan was retried
    placed = 0
    for job_id in ids:
        live = [a for a in client.allocs(job_id) if not a.terminal()]
        placed += len(live)
        if len(live) < 40:
            evals = ray.get(system.leader.evals_by_job.remote("default", job_id))
            assert any(e.status is EvalStatus.BLOCKED for e in evals), job_id
    assert placed == 200  # the pool is exactly full
    assert overcommitted(system) == []

    # A worker acks an eval once the leader answered its final status, without waiting for
    # it; the last one of each worker is acked while the worker idles.
    def answered() -> bool:
        broker = ray.get(system.broker.stats.remote())
        return broker["acked"] + broker["nacked"] == broker["delivered"]

    wait_until(answered, timeout_s=10, what="every delivery acked or nacked")


def test_bad_stream_messages_go_to_dead_letter_and_consumers_go_on(
    system: DroverSystem, client: DroverClient
) -> None:
    names = StreamNames()
    redis = connect(system.redis_url)
    redis.xadd(names.requests, {b"t": b"LeaderRequest", b"b": b"{not json"})
    redis.xadd(names.requests, {b"t": b"Bogus", b"b": b"{}"})
    redis.xadd(names.acks, {b"garbage": b"1"})
    redis.xadd(
        names.requests, {b"t": b"LeaderRequest", b"b": b'{"Kind": "register-job", "RequestID": 7}'}
    )

    def dead_letters() -> list[DeadLetter]:
        rows = StreamBus(redis).range(names.dead_letter)
        return [decode_message(r.fields, registry_of(DeadLetter))[1] for r in rows]  # type: ignore[misc]

    letters = wait_until(lambda: len(dead_letters()) >= 4 and dead_letters(), what="dead letters")
    reasons = " | ".join(d.reason for d in letters)
    assert "not valid JSON" in reasons
    assert "unknown message type 'Bogus'" in reasons
    assert "$.RequestID: expected a string, got 7" in reasons
    assert any(d.stream == names.acks for d in letters)
    client.run_job(job("after-garbage", 2, "e2e"))
    client.wait_for_allocs("after-garbage", count=2, timeout_s=30)


def test_killed_worker_delivery_is_redelivered_without_duplicates(
    system: DroverSystem, client: DroverClient
) -> None:
    ids = [f"burst-{i}" for i in range(8)]
    for job_id in ids:
        client.run_job(job(job_id, 3, "e2e", cpu=100, mem=64))
    ray.kill(system.workers[0], no_restart=False)  # dies mid-work; Ray restarts it
    for job_id in ids:
        allocs = client.wait_for_allocs(job_id, count=3, timeout_s=60)
        assert sorted(a.name for a in allocs) == [f"{job_id}.g[{i}]" for i in range(3)]
        live = [a for a in client.allocs(job_id) if not a.terminal()]
        assert len(live) == 3  # no duplicate placements
    assert overcommitted(system) == []


def test_killed_agent_nodes_go_down_and_allocs_are_replaced(
    system: DroverSystem, client: DroverClient
) -> None:
    doomed = system.add_simulated_agent("doomed", [fleet("doomed", 3, "faults")])
    survivor = system.add_simulated_agent("survivor", [fleet("survivor", 3, "faults")])
    ray.get([doomed.ready.remote(), survivor.ready.remote()])
    doomed_nodes = set(ray.get(doomed.node_ids.remote()))
    client.run_job(job("resilient", 6, "faults", cpu=1000, mem=512))
    allocs = client.wait_for_allocs("resilient", count=6, timeout_s=30)
    lost = [a for a in allocs if a.node_id in doomed_nodes]
    assert lost, "some allocations should be on the doomed agent's nodes"

    ray.kill(doomed, no_restart=True)
    nodes_down = lambda: all(  # noqa: E731
        n.status == "down" for n in ray.get(system.leader.nodes.remote()) if n.id in doomed_nodes
    )
    wait_until(nodes_down, timeout_s=30, what="doomed nodes marked down")
    lost_ids = {a.id for a in lost}

    def marked_lost() -> bool:
        current = [a for a in client.allocs("resilient") if a.id in lost_ids]
        return all(a.client_status is ClientStatus.LOST for a in current)

    wait_until(marked_lost, timeout_s=30, what="allocations on the dead nodes marked lost")
    replaced = client.wait_for_allocs("resilient", count=6, timeout_s=60)
    assert all(a.node_id not in doomed_nodes for a in replaced)
    assert not lost_ids & {a.id for a in replaced}


def test_leader_restart_resumes_without_loss_or_duplicates(
    system: DroverSystem, client: DroverClient
) -> None:
    client.run_job(job("pre-restart", 2, "e2e"))
    client.wait_for_allocs("pre-restart", count=2, timeout_s=30)
    index_before = ray.get(system.leader.index.remote())
    stats_before = ray.get(system.leader.stats.remote())
    ray.kill(system.leader, no_restart=False)  # Ray restarts it; it rebuilds from the log
    # The kill is asynchronous: wait for the new incarnation, recognisable by its term.
    wait_until(
        lambda: client.leader_stats()["term"] > stats_before["term"], what="leader restarted"
    )
    assert client.leader_stats()["term"] == stats_before["term"] + 1
    assert client.index() >= index_before
    # Everything committed before the restart is still there.
    assert len(client.wait_for_allocs("pre-restart", count=2, timeout_s=10)) == 2
    client.run_job(job("post-restart", 4, "e2e"))
    allocs = client.wait_for_allocs("post-restart", count=4, timeout_s=60)
    assert sorted(a.name for a in allocs) == [f"post-restart.g[{i}]" for i in range(4)]
    assert overcommitted(system) == []
