"""The series readers (NAB pairs, per-minute counts, Azure Functions 2019) and the parse cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from contracts.errors import ValidationError
from contracts.traces.loader import detect, load_series
from contracts.traces.nab import read_nab
from contracts.traces.per_minute import read_azure_functions, read_counts
from contracts.traces.series import ParseCache, check_size


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_nab_with_header_and_iso_dates(tmp_path: Path) -> None:
    csv = write(
        tmp_path / "n.csv", "timestamp,value\n2014-04-01 00:00:00,1\n2014-04-01 00:05:00,2\n"
    )
    series = read_nab(csv)
    assert list(series.offsets) == [0, 300] and list(series.values) == [1, 2]
    assert [series.value_at(t) for t in (-5, 0, 299, 300, 1e9)] == [1, 1, 1, 2, 2]
    assert series.span_s == 300 and len(series) == 2


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("0,1\n1,x\n", "line 2: value 'x' is not a number >= 0"),
        ("0,1\nnoon,2\n", "line 2: timestamp 'noon' is neither seconds"),
        ("3,1\n2,1\n", "line 2: timestamps go back in time"),
        ("", "has no `timestamp,value` points"),
    ],
)
def test_nab_errors_name_file_line_and_field(tmp_path: Path, text: str, problem: str) -> None:
    csv = write(tmp_path / "bad.csv", text)
    with pytest.raises(ValidationError) as error:
        read_nab(csv)
    assert str(error.value).startswith(repr(csv)) and problem in str(error.value)


def test_nab_is_bounded(tmp_path: Path) -> None:
    csv = write(tmp_path / "long.csv", "0,1\n1,1\n2,1\n")
    with pytest.raises(ValidationError, match="more than the 2 points a trace may have"):
        read_nab(csv, max_points=2)
    with pytest.raises(ValidationError, match="more than the 4 a trace may have"):
        check_size(csv, max_bytes=4)


def test_per_minute_counts(tmp_path: Path) -> None:
    path = write(tmp_path / "c.txt", "3\n\n5\n0\n")
    series = read_counts(path)
    assert list(series.offsets) == [0, 60, 120] and list(series.values) == [3, 5, 0]
    bad = write(tmp_path / "bad.txt", "3\n-1\n")
    with pytest.raises(ValidationError, match=r"'.*bad.txt' line 2: count '-1' is not a number"):
        read_counts(bad)


def azure(rows: list[tuple[str, str, list[int]]]) -> str:
    header = "HashOwner,HashApp,HashFunction,Trigger," + ",".join(str(m) for m in range(1, 1441))
    lines = [header]
    for app, function, counts in rows:
        minutes = counts + [0] * (1440 - len(counts))
        lines.append(f"o,{app},{function},http," + ",".join(map(str, minutes)))
    return "\n".join(lines) + "\n"


def test_azure_functions_rows_are_summed_and_filtered(tmp_path: Path) -> None:
    path = write(
        tmp_path / "az.csv", azure([("a1", "f1", [1, 2]), ("a1", "f2", [3]), ("a2", "f3", [10])])
    )
    assert detect(path) == "azure-functions"
    everything = read_azure_functions(path)
    assert len(everything) == 1440 and list(everything.values[:3]) == [14, 2, 0]
    assert list(read_azure_functions(path, app="a1").values[:2]) == [4, 2]
    assert list(read_azure_functions(path, function="f2").values[:2]) == [3, 0]
    with pytest.raises(ValidationError, match="no rows of app 'zz'"):
        read_azure_functions(path, app="zz")


def test_azure_functions_errors(tmp_path: Path) -> None:
    short = write(tmp_path / "short.csv", "HashOwner,HashApp,HashFunction,Trigger,1,2\n")
    with pytest.raises(ValidationError, match="line 1: expected HashOwner,HashApp"):
        read_azure_functions(short)
    text = azure([("a", "f", [1])]).replace(",http,1,", ",http,x,")
    bad = write(tmp_path / "bad.csv", text)
    with pytest.raises(ValidationError, match="line 2: minute 1 'x' is not a number >= 0"):
        read_azure_functions(bad)


def test_the_loader_detects_the_format_and_caches_per_version(tmp_path: Path) -> None:
    path = write(tmp_path / "s.csv", "0,1\n5,2\n")
    first = load_series(path)
    assert load_series(path) is first
    write(tmp_path / "s.csv", "4\n5\n6\n")
    stat = os.stat(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    again = load_series(path)
    assert again is not first and list(again.values) == [4, 5, 6]


def test_the_cache_drops_the_least_recently_used(tmp_path: Path) -> None:
    cache = ParseCache(size=1)
    a, b = write(tmp_path / "a.csv", "0,1\n"), write(tmp_path / "b.csv", "0,2\n")
    first = cache.get(a, read_nab)
    cache.get(b, read_nab)
    assert cache.get(a, read_nab) is not first
    with pytest.raises(ValidationError, match="cannot read '/no/such': No such file"):
        cache.get("/no/such", read_nab)
