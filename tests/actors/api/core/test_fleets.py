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


def test_defaults_and_units() -> None:
    spec = parse_fleet({"name": "small", "resources": {"cpu": "2400MHz", "memory": 512, "gpu": 2}})
    assert (spec.count, spec.cpu_mhz, spec.memory_mb, spec.gpus) == (1, 2400, 512, 2)


def test_every_problem_is_named_with_its_value() -> None:
    with pytest.raises(ValidationError) as caught:
        parse_fleet(
            {
                "type": "pool",
                "name": "bad name!",
                "nodes": "many",
                "resources": {"cpu": "fast", "memory": "8 lightyears", "gpus": 1},
                "colour": "blue",
            }
        )
    text = str(caught.value)
    for expected in (
        "type: expected 'fleet', got 'pool'",
        "name:",
        "'bad name!'",
        "nodes:",
        "'many'",
        "resources.cpu:",
        "resources.memory:",
        "'8 lightyears'",
        "resources.gpus: unknown field",
        "colour: unknown field",
    ):
        assert expected in text, expected
