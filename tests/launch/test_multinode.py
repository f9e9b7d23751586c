"""Real mode on a 3-node Ray cluster (ray.cluster_utils): one agent per Ray node, each node
fingerprinted from Ray, and tasks run with the `ray` driver on the node they were placed on
(each task writes the Ray node it runs on to a file named after its allocation); a task Ray
has not started leaves its allocation pending."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
from ray.cluster_utils import Cluster

from actors.agent.core import TaskState
from actors.agent.ray_driver import RayDriver
from contracts import Constraint, DeviceRequest, Job, Node, Resources, Task, TaskGroup
from launch.system import DroverClient, DroverSystem, SystemConfig

RECORD_NODE = "tests.actors.agent.ray_tasks:record_node"
DEADLINE_S = 60.0
JOBS = ("train", "web", "queued", "witness")


@pytest.fixture(scope="module")
def cluster(cluster_of: Any) -> Iterator[Cluster]:
    head = {"num_cpus": 2}
    with cluster_of(
        "drover-multinode", head, [{"num_cpus": 1}, {"num_cpus": 1, "num_gpus": 1}]
    ) as c:
        yield c


@pytest.fixture(scope="module")
def system(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DroverSystem]:
    config = SystemConfig(
        data_dir=Path(tmp_path_factory.mktemp("multinode")),
        ray_address=cluster.address,
        namespace="drover-multinode",
        workers=1,
        real_agents=True,
    )
    with DroverSystem(config) as running:
        yield running


@pytest.fixture
def client(system: DroverSystem) -> Iterator[DroverClient]:
    """The system's client; every job of this module is stopped when a test ends, so that
    their Ray tasks free the cluster for the next test, in any order."""
    client = system.client()
    yield client
    for job_id in JOBS:
        job = client.job(job_id)
        if job is not None and not job.stop:
            response = client.stop_job(job_id)
            assert response.ok, response


def ray_job(
    job_id: str, out: Path, *, gpus: int = 0, count: int = 1, node_id: str | None = None
) -> Job:
    """A job whose tasks write their Ray node to `out`/<alloc id>, then run for a minute."""
    devices = (DeviceRequest(name="nvidia/gpu", count=gpus),) if gpus else ()
    task = Task(
        name="main",
        driver="ray",
        config={"entrypoint": RECORD_NODE, "args": [str(out), 60]},
        resources=Resources(cpu=100, memory_mb=64, devices=devices),
    )
    pin = (Constraint("${node.unique.id}", node_id, "="),) if node_id else ()
    group = TaskGroup("g", count, constraints=pin, tasks=(task,))
    return Job(id=job_id, name=job_id, task_groups=(group,))


def ran_on(out: Path, alloc_id: str) -> str:
    """The Ray node the allocation's task reported from inside itself."""
    path = out / alloc_id
    deadline = time.monotonic() + DEADLINE_S
    while not path.exists():
        assert time.monotonic() < deadline, f"allocation {alloc_id}'s task never started"
        time.sleep(0.1)
    return path.read_text()


def gpu_node(system: DroverSystem) -> Node:
    (node,) = [n for n in ray.get(system.leader.nodes.remote()) if n.node_resources.devices]
    return node


def test_one_agent_per_ray_node_with_its_resources(system: DroverSystem) -> None:
    assert len(system.agents) == 3
    nodes = ray.get(system.leader.nodes.remote())
    ray_nodes = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    assert {n.id for n in nodes} == ray_nodes
    gpu_nodes = [n for n in nodes if n.node_resources.devices]
    assert len(gpu_nodes) == 1
    (gpus,) = gpu_nodes[0].node_resources.devices
    assert (gpus.vendor, gpus.type, len(gpus.instances)) == ("nvidia", "gpu", 1)
    assert sorted(n.node_resources.cpu for n in nodes) == [1000, 1000, 2000]


def test_gpu_job_lands_on_the_gpu_node_and_runs_as_a_ray_task(
    system: DroverSystem, client: DroverClient, tmp_path: Path
) -> None:
    client.run_job(ray_job("train", tmp_path, gpus=1))
    (alloc,) = client.wait_for_allocs("train", count=1, timeout_s=DEADLINE_S)
    assert alloc.node_id == gpu_node(system).id, "placed on a node without a GPU"
    assert alloc.allocated_resources.devices[0].device_ids
    # Running means the task started (its start marker came back from Ray); the task itself
    # says where: on the GPU node, the only one where Ray admits a task with num_gpus=1.
    assert ran_on(tmp_path, alloc.id) == alloc.node_id


def test_cpu_jobs_spread_over_the_cluster(client: DroverClient, tmp_path: Path) -> None:
    client.run_job(ray_job("web", tmp_path, count=3))
    allocs = client.wait_for_allocs("web", count=3, timeout_s=DEADLINE_S)
    assert len({a.node_id for a in allocs}) == 3  # job anti-affinity spreads them
    for alloc in allocs:  # and each ran where it was placed (alloc.node_id is the Ray node)
        assert ran_on(tmp_path, alloc.id) == alloc.node_id


def test_a_job_whose_ray_task_is_queued_stays_pending_until_it_runs(
    system: DroverSystem, client: DroverClient, tmp_path: Path
) -> None:
    node = gpu_node(system)
    # Something outside drover takes the GPU in Ray: drover still sees it free and places a
    # GPU job there, whose Ray task then waits behind the holder.
    holder_driver = RayDriver(node.id)
    gpu = (DeviceRequest(name="nvidia/gpu", count=1),)
    holder_task = Task(
        name="holder",
        driver="ray",
        config={"entrypoint": "time:sleep", "args": [600]},
        resources=Resources(cpu=0, devices=gpu),
    )
    holder = holder_driver.start("holder", holder_task, {}, time.time())
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not holder_driver.poll(holder, time.time()).running:
            assert time.monotonic() < deadline, "the holder never got the GPU"
            time.sleep(0.1)

        client.run_job(ray_job("queued", tmp_path, gpus=1))
        (alloc,) = client.wait_for_allocs("queued", count=1, status="pending")
        assert alloc.node_id == node.id
        # A job placed after it on the same node runs: its agent, which takes records in log
        # order, has started the queued one too (and used to report it running at once).
        client.run_job(ray_job("witness", tmp_path, node_id=node.id))
        (witness,) = client.wait_for_allocs("witness", count=1, timeout_s=DEADLINE_S)
        assert ran_on(tmp_path, witness.id) == node.id
        (alloc,) = client.allocs("queued")
        assert alloc.client_status == "pending"
        assert not (tmp_path / alloc.id).exists()
    finally:
        holder_driver.stop(holder, time.time())
    # The GPU is free: the queued task starts, and only now is the allocation running.
    (alloc,) = client.wait_for_allocs("queued", count=1, timeout_s=DEADLINE_S)
    assert ran_on(tmp_path, alloc.id) == node.id
    assert holder_driver.poll(holder, time.time()).state is TaskState.COMPLETE


def test_the_embedded_redis_is_served_over_tcp_with_a_password(system: DroverSystem) -> None:
    """With -ray-address the actors (and the agents on every node) get a TCP URL with a
    generated password: what the other tests of this module run on."""
    import redis

    url = system.redis_url
    assert url.startswith("redis://:") and "@" in url and not url.startswith("unix")
    assert system.redis is not None and system.redis.password
    anonymous = url.replace(f":{system.redis.password}@", "")
    with pytest.raises(redis.AuthenticationError):
        redis.Redis.from_url(anonymous).ping()
    assert redis.Redis.from_url(url).ping()
