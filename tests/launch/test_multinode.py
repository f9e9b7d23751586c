"""Real mode on a 3-node Ray cluster (ray.cluster_utils): one agent per Ray node, each node
fingerprinted from Ray, and tasks run with the `ray` driver on the node they were placed on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import ray
from ray.cluster_utils import Cluster

from contracts import DeviceRequest, Job, Resources, Task, TaskGroup
from launch.system import DroverClient, DroverSystem, SystemConfig


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2})
    cluster.add_node(num_cpus=1)
    cluster.add_node(num_cpus=1, num_gpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, namespace="drover-multinode", log_to_driver=False)
    yield cluster
    ray.shutdown()
    cluster.shutdown()


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


def ray_job(job_id: str, *, gpus: int = 0, count: int = 1) -> Job:
    devices = (DeviceRequest(name="nvidia/gpu", count=gpus),) if gpus else ()
    task = Task(
        name="main",
        driver="ray",
        config={"entrypoint": "time:sleep", "args": [60]},
        resources=Resources(cpu=100, memory_mb=64, devices=devices),
    )
    return Job(id=job_id, name=job_id, task_groups=(TaskGroup("g", count, tasks=(task,)),))


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


def test_gpu_job_lands_on_the_gpu_node_and_runs_as_a_ray_task(system: DroverSystem) -> None:
    client: DroverClient = system.client()
    client.run_job(ray_job("train", gpus=1))
    (alloc,) = client.wait_for_allocs("train", count=1, timeout_s=60)
    nodes = {n.id: n for n in ray.get(system.leader.nodes.remote())}
    assert nodes[alloc.node_id].node_resources.devices, "placed on a node without a GPU"
    assert alloc.allocated_resources.devices[0].device_ids
    # Running means the agent's ray driver sees the Ray task alive (it sleeps 60 s), and
    # Ray only admits that task, which asks for num_gpus=1, on the node with a GPU.
    assert alloc.client_status == "running"


def test_cpu_jobs_spread_over_the_cluster(system: DroverSystem) -> None:
    client = system.client()
    client.run_job(ray_job("web", count=3))
    allocs = client.wait_for_allocs("web", count=3, timeout_s=60)
    assert len({a.node_id for a in allocs}) == 3  # job anti-affinity spreads them
