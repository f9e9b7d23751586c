"""Fleet declarations: YAML/JSON keys -> FleetSpec, with errors naming the field and value."""

from __future__ import annotations

import pytest

from actors.api.core.fleets import FLEET_ATTRIBUTE, parse_fleet
from contracts import ValidationError


def test_a_full_declaration() -> None:
    spec = parse_fleet(
        {
            "type": "fleet",
            "name": "gpu-pool",
            "nodes": 8,
            "resources": {
                "cpu": 16,
                "memory": "64GB",
                "disk": "1TB",
                "gpu": {"count": 8, "name": "H100", "memory": "80GB"},
            },
            "datacenter": "dc2",
            "node_class": "gpu",
            "attributes": {"rack": "r1"},
            "meta": {"team": "ml"},
        }
    )
    assert (spec.name, spec.count, spec.cpu_mhz, spec.memory_mb) == ("gpu-pool", 8, 16_000, 65_536)
    assert spec.disk_mb == 1024 * 1024
    assert (spec.gpus, spec.gpu_model, spec.gpu_memory) == (8, "H100", "80GB")
    assert spec.datacenter == "dc2" and spec.node_class == "gpu"
    assert spec.attributes == {"rack": "r1", FLEET_ATTRIBUTE: "gpu-pool"}
    assert spec.meta == {"team": "ml"}


def test_defaults_blocks_and_placement() -> None:
    spec = parse_fleet({"name": "small", "resources": {"cpu": 4, "gpu": "A100:40GB:2"}})
    # dstack's defaults: one instance, 8GB memory, 100GB disk; blocks 1; placement any.
    assert (spec.count, spec.cpu_mhz, spec.memory_mb, spec.disk_mb) == (1, 4000, 8192, 102_400)
    assert (spec.gpus, spec.gpu_model, spec.gpu_memory) == (2, "A100", "40GB")
    assert (spec.blocks, spec.placement, spec.backend) == (1, "any", "simulated")
    cluster = parse_fleet(
        {"name": "c2650", "nodes": 2, "placement": "cluster", "blocks": "auto",
         "resources": {"cpu": "2..", "gpu": 0, "memory": "2GB", "disk": "1GB.."}}
    )  # fmt: skip
    assert (cluster.count, cluster.cpu_mhz, cluster.memory_mb, cluster.gpus) == (2, 2000, 2048, 0)
    assert (cluster.blocks, cluster.placement) == ("auto", "cluster")


def test_an_unnamed_fleet_gets_a_name() -> None:
    assert parse_fleet({"nodes": 1}).name.startswith("fleet-")


def test_a_ray_fleet_takes_what_the_ray_nodes_have() -> None:
    spec = parse_fleet({"name": "ray-gpus", "backend": "ray", "blocks": "auto"})
    assert (spec.backend, spec.blocks, spec.drivers) == ("ray", "auto", ("mock", "ray"))


@pytest.mark.parametrize(
    ("resources", "hint"),
    [
        ({"memory": 16384}, "resources.memory: 16384 has no unit"),
        ({"memory": 16384}, "write 16384MB"),
        ({"cpu": "2400MHz"}, "give CPU cores"),
        ({"gpu": {"count": 4, "name": "A100", "memory": "80 GiB"}}, "write 80GB"),
    ],
)
def test_the_old_fleet_format_says_how_to_write_it_now(resources, hint) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_fleet({"name": "old", "resources": resources})
    assert hint in str(caught.value)


def test_an_instance_that_cannot_be_split_is_an_error_naming_the_shape() -> None:
    with pytest.raises(ValidationError) as caught:
        parse_fleet({"name": "odd", "blocks": "auto", "resources": {"cpu": 6, "gpu": 8}})
    assert "6 CPUs and 8 GPUs" in str(caught.value)


def test_every_problem_is_named_with_its_value() -> None:
    with pytest.raises(ValidationError) as caught:
        parse_fleet(
            {
                "type": "pool",
                "name": "bad name!",
                "nodes": "many",
                "placement": "near",
                "resources": {"cpu": "fast", "memory": "8 lightyears", "gpus": 1},
                "colour": "blue",
            }
        )
    text = str(caught.value)
    for expected in ("type", "'pool'", "name", "'bad name!'", "nodes", "'many'", "placement",
                     "'near'", "resources.cpu", "'fast'", "resources.memory", "lightyears",
                     "gpus", "colour"):  # fmt: skip
        assert expected in text, expected


def test_a_nodes_range_bounds_what_a_cluster_policy_may_scale_the_fleet_to() -> None:
    elastic = parse_fleet({"name": "elastic", "nodes": {"min": 1, "target": 2, "max": 6}})
    assert (elastic.nodes_min, elastic.count, elastic.nodes_max) == (1, 2, 6)
    fixed = parse_fleet({"name": "fixed", "nodes": 3})
    assert (fixed.nodes_min, fixed.count, fixed.nodes_max) == (3, 3, 3)
    open_ended = parse_fleet({"name": "open", "nodes": "2.."})
    assert (open_ended.nodes_min, open_ended.nodes_max) == (2, None)
