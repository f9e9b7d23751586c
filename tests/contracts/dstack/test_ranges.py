"""dstack's Range[T] and Memory (core/models/test_resources.py: TestIntRange, TestMemory,
TestMemoryRange, test_intersect_ranges)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contracts.dstack import Range, intersect, parse_int_range, parse_memory, parse_memory_range
from contracts.errors import ValidationError


def problems_of(parse: Any, value: object) -> list[str]:
    with pytest.raises(ValidationError) as info:
        parse(value, "x")
    return info.value.problems


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1, Range(1, 1)),
        ("1", Range(1, 1)),
        ("1..", Range(1, None)),
        ("..1", Range(None, 1)),
        (" 1 .. 3 ", Range(1, 3)),
        ("0..0", Range(0, 0)),
        ({"min": 1, "max": 3}, Range(1, 3)),
        ({"max": 3}, Range(None, 3)),
        ({"min": "2"}, Range(2, None)),
    ],
)
def test_int_range_parses(value: object, expected: Range[int]) -> None:
    assert parse_int_range(value, "x") == expected


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("..", "x: empty range in '..'"),
        ({}, "x: empty range in {}"),
        ("1...3", "x: expected a non-negative integer, got '.3'"),
        ("1..2..3", "x: expected 'a..b', got '1..2..3'"),
        ("3..1", "x: min 3 is greater than max 1 in '3..1'"),
        ({"min": 3, "max": 1}, "x: min 3 is greater than max 1 in {'min': 3, 'max': 1}"),
        ({"min": 1, "low": 0}, "x.low: unknown field (allowed: max, min)"),
        (-1, f"x: -1 is out of range 0..{10**15}"),
        (True, "x: expected a non-negative integer, got True"),
        ("1.5", "x: expected a non-negative integer, got '1.5'"),
        (10**16, f"x: {10**16} is out of range 0..{10**15}"),
        ("9" * 1001, "x: at most 1000 characters, got 1001"),
    ],
)
def test_int_range_rejects(value: object, problem: str) -> None:
    assert problems_of(parse_int_range, value) == [problem]


def test_both_bad_bounds_are_reported_together() -> None:
    assert problems_of(parse_int_range, {"min": "a", "max": "b"}) == [
        "x.min: expected a non-negative integer, got 'a'",
        "x.max: expected a non-negative integer, got 'b'",
    ]


@pytest.mark.parametrize(
    ("value", "expected"),
    [("512MB", 0.5), ("16 Gb", 16.0), ("1 TB ", 1024.0), (1.5, 1.5), (1, 1.0), ("2", 2.0)],
)
def test_memory_parses(value: object, expected: float) -> None:
    assert parse_memory(value, "x") == expected


@pytest.mark.parametrize("value", ["1.5xb", "GB", "", float("inf"), float("nan"), -1, None])
def test_memory_rejects(value: object) -> None:
    (problem,) = problems_of(parse_memory, value)
    assert problem.startswith("x: ")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("512MB", Range(0.5, 0.5)),
        ("512MB..", Range(0.5, None)),
        ("..1 TB", Range(None, 1024.0)),
        ("512..1 TB", Range(512.0, 1024.0)),
        ("16GB..32", Range(16.0, 32.0)),
        ({"min": "512MB", "max": "1TB"}, Range(0.5, 1024.0)),
    ],
)
def test_memory_range_parses(value: object, expected: Range[float]) -> None:
    assert parse_memory_range(value, "x") == expected


def test_memory_range_rejects_dots_and_order() -> None:
    assert problems_of(parse_memory_range, "...") == [
        "x: expected a size such as 512MB, 16GB or 1TB, got '.'"
    ]
    assert problems_of(parse_memory_range, "32GB..16GB") == [
        "x: min 32 is greater than max 16 in '32GB..16GB'"
    ]


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (Range(1, 2), Range(3, 4), None),
        (Range(None, 1), Range(1, None), Range(1, 1)),
        (Range(1, 3), Range(2, 4), Range(2, 3)),
        (Range(1, None), Range(None, 5), Range(1, 5)),
        (Range(1, None), Range(2, None), Range(2, None)),
        (Range(None, 3), Range(None, 5), Range(None, 3)),
        (Range(1, 2), Range(2, 3), Range(2, 2)),
        (Range(1, 1), Range(2, 2), None),
        (Range(0.5, 8.0), Range(4.0, None), Range(4.0, 8.0)),
    ],
)
def test_intersect_ranges(a: Range[Any], b: Range[Any], expected: Range[Any] | None) -> None:
    assert intersect(a, b) == expected
    assert intersect(b, a) == expected


def test_contains_is_inclusive_and_open_bounds_accept_all() -> None:
    assert [x for x in range(6) if Range(1, 3).contains(x)] == [1, 2, 3]
    assert Range(None, 2).contains(0) and not Range(None, 2).contains(3)
    assert Range(2, None).contains(10**9) and not Range(2, None).contains(1)


def test_str_and_exact() -> None:
    assert [str(Range(1, 1)), str(Range(1, None)), str(Range(None, 2)), str(Range(0.5, 2.0))] == [
        "1",
        "1..",
        "..2",
        "0.5..2",
    ]
    assert Range(3, 3).exact and not Range(3, None).exact


def test_constructor_rejects_empty_and_unordered_ranges() -> None:
    with pytest.raises(ValidationError, match="empty range"):
        Range[int]()
    with pytest.raises(ValidationError, match="min 3 is greater than max 1"):
        Range(3, 1)


bound = st.none() | st.integers(0, 20)


@st.composite
def ranges(draw: st.DrawFn) -> Range[int]:
    low, high = draw(bound), draw(bound)
    if low is None and high is None:
        low = draw(st.integers(0, 20))
    if low is not None and high is not None and low > high:
        low, high = high, low
    return Range(low, high)


@given(ranges(), ranges())
def test_intersection_is_commutative_and_exactly_the_common_points(
    a: Range[int], b: Range[int]
) -> None:
    both = intersect(a, b)
    assert both == intersect(b, a)
    for x in range(-1, 23):
        in_both = a.contains(x) and b.contains(x)
        assert (both is not None and both.contains(x)) == in_both
