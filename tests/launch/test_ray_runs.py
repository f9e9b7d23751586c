"""Runs on a real multi-node Ray cluster (ray.cluster_utils, 3 nodes with 2 CPUs and 2 GB
each, one with 2 logical GPUs): a Ray-backed fleet (the cluster's nodes, one instance each),
ranks as Ray tasks pinned to their nodes, and the user's code shipped with Ray's runtime_env.

- dstack #2650 verbatim: a 2-node task with `cpu: 1..`, `memory: 1GB..`, `gpu: 0` on the
  `placement: cluster`, `blocks: auto` fleet runs on two whole GPU-less instances (2/2 busy);
  rank 1 reaches rank 0 over TCP at DROVER_MASTER_NODE_IP.
- Code that exists only in a temporary directory (the task file's, or a Nomad job file's)
  runs on every node: the API uploads it, as `ray job submit` does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
from ray.cluster_utils import Cluster

from launch.cli import main as cli
from launch.system import DroverSystem, SystemConfig

GB = 1024**3

RANKS = """\
import json, os, pathlib, socket, time

def main():
    out = pathlib.Path(os.environ["OUT"])
    rank = int(os.environ["DROVER_NODE_RANK"])
    seen = {k: v for k, v in os.environ.items() if k.startswith(("DSTACK_", "DROVER_", "CUDA_"))}
    import ray
    seen["RAY_NODE"] = ray.get_runtime_context().get_node_id()
    (out / f"rank-{rank}.json").write_text(json.dumps(seen))
    port = int(os.environ["ECHO_PORT"])
    if os.environ["DROVER_NODES_NUM"] == "1":
        pass  # nobody to echo with
    elif rank == 0:
        server = socket.create_server(("0.0.0.0", port))
        connection, _ = server.accept()
        connection.sendall(connection.recv(100))
        connection.close()
    else:
        for _ in range(300):
            try:
                client = socket.create_connection((os.environ["DROVER_MASTER_NODE_IP"], port), 1)
                break
            except OSError:
                time.sleep(0.1)
        client.sendall(b"rank 1 over TCP")
        (out / "echo").write_bytes(client.recv(100))
    while not (out / "go").exists():
        time.sleep(0.05)
"""

HELLO = """\
import os, pathlib

def main():
    pathlib.Path(os.environ["OUT"], os.environ["DROVER_ALLOC_ID"]).write_text("hello")
"""


@pytest.fixture(scope="module")
def cluster(cluster_of: Any) -> Iterator[Cluster]:
    head = {"num_cpus": 2, "memory": 2 * GB}
    workers = [{"num_cpus": 2, "memory": 2 * GB}, {"num_cpus": 2, "memory": 2 * GB, "num_gpus": 2}]
    with cluster_of("drover-ray-runs", head, workers) as c:
        yield c


@pytest.fixture(scope="module")
def system(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DroverSystem]:
    config = SystemConfig(
        data_dir=Path(tmp_path_factory.mktemp("ray-runs")),
        ray_address=cluster.address,
        namespace="drover-ray-runs",
        workers=1,
        real_agents=True,
        http_addr="127.0.0.1:0",
    )
    with DroverSystem(config) as running:
        yield running


@pytest.fixture(scope="module")
def ray_fleet(system: DroverSystem, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("fleet") / "fleet.yaml"
    path.write_text(
        "type: fleet\nname: ray-cluster\nbackend: ray\nplacement: cluster\nblocks: auto\n"
    )
    assert cli(["-address", system.http_address, "apply", "-f", str(path)]) == 0
    return "ray-cluster"


def test_a_ray_fleet_is_the_clusters_nodes_split_into_blocks(drover, e2e, ray_fleet: str) -> None:
    fleet = e2e.json_of(drover, "fleet", "status", ray_fleet)
    assert fleet["Backend"] == "ray" and fleet["Ready"] == 3
    assert sorted(i["Busy"] for i in fleet["Instances"]) == ["0/2 busy"] * 3
    ray_nodes = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    assert {i["NodeID"] for i in fleet["Instances"]} == ray_nodes


def test_a_second_ray_fleet_is_refused(drover, ray_fleet: str, tmp_path: Path) -> None:
    """The cluster's nodes are one fleet's instances at a time."""
    other = tmp_path / "other.yaml"
    other.write_text("type: fleet\nname: other-ray\nbackend: ray\n")
    code, _, err = drover("apply", "-f", str(other))
    assert code == 1
    assert f'already the instances of fleet "{ray_fleet}": delete it first' in err


def test_issue_2650_on_a_ray_cluster(drover, e2e, ray_fleet: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "ranks.py").write_text(RANKS)  # only here: shipped with runtime_env
    task = tmp_path / "task.yaml"
    task.write_text(
        "type: task\nname: iperf-ray\nnodes: 2\n"
        "resources: {cpu: 1.., memory: 1GB.., gpu: 0}\n"
        "entrypoint: ranks:main\n"
        f"env: {{OUT: {out}, ECHO_PORT: '{e2e.free_port()}'}}\n"
    )
    code, _, err = drover("apply", "-f", str(task))
    assert code == 0, err
    e2e.wait_for(lambda: (out / "echo").exists(), "rank 1's echo from rank 0")
    assert (out / "echo").read_bytes() == b"rank 1 over TCP"
    run = e2e.wait_for(
        lambda: (
            (r := e2e.json_of(drover, "run", "status", "iperf-ray"))["Status"] == "running" and r
        ),
        "both ranks reported running",
    )
    assert {r["Blocks"] for r in run["Ranks"]} == {"2/2"}
    fleet = e2e.json_of(drover, "fleet", "status", ray_fleet)
    busy = {i["NodeID"]: i["Busy"] for i in fleet["Instances"]}
    placed = {r["NodeID"] for r in run["Ranks"]}
    assert all(busy[node] == "2/2 busy" for node in placed) and len(placed) == 2
    ranks = [json.loads((out / f"rank-{rank}.json").read_text()) for rank in (0, 1)]
    by_rank = {r["Rank"]: r for r in run["Ranks"]}
    for rank, env in enumerate(ranks):
        # Each rank ran as a Ray task on the node it was placed on.
        assert env["RAY_NODE"] == by_rank[rank]["NodeID"]
        assert env["DSTACK_NODE_RANK"] == env["DROVER_NODE_RANK"] == str(rank)
        assert env["DSTACK_NODES_NUM"] == "2" and env["DSTACK_GPUS_NUM"] == "0"
    assert ranks[0]["DSTACK_MASTER_NODE_IP"] == ranks[1]["DSTACK_MASTER_NODE_IP"]
    (out / "go").touch()
    e2e.wait_for(
        lambda: e2e.json_of(drover, "run", "status", "iperf-ray")["Status"] == "done", "done"
    )


def test_a_gpu_rank_gets_its_share_of_the_logical_gpus(drover, e2e, ray_fleet: str, tmp_path: Path):
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "ranks.py").write_text(RANKS)
    task = tmp_path / "task.yaml"
    task.write_text(
        "type: task\nname: one-gpu\nresources: {cpu: 1, memory: 1GB.., gpu: 1}\n"
        f"entrypoint: ranks:main\nenv: {{OUT: {out}, ECHO_PORT: '{e2e.free_port()}'}}\n"
    )
    assert drover("apply", "-f", str(task))[0] == 0
    env = e2e.wait_for(
        lambda: (out / "rank-0.json").exists() and json.loads((out / "rank-0.json").read_text()),
        "the GPU rank",
    )
    assert env["DSTACK_GPUS_PER_NODE"] == "1"
    assert len(env["CUDA_VISIBLE_DEVICES"].split(",")) == 1  # Ray's pick of the 2 GPUs
    run = e2e.json_of(drover, "run", "status", "one-gpu")
    assert [r["Blocks"] for r in run["Ranks"]] == ["1/2"] and run["Ranks"][0]["GPUs"] == 1
    (out / "go").touch()
    e2e.wait_for(
        lambda: e2e.json_of(drover, "run", "status", "one-gpu")["Status"] == "done", "done"
    )


def test_a_nomad_job_ships_its_directory_to_every_node(drover, e2e, tmp_path: Path) -> None:
    """`drover job run` of a `ray` task whose module exists only next to the job file: the
    CLI makes that directory the working_dir, the API uploads it; every node imports it."""
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "hello.py").write_text(HELLO)
    job = tmp_path / "hello.nomad"
    job.write_text(
        'job "hello" {\n  type = "batch"\n  group "g" {\n    count = 3\n'
        '    constraint { operator = "distinct_hosts"  value = "true" }\n'
        '    task "t" {\n      driver = "ray"\n      config { entrypoint = "hello:main" }\n'
        f'      env {{ OUT = "{out}" }}\n'
        "      resources {\n        cpu = 100\n        memory = 64\n      }\n    }\n  }\n}\n"
    )
    code, _, err = drover("job", "run", "-detach", str(job))
    assert code == 0, err
    e2e.wait_for(lambda: len(list(out.iterdir())) == 3, "three allocations on three nodes")
    assert {p.read_text() for p in out.iterdir()} == {"hello"}
