from __future__ import annotations

import pytest

from observability.text import format_duration, parse_duration, table


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("90s", 90_000_000_000),
        ("5m", 300_000_000_000),
        ("1h30m", 5_400_000_000_000),
        ("250ms", 250_000_000),
        ("1.5s", 1_500_000_000),
        ("2d", 172_800_000_000_000),
        ("10", 10_000_000_000),
        (" 3us ", 3_000),
    ],
)
def test_parse_duration(text: str, ns: int) -> None:
    assert parse_duration(text) == ns


@pytest.mark.parametrize("text", ["", "5 minutes", "m5", "5x", "1h 30m", "-"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_format_duration() -> None:
    assert [format_duration(n) for n in (850_000, 12_340_000, 1_250_000_000, 125e9)] == [
        "850µs",
        "12.3ms",
        "1.25s",
        "2m05s",
    ]


def test_table_aligns_columns() -> None:
    text = table(["NAME", "N"], [["a", "1"], ["longer", "100"]], [False, True])
    assert text.splitlines() == ["NAME      N", "a         1", "longer  100"]
