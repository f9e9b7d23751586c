"""Node fingerprints: deterministic simulated fleets and nodes read from `ray.nodes()`."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from actors.agent.core import (
    FleetSpec,
    builtin_drivers,
    enabled_drivers,
    node_id_for,
    nodes_from_ray,
    simulated_nodes,
)
from actors.agent.core.storage import MB as _MB
from actors.agent.core.storage import Storage
from contracts import DriverInfo, NodeStatus
from contracts.node import compute_node_class
from contracts.share import FLEET_ATTRIBUTE


def test_simulated_nodes_are_deterministic_and_ready() -> None:
    spec = FleetSpec(name="web", count=3, cpu_mhz=4000, memory_mb=8192, disk_mb=50_000)
    nodes = simulated_nodes(spec)
    assert [n.name for n in nodes] == ["web-0000", "web-0001", "web-0002"]
    assert [n.id for n in nodes] == [n.id for n in simulated_nodes(spec)]
    assert nodes[0].id == node_id_for("web-0000") and uuid.UUID(nodes[0].id).version == 5
    assert len({n.id for n in nodes}) == 3
    n = nodes[1]
    assert n.ready() and n.status is NodeStatus.READY
    assert (n.datacenter, n.node_class, n.node_pool) == ("dc1", "", "default")
    assert (n.node_resources.cpu, n.node_resources.memory_mb, n.node_resources.disk_mb) == (
        4000,
        8192,
        50_000,
    )
    # Unsplit instances are one block (blocks: 1), the device group `drover/block/<fleet>`.
    (blocks,) = n.node_resources.devices
    assert blocks.id == "drover/block/web"
    assert [i.id for i in blocks.instances] == ["web-0001/block0"]
    assert n.drivers == {"mock": DriverInfo()}
    attrs = n.attributes
    assert attrs["kernel.name"] == "linux"
    assert attrs["cpu.numcores"] == "4"
    assert attrs["unique.hostname"] == "web-0001"
    assert attrs["driver.mock"] == "1"
    assert n.computed_class == compute_node_class(n) != ""
    # Identical nodes share a class: the scheduler checks feasibility once per class.
    assert len({x.computed_class for x in nodes}) == 1


def test_gpu_fleet_and_overrides() -> None:
    spec = FleetSpec(
        name="gpu",
        count=2,
        cpu_mhz=32_000,
        memory_mb=262_144,
        disk_mb=1_000_000,
        gpus=8,
        gpu_model="H100",
        gpu_memory="80 GiB",
        datacenter="dc2",
        node_class="gpu",
        node_pool="train",
        attributes={"cpu.arch": "arm64", "rack": "r1"},
        meta={"owner": "ml"},
        drivers=("mock", "raw_exec"),
    )
    a, b = simulated_nodes(spec)
    dev, blocks = a.node_resources.devices
    assert blocks.id == "drover/block/gpu" and len(blocks.instances) == 1
    assert dev.id == "nvidia/gpu/H100" and dev.matches("nvidia/gpu")
    assert dev.attributes == {"memory": "80 GiB"}
    assert len(dev.instances) == 8 and len(set(dev.healthy_ids())) == 8
    assert set(dev.healthy_ids()).isdisjoint(b.node_resources.devices[0].healthy_ids())
    assert (a.datacenter, a.node_class, a.node_pool, a.meta) == (
        "dc2",
        "gpu",
        "train",
        {"owner": "ml"},
    )
    assert a.attributes["cpu.arch"] == "arm64" and a.attributes["rack"] == "r1"
    assert set(a.drivers) == {"mock", "raw_exec"}
    plain = simulated_nodes(
        FleetSpec(name="cpu", count=1, cpu_mhz=32_000, memory_mb=262_144, disk_mb=1)
    )
    assert plain[0].computed_class != a.computed_class


RAY_NODES: list[dict[str, Any]] = [
    {
        "NodeID": "a" * 56,
        "Alive": True,
        "NodeManagerAddress": "10.0.0.1",
        "NodeManagerHostname": "head-host",
        "Resources": {
            "CPU": 8.0,
            "memory": 16 * 1024**3,
            "object_store_memory": 4 * 1024**3,
            "node:10.0.0.1": 1.0,
            "node:__internal_head__": 1.0,
        },
        "Labels": {"ray.io/node-id": "a" * 56},
    },
    {
        "NodeID": "b" * 56,
        "Alive": True,
        "NodeManagerAddress": "10.0.0.2",
        "Resources": {
            "CPU": 16.0,
            "GPU": 4.0,
            "accelerator_type:A100": 1.0,
            "memory": 64 * 1024**3 + 123,
        },
        "Labels": {
            "ray.io/node-id": "b" * 56,
            "drover.io/datacenter": "east",
            "drover.io/node-class": "gpu",
            "zone": "z1",
        },
    },
    {"NodeID": "c" * 56, "Alive": False, "Resources": {"CPU": 4.0}},
]


def test_nodes_from_ray() -> None:
    storage = Storage("/dev/vda", 20_000 * _MB, 10_000 * _MB + 5)
    head, gpu = nodes_from_ray(RAY_NODES, mhz_per_cpu=2000, storage=storage)
    assert head.id == "a" * 56 and head.name == "head-host"
    assert (head.node_resources.cpu, head.node_resources.memory_mb) == (16_000, 16_384)
    # Disk: the free space of the agent's file system, with Nomad's storage attributes.
    assert head.node_resources.disk_mb == 10_000 and head.node_resources.devices == ()
    assert head.attributes["unique.storage.volume"] == "/dev/vda"
    assert head.attributes["unique.storage.bytestotal"] == str(20_000 * _MB)
    assert head.attributes["unique.storage.bytesfree"] == str(10_000 * _MB + 5)
    assert head.attributes["unique.ray.node_id"] == "a" * 56
    assert head.attributes["ray.node_ip"] == "10.0.0.1"
    assert head.attributes["ray.head"] == "true"
    assert head.attributes["cpu.numcores"] == "8"
    assert not any(k.startswith("ray.label.") for k in head.attributes)
    assert set(head.drivers) == {"mock", "ray"} and head.ready()

    assert gpu.name == "b" * 56  # no hostname reported: the node ID stands in
    assert gpu.node_resources.memory_mb == 65_536
    (dev,) = gpu.node_resources.devices
    assert dev.id == "nvidia/gpu/A100" and len(dev.healthy_ids()) == 4
    assert (gpu.datacenter, gpu.node_class, gpu.node_pool) == ("east", "gpu", "default")
    assert gpu.attributes["ray.label.zone"] == "z1"
    assert "ray.head" not in gpu.attributes
    assert gpu.computed_class == compute_node_class(gpu)


def test_nodes_from_ray_edge_cases() -> None:
    (n,) = nodes_from_ray([{"NodeID": "x", "Alive": True, "Resources": {"GPU": 1.0}}])
    assert n.node_resources.cpu == 0
    assert n.node_resources.devices[0].id == "nvidia/gpu/unknown"
    (amd,) = nodes_from_ray(
        [
            {
                "NodeID": "y",
                "Alive": True,
                "Resources": {"GPU": 2, "accelerator_type:AMD-Instinct-MI300X": 1},
            }
        ]
    )
    assert amd.node_resources.devices[0].id == "amd/gpu/AMD-Instinct-MI300X"
    assert nodes_from_ray([], drivers=("mock",)) == []
    # Without a storage fingerprint a node offers no disk and has no storage attributes.
    assert n.node_resources.disk_mb == 0
    assert not any(k.startswith("unique.storage.") for k in n.attributes)


def test_nodes_from_ray_list_every_enabled_driver_and_take_a_given_name() -> None:
    head, gpu = nodes_from_ray(
        RAY_NODES, drivers=("mock", "raw_exec", "ray", "mock"), names={"a" * 56: "pynomad1"}
    )
    for node in (head, gpu):
        assert list(node.drivers) == ["mock", "raw_exec", "ray"]
        assert all(node.drivers[d] == DriverInfo() for d in node.drivers)
        assert {k: v for k, v in node.attributes.items() if k.startswith("driver.")} == {
            "driver.mock": "1",
            "driver.raw_exec": "1",
            "driver.ray": "1",
        }
    # `-node NAME` names the agent's own node; its host name stays an attribute.
    assert head.name == "pynomad1" and head.attributes["unique.hostname"] == "head-host"
    assert gpu.name == "b" * 56
    # The name is unique to a node: it does not split the node class.
    (plain,) = nodes_from_ray(RAY_NODES[:1], drivers=("mock", "raw_exec", "ray"))
    assert plain.name == "head-host" and plain.computed_class == head.computed_class


def test_enabled_drivers_leave_out_a_disabled_raw_exec(tmp_path: Path) -> None:
    assert enabled_drivers(builtin_drivers(data_dir=tmp_path)) == ("mock",)
    enabled = builtin_drivers(data_dir=tmp_path, raw_exec_enabled=True)
    assert enabled_drivers(enabled) == ("mock", "raw_exec")


def test_a_fleet_instance_carries_its_fleets_name_whatever_the_spec_attributes_say() -> None:
    """The fleet attribute is how the leader (and `apply_fleet`'s wait) tells a fleet's
    instances; a spec's own attributes cannot move them to another fleet."""
    spec = FleetSpec(
        "web", 1, cpu_mhz=4000, memory_mb=8192, attributes={FLEET_ATTRIBUTE: "other", "rack": "r1"}
    )
    (node,) = simulated_nodes(spec)
    assert node.attributes[FLEET_ATTRIBUTE] == "web"
    assert node.attributes["rack"] == "r1"
