"""The dev agent's own node over real HTTP, as python-nomad's CI meets it: `nomad agent -dev
-node pynomad1` and `nomad init`'s example job placed on that node. Also what a blocked
evaluation's metrics say about the nodes it could not use.

A real system: Ray actors, the embedded Redis, the agent's own node fingerprinted from Ray
and from its data directory's file system, plus two simulated fleets to fail placements on.
"""

from __future__ import annotations

import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from actors.agent.core import FleetSpec
from launch.cli import main as cli
from launch.system import DroverSystem, SystemConfig

MB = 1024 * 1024
NODE = "pynomad1"

# `nomad init -short`'s example job as Nomad 1.9 writes it, the docker driver swapped for the
# mock driver drover runs (drover has no docker driver): no ephemeral_disk block, so the
# group asks for Nomad's default 300 MB of disk. Its network and identity blocks are not
# modelled by drover and are ignored with a warning.
EXAMPLE = """
job "example" {
  group "cache" {
    network {
      port "db" {
        to = 6379
      }
    }

    task "redis" {
      driver = "mock"

      identity {
        env  = true
        file = true
      }

      resources {
        cpu    = 500
        memory = 256
      }
    }
  }
}
"""


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DroverSystem]:
    config = SystemConfig(
        data_dir=Path(tmp_path_factory.mktemp("drover-dev-node")),
        workers=1,
        num_cpus=2,
        real_agents=True,  # as `drover agent -dev`: the machine is a node
        raw_exec=True,
        node_name=NODE,
        fleets=[
            FleetSpec("small", 2, cpu_mhz=1000, memory_mb=4096, node_class="small"),
            FleetSpec(
                "win", 1, cpu_mhz=8000, memory_mb=4096, attributes={"kernel.name": "windows"}
            ),
        ],
        http_addr="127.0.0.1:0",
        heartbeat_ttl_s=5.0,
        heartbeat_s=0.5,
        autoscaler=False,
    )
    with DroverSystem(config) as running:
        yield running


def http(system: DroverSystem, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = orjson.dumps(body) if body is not None else None
    request = urllib.request.Request(system.http_address + path, data=data, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, orjson.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode().strip()


def get(system: DroverSystem, path: str) -> Any:
    status, body = http(system, "GET", path)
    assert status == 200, body
    return body


def wait_for(check: Callable[[], Any], what: str, timeout_s: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def own_node(system: DroverSystem) -> dict[str, Any]:
    (stub,) = [n for n in get(system, "/v1/nodes") if n["Name"] == NODE]
    node: dict[str, Any] = get(system, f"/v1/node/{stub['ID']}")
    return node


def test_the_agents_own_node_is_named_and_offers_disk_and_every_enabled_driver(
    system: DroverSystem,
) -> None:
    node = own_node(system)
    assert node["Status"] == "ready" and node["SchedulingEligibility"] == "eligible"
    # -dev enables raw_exec; the real node lists it with mock and ray.
    assert set(node["Drivers"]) == {"mock", "raw_exec", "ray"}
    assert all(d == {"Detected": True, "Healthy": True} for d in node["Drivers"].values())
    attributes = node["Attributes"]
    assert {k for k in attributes if k.startswith("driver.")} == {
        "driver.mock",
        "driver.raw_exec",
        "driver.ray",
    }
    # Disk: the free space of the file system holding the data directory.
    total = int(attributes["unique.storage.bytestotal"])
    free = int(attributes["unique.storage.bytesfree"])
    assert total == shutil.disk_usage(system.config.data_dir).total
    assert 0 < free <= total and attributes["unique.storage.volume"]
    assert node["NodeResources"]["Disk"]["DiskMB"] == free // MB > 300
    # The other nodes keep their names: the simulated fleets' instances.
    names = sorted(n["Name"] for n in get(system, "/v1/nodes"))
    assert names == sorted([NODE, "small-0000", "small-0001", "win-0000"])


def test_nomad_inits_example_job_runs_on_the_dev_agents_own_node(system: DroverSystem) -> None:
    status, parsed = http(
        system, "POST", "/v1/jobs/parse", {"JobHCL": EXAMPLE, "Canonicalize": True}
    )
    assert status == 200, parsed
    (group,) = parsed["TaskGroups"]
    assert group["EphemeralDisk"]["SizeMB"] == 300  # Nomad's default, the job set none
    # Pinned to the agent's node, as python-nomad's single-node dev agent has no other.
    parsed["Constraints"] = [{"LTarget": "${node.unique.name}", "RTarget": NODE, "Operand": "="}]
    status, body = http(system, "POST", "/v1/jobs", {"Job": parsed})
    assert status == 200, body

    def running() -> Any:
        allocs = get(system, "/v1/job/example/allocations")
        return [a for a in allocs if a["ClientStatus"] == "running"]

    (alloc,) = wait_for(running, "the example job running")
    assert alloc["NodeName"] == NODE and alloc["NodeID"] == own_node(system)["ID"]
    full = get(system, f"/v1/allocation/{alloc['ID']}")
    assert full["AllocatedResources"]["Shared"]["DiskMB"] == 300


def test_a_blocked_evals_metrics_name_the_constraint_and_count_classes(
    system: DroverSystem, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The windows node is filtered by the job's constraint, keyed as Nomad keys it; the two
    `small` nodes and the agent's own (classless) node are exhausted on CPU."""
    job = {
        "ID": "too-big",
        "Constraints": [{"LTarget": "${attr.kernel.name}", "RTarget": "linux", "Operand": "="}],
        "TaskGroups": [
            {
                "Name": "cache",
                "Tasks": [{"Name": "t", "Driver": "mock", "Resources": {"CPU": 3000}}],
            }
        ],
    }
    status, body = http(system, "POST", "/v1/jobs", {"Job": job})
    assert status == 200, body
    eval_id = body["EvalID"]

    def blocked() -> Any:
        ev = get(system, f"/v1/evaluation/{eval_id}")
        return ev if ev["Status"] == "complete" and ev["BlockedEval"] else None

    ev = wait_for(blocked, "the evaluation to block")
    metric = ev["FailedTGAllocs"]["cache"]
    assert metric["ConstraintFiltered"] == {"${attr.kernel.name} = linux": 1}
    assert metric["ClassExhausted"] == {"small": 2}
    assert metric["NodesExhausted"] == 3 and metric["DimensionExhausted"] == {"cpu": 3}
    assert get(system, f"/v1/evaluation/{ev['BlockedEval']}")["Status"] == "blocked"

    monkeypatch.setenv("DROVER_ADDR", system.http_address)
    assert cli(["eval", "status", eval_id]) == 0
    out = capsys.readouterr().out
    assert "Placement Failures" in out and "true" in out
    assert cli(["eval", "status", "-json", eval_id]) == 0
    shown = orjson.loads(capsys.readouterr().out)["FailedTGAllocs"]["cache"]
    assert shown["ConstraintFiltered"] == {"${attr.kernel.name} = linux": 1}
    assert shown["ClassExhausted"] == {"small": 2}
