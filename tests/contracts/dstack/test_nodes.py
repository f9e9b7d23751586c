"""Fleet `nodes` (dstack core/models/test_fleets.py::test_parses_nodes / test_rejects_nodes)."""

from __future__ import annotations

import pytest

from contracts.dstack import FleetNodesSpec, parse_nodes
from contracts.errors import ValidationError


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1, FleetNodesSpec(1, 1, 1)),
        ("1..2", FleetNodesSpec(1, 1, 2)),
        ("..2", FleetNodesSpec(0, 0, 2)),
        ("1..", FleetNodesSpec(1, 1, None)),
        ({"min": 1, "max": 2}, FleetNodesSpec(1, 1, 2)),
        ({"min": 1, "target": 2, "max": 3}, FleetNodesSpec(1, 2, 3)),
        ({"target": 2, "max": 3}, FleetNodesSpec(0, 2, 3)),
        ({}, FleetNodesSpec(0, 0, None)),
        (0, FleetNodesSpec(0, 0, 0)),
        ("3", FleetNodesSpec(3, 3, 3)),
        (" 0 .. 8 ", FleetNodesSpec(0, 0, 8)),
        (100_000, FleetNodesSpec(100_000, 100_000, 100_000)),
    ],
)
def test_parses_nodes(value: object, expected: FleetNodesSpec) -> None:
    assert parse_nodes(value) == expected


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("2..1", "nodes: min 2 is greater than max 1 in '2..1'"),
        ({"min": -1}, "nodes.min: -1 is out of range 0..100000"),
        ({"target": -1}, "nodes.target: -1 is out of range 0..100000"),
        (
            {"target": 2, "max": 1},
            "nodes: target 2 is greater than max 1 in {'target': 2, 'max': 1}",
        ),
        ({"min": 2, "max": 1}, "nodes: min 2 is greater than max 1 in {'min': 2, 'max': 1}"),
        (
            {"min": 2, "target": 1},
            "nodes: min 2 is greater than target 1 in {'min': 2, 'target': 1}",
        ),
        ("..", "nodes: empty range in '..'"),
        ("1..2..3", "nodes: expected 'a..b', 'a..' or '..b', got '1..2..3'"),
        (-3, "nodes: -3 is out of range 0..100000"),
        (100_001, "nodes: 100001 is out of range 0..100000"),
        ("..100001", "nodes: 100001 is out of range 0..100000"),
        (True, "nodes: expected a non-negative integer, got True"),
        (2.5, "nodes: expected a non-negative integer, got 2.5"),
        ({"min": 1, "size": 3}, "nodes.size: unknown field (allowed: max, min, target)"),
    ],
)
def test_rejects_nodes(value: object, problem: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_nodes(value)
    assert info.value.problems == [problem]


def test_every_bad_bound_is_reported() -> None:
    with pytest.raises(ValidationError) as info:
        parse_nodes({"min": "a", "target": -1, "max": 10**6})
    assert info.value.problems == [
        "nodes.min: expected a non-negative integer, got 'a'",
        "nodes.target: -1 is out of range 0..100000",
        "nodes.max: 1000000 is out of range 0..100000",
    ]


def test_constructor_checks_order() -> None:
    with pytest.raises(ValidationError, match="nodes: target 3 is greater than max 2"):
        FleetNodesSpec(1, 3, 2)
    assert str(FleetNodesSpec(1, 2, None)) == "1.. (target 2)"
