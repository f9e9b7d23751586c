"""The running system: real Ray actors over a real Redis (embedded), no fakes.

One system serves the module; scenarios use separate node pools and job names so they don't
interfere, and each leaves the system as it found it (every worker up, no plans held), so the
tests pass alone and in any order: the leader restart too, since a restarted leader is the
same system. Collisions and redelivery are forced, not awaited: the leader's plan hold (a
failpoint, `LeaderActor.hold_plans`) keeps plans in flight until the test has what it needs.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
import redis

import launch.system
from actors.agent.core import FleetSpec
from actors.leader.service import STALE_TOKEN
from actors.leader.snapshots import SnapshotPolicy
from actors.runtime.snapshots import SnapshotStore
from actors.streams import StreamBus
from actors.streams.client import connect
from actors.streams.envelope import BadMessage, decode_message, registry_of
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
from contracts.messages import DeadLetter, EvalAck, EvalDelivery, PlanResponse
from launch.system import DroverClient, DroverSystem, SystemConfig

SNAPSHOT_EVERY = 40


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
        # Snapshots come often (a forked child of the leader's Ray process writes each),
        # so that the scenarios run, and the leader restarts, across them.
        snapshot_policy=SnapshotPolicy(every_entries=SNAPSHOT_EVERY),
    )
    with DroverSystem(config) as running:
        yield running


@pytest.fixture(scope="module")
def client(system: DroverSystem) -> DroverClient:
    return system.client()


@pytest.fixture(scope="module")
def store(system: DroverSystem) -> Iterator[redis.Redis]:
    """The system's Redis, to read its streams as they are."""
    r = connect(system.redis_url)
    yield r
    r.close()


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


def messages(store: redis.Redis, stream: str, kind: type) -> list[Any]:
    """Every message of `kind` on `stream`, oldest first (garbage other tests wrote skipped)."""
    found = []
    for _id, fields in store.xrange(stream):
        try:
            found.append(decode_message(fields, registry_of(kind))[1])
        except BadMessage:
            continue
    return found


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
    # One at a time, each healthy after 1 s of running (the deployment's pace).
    update = UpdateStrategy(max_parallel=1, min_healthy_time_s=1.0)
    group = dataclasses.replace(base.task_groups[0], update=update)
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
    system: DroverSystem, client: DroverClient, store: redis.Redis
) -> None:
    """Two workers, two 120-allocation jobs on an empty pool of 200 slots (20 nodes of ten):
    the leader holds the first plan until the second is in, so both were computed on the same
    snapshot, and applies them together. Each fits alone, both cannot: the second applied is
    partially rejected, on every run, and its worker refreshes and retries. The pool ends
    exactly full; what did not fit is blocked."""
    ids = ["crowd-a", "crowd-b"]
    before = ray.get(system.leader.stats.remote())
    refreshes_before = sum(ray.get(w.stats.remote())["refreshes"] for w in system.workers)
    ray.get(system.leader.hold_plans.remote(2, 60.0, ids))
    try:
        client.run_jobs([job(job_id, 120, "crowd", cpu=400, mem=256) for job_id in ids])

        def settled() -> bool:
            for job_id in ids:
                evals = ray.get(system.leader.evals_by_job.remote("default", job_id))
                if not evals or any(e.status is EvalStatus.PENDING for e in evals):
                    return False
            return True

        wait_until(settled, timeout_s=90, what="every eval settled")
    finally:
        ray.get(system.leader.release_plans.remote())  # a no-op once the two were applied
    after = ray.get(system.leader.stats.remote())
    assert after["held_plans"] - before["held_plans"] == 2, "both first plans were held"
    collisions = after["partial_plans"] - before["partial_plans"]
    assert collisions >= 1, after
    refreshes = sum(ray.get(w.stats.remote())["refreshes"] for w in system.workers)
    assert refreshes - refreshes_before >= collisions  # every partially rejected plan retried
    placed = 0
    for job_id in ids:
        live = [a for a in client.allocs(job_id) if not a.terminal()]
        placed += len(live)
        if len(live) < 120:
            evals = ray.get(system.leader.evals_by_job.remote("default", job_id))
            assert any(e.status is EvalStatus.BLOCKED for e in evals), job_id
    assert placed == 200  # the pool is exactly full
    assert overcommitted(system) == []

    # A delivery is settled by the commit of the plan that completed its eval (the leader's
    # broker acks it), or else by its worker's ack once the leader answered the final status
    # (the last one of each worker is acked while the worker idles): none stays outstanding.
    names = StreamNames()

    def answered() -> bool:
        delivered = {
            (d.eval.id, d.token)
            for d in messages(store, names.deliveries, EvalDelivery)
            if d.eval.job_id in ids
        }
        broker = ray.get(system.leader.broker_stats.remote())
        return bool(delivered) and broker["unacked"] == 0

    wait_until(answered, timeout_s=30, what="every delivery acked or nacked")
    broker = ray.get(system.leader.broker_stats.remote())
    worker_acks = {(a.eval_id, a.token) for a in messages(store, names.acks, EvalAck)}
    assert broker["acked_on_commit"] >= 1 and broker["acked"] >= broker["acked_on_commit"]
    # (The leader acks what it scheduled itself: local_scheduling.py.)
    assert broker["acked"] - broker["acked_on_commit"] - broker["acked_local"] <= len(worker_acks)
    for job_id in ids:  # the pool it filled is the module's: later tests place jobs there
        client.stop_job(job_id, purge=True)


def test_bad_stream_messages_go_to_dead_letter_and_consumers_go_on(
    client: DroverClient, store: redis.Redis
) -> None:
    names = StreamNames()
    store.xadd(names.requests, {b"t": b"LeaderRequest", b"b": b"{not json"})
    store.xadd(names.requests, {b"t": b"Bogus", b"b": b"{}"})
    store.xadd(names.acks, {b"garbage": b"1"})
    store.xadd(
        names.requests, {b"t": b"LeaderRequest", b"b": b'{"Kind": "register-job", "RequestID": 7}'}
    )

    def dead_letters() -> list[DeadLetter]:
        rows = StreamBus(store).range(names.dead_letter)
        return [decode_message(r.fields, registry_of(DeadLetter))[1] for r in rows]  # type: ignore[misc]

    letters = wait_until(lambda: len(dead_letters()) >= 4 and dead_letters(), what="dead letters")
    reasons = " | ".join(d.reason for d in letters)
    assert "not valid JSON" in reasons
    assert "unknown message type 'Bogus'" in reasons
    assert "$.RequestID: expected a string, got 7" in reasons
    assert any(d.stream == names.acks for d in letters)
    client.run_job(job("after-garbage", 2, "e2e"))
    client.wait_for_allocs("after-garbage", count=2, timeout_s=30)


def test_killed_worker_delivery_is_redelivered_and_its_late_plan_refused(
    system: DroverSystem, client: DroverClient, store: redis.Redis
) -> None:
    """A worker dies with its plan in flight (held at the leader, so the kill certainly lands
    mid-eval). The broker's nack timeout (3 s here) hands the eval to a worker again under a
    new token; once that plan is in too, the hold ends: the dead worker's plan is refused as
    stale, the redelivered one commits, and the job has its allocations once."""
    names = StreamNames()
    before = ray.get(system.leader.stats.remote())
    delivered_before = ray.get(system.leader.broker_stats.remote())["delivered"]
    ray.get(system.leader.hold_plans.remote(100, 120.0, ["redelivered"]))
    try:
        eval_id = client.run_job(job("redelivered", 3, "e2e", cpu=100, mem=64)).eval_id
        first = wait_until(
            lambda: ray.get(system.leader.held_plans.remote()), what="the first plan held"
        )[0]
        victim = [names.plan_results(f"worker-{i}") for i in range(len(system.workers))].index(
            first.reply_to
        )
        ray.kill(system.workers[victim], no_restart=False)  # mid-eval; Ray restarts it

        def redelivered_plan() -> bool:
            held = ray.get(system.leader.held_plans.remote())
            return any(s.plan.eval_token != first.plan.eval_token for s in held)

        wait_until(redelivered_plan, timeout_s=90, what="the redelivered eval's plan")
    finally:
        ray.get(system.leader.release_plans.remote())
    allocs = client.wait_for_allocs("redelivered", count=3, timeout_s=60)
    assert sorted(a.name for a in allocs) == [f"redelivered.g[{i}]" for i in range(3)]
    assert len(client.allocs("redelivered")) == 3  # one plan committed: never a duplicate

    def complete() -> bool:  # the final status, from whichever worker, reached the leader
        evals = ray.get(system.leader.evals_by_job.remote("default", "redelivered"))
        return bool(evals) and all(e.status is EvalStatus.COMPLETE for e in evals)

    wait_until(complete, timeout_s=30, what="the redelivered eval complete")

    # The broker did redeliver: more deliveries than evaluations, under distinct tokens.
    evals = ray.get(system.leader.evals_by_job.remote("default", "redelivered"))
    deliveries = [
        d for d in messages(store, names.deliveries, EvalDelivery) if d.eval.id == eval_id
    ]
    assert len(deliveries) > len(evals) and len({d.token for d in deliveries}) >= 2
    assert deliveries[0].token == first.plan.eval_token
    assert ray.get(system.leader.broker_stats.remote())["delivered"] - delivered_before >= 2
    # ... and the dead worker's late plan was refused, answered on its reply stream.
    assert ray.get(system.leader.stats.remote())["stale_plans"] > before["stale_plans"]
    refused = [
        r
        for r in messages(store, first.reply_to, PlanResponse)
        if r.eval_id == eval_id and r.attempt == first.attempt
    ]
    assert any(r.error == STALE_TOKEN for r in refused)
    assert overcommitted(system) == []
    ray.get(system.workers[victim].ready.remote())  # back, for the tests that follow


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


def test_the_leaders_snapshots_are_written_by_a_forked_child(
    system: DroverSystem, client: DroverClient, store: redis.Redis
) -> None:
    before = ray.get(system.leader.snapshot_stats.remote())

    def written() -> dict[str, Any] | None:
        stats = ray.get(system.leader.snapshot_stats.remote())
        return stats if stats["written"] > before["written"] else None

    jobs = []
    while written() is None and len(jobs) < SNAPSHOT_EVERY:  # each adds a few entries
        jobs.append(f"snap-{len(jobs)}")
        client.run_job(job(jobs[-1], 2, "crowd", cpu=100, mem=64))
        client.wait_for_allocs(jobs[-1], count=2, timeout_s=30)
    stats = wait_until(written, what="a snapshot written")
    assert stats["failed"] == before["failed"], stats["last_error"]
    assert stats["fork_ms"] > 0
    names = StreamNames(system.config.prefix)
    assert SnapshotStore(store, names).latest_index() >= stats["index"] > before["index"]
    # The leader went on: a job after the snapshot is placed.
    jobs.append("snap-after")
    client.run_job(job("snap-after", 2, "crowd", cpu=100, mem=64))
    assert len(client.wait_for_allocs("snap-after", count=2, timeout_s=30)) == 2
    for job_id in jobs:
        client.stop_job(job_id, purge=True)


def test_ray_workers_keep_the_drivers_pythonpath_after_the_project(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Ray's env_vars replace PYTHONPATH: packages the driver found through it (a `pip
    # install --target` directory) must stay visible to the actors.
    monkeypatch.setenv("PYTHONPATH", "/opt/site")
    root = str(Path(launch.system.__file__).resolve().parents[1])
    assert launch.system._worker_pythonpath() == f"{root}{os.pathsep}/opt/site"
    monkeypatch.delenv("PYTHONPATH")
    assert launch.system._worker_pythonpath() == root


def test_the_default_worker_count_leaves_a_cpu_to_the_leaders_own_scheduling() -> None:
    default_workers = launch.system.default_workers
    assert [default_workers(cpus, True) for cpus in (1, 2, 16)] == [1, 1, 15]
    assert [default_workers(cpus, False) for cpus in (1, 2, 16)] == [1, 2, 16]
