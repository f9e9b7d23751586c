"""The CLI's human output: aligned tables and `Key = Value` blocks as Nomad prints them, short
IDs, dates and ages, sorted JSON, and errors as one `drover:` line on stderr."""

from __future__ import annotations

import time

import orjson
import pytest

from launch.cli.output import ago, date, error, key_values, print_json, short, table


def test_tables_align_every_column_to_its_widest_cell_without_trailing_blanks() -> None:
    rendered = table(["ID", "Status", "Note"], [("a1", "running", ""), ("b", "pending", 7)])
    assert rendered.splitlines() == [
        "ID  Status   Note",
        "a1  running",
        "b   pending  7",
    ]
    assert table(["ID", "Status"], []) == "ID  Status"


def test_key_value_blocks_align_on_the_equals_sign() -> None:
    assert key_values([("ID", "web"), ("Submit Date", "-"), ("Stable", "false")]).splitlines() == [
        "ID          = web",
        "Submit Date = -",
        "Stable      = false",
    ]


def test_ids_dates_and_ages_are_short() -> None:
    assert short("0c4be1d3-91d2-7a55-8a81-f62c03e0bd7f") == "0c4be1d3"
    assert date(0) == "-" and ago(0) == "-"  # unset timestamps
    now = time.time_ns()
    assert ago(now - 30 * 10**9) == "30s ago"
    assert ago(now - 130 * 10**9) == "2m ago"
    assert ago(now - 5400 * 10**9) == "1.5h ago"
    assert ago(now + 10**12) == "0s ago"  # a clock ahead of ours is not "in the future"


def test_dates_are_utc_whatever_the_local_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        assert date(1_795_000_000 * 10**9) == "2026-11-18T11:06:40Z"
    finally:
        monkeypatch.undo()
        time.tzset()


def test_json_is_indented_with_sorted_keys_and_errors_are_one_stderr_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    print_json({"b": 1, "a": {"d": [1, 2], "c": None}})
    out = capsys.readouterr().out
    assert (
        out
        == '{\n  "a": {\n    "c": null,\n    "d": [\n      1,\n      2\n    ]\n  },\n  "b": 1\n}\n'
    )
    assert orjson.loads(out) == {"a": {"c": None, "d": [1, 2]}, "b": 1}
    error('job "web" not found')
    assert capsys.readouterr() == ("", 'drover: job "web" not found\n')
