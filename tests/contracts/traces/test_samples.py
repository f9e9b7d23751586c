"""Start-delay samples from a CSV column or the CSV inside a .tar.gz (the shape of the GenAI
trace's base-model load latencies): units, blanks, and errors naming file, line and value."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from contracts.errors import ValidationError
from contracts.traces.samples import read_samples

LATENCIES = "alibaba-gentd26/basemodel_update_latency_anon.tar.gz"


def test_a_column_in_its_unit(tmp_path: Path) -> None:
    path = tmp_path / "loads.csv"
    path.write_text("timestamp,value,host\n1,2500,a\n2,,b\n3,500.5,c\n")
    assert read_samples(str(path), unit="ms") == pytest.approx([2.5, 0.5005])
    assert read_samples(str(path), column="timestamp", unit="m") == [60.0, 120.0, 180.0]


def test_the_csv_inside_a_tar_gz(tmp_path: Path) -> None:
    data = b"timestamp_anon,value\n1.0,1000\n2.0,3000\n"
    path = tmp_path / "loads.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        info = tarfile.TarInfo("latency.csv")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    assert read_samples(str(path), unit="ms") == [1.0, 3.0]


@pytest.mark.parametrize(
    ("content", "kwargs", "problem"),
    [
        ("value\n1\nslow\n", {}, "loads.csv:3: value: expected a number >= 0, got 'slow'"),
        ("value\n-1\n", {}, "loads.csv:2: value: expected a number >= 0, got '-1'"),
        ("value\nnan\n", {}, "expected a number >= 0, got 'nan'"),
        ("latency\n1\n", {}, "no column 'value' (the header has latency)"),
        ("value\n\n\n", {}, "no values in column 'value'"),
        ("", {}, "empty file"),
        ("value\n1\n", {"unit": "h"}, "unit: 'h' is not one of s, ms, us, ns, m"),
    ],
)
def test_errors_name_the_file_line_and_value(
    tmp_path: Path, content: str, kwargs: dict[str, str], problem: str
) -> None:
    path = tmp_path / "loads.csv"
    path.write_text(content)
    with pytest.raises(ValidationError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        read_samples(str(path), **kwargs)


def test_missing_and_broken_files(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="cannot read"):
        read_samples(str(tmp_path / "none.csv"))
    broken = tmp_path / "x.tar.gz"
    broken.write_bytes(b"not gzip")
    with pytest.raises(ValidationError, match=r"not a readable \.tar\.gz archive"):
        read_samples(str(broken))


def test_the_shared_genai_load_latencies() -> None:
    from bench.shared import shared_traces

    path = shared_traces() / LATENCIES
    if not path.is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"the shared GenAI trace is missing: {path}")
        pytest.skip(f"the shared GenAI trace is missing: {path}")
    samples = read_samples(str(path), unit="ms")
    assert len(samples) > 1000
    median = sorted(samples)[len(samples) // 2]
    assert 15.0 < median < 30.0  # the reference note's p50: 22.7 s
