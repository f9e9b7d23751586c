"""Samples of a duration (start delays, model-load times) from one column of a CSV file, or of
the first CSV inside a `.tar.gz` (as the GenAI trace ships its base-model load latencies).

Values are converted to seconds by `unit`; blank cells are skipped; anything else that is not
a non-negative number is an error naming the file, the line and the value. Bounded: at most
MAX_SAMPLES values and MAX_BYTES of file."""

from __future__ import annotations

import csv
import io
import math
import tarfile
from collections.abc import Iterable
from typing import IO

from contracts.errors import ValidationError
from contracts.traces.series import MAX_BYTES, cannot_read, check_size

MAX_SAMPLES = 1_000_000
UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9, "m": 60.0}


def read_samples(path: str, *, column: str = "value", unit: str = "s") -> list[float]:
    """The non-blank values of `column`, in seconds."""
    if unit not in UNITS:
        raise ValidationError(f"unit: {unit!r} is not one of {', '.join(UNITS)}")
    check_size(path, MAX_BYTES)
    try:
        if path.endswith((".tar.gz", ".tgz")):
            with tarfile.open(path, "r:gz") as archive:
                member = next((m for m in archive if m.isfile() and m.name.endswith(".csv")), None)
                if member is None:
                    raise ValidationError(f"{path}: the archive holds no .csv file")
                raw = archive.extractfile(member)
                assert raw is not None  # a regular file always extracts
                with io.TextIOWrapper(raw, encoding="utf-8", newline="") as text:
                    return _column(f"{path}:{member.name}", text, column, UNITS[unit])
        with open(path, encoding="utf-8", newline="") as file:
            return _column(path, file, column, UNITS[unit])
    except OSError as exc:
        raise cannot_read(path, exc) from None
    except (tarfile.TarError, EOFError) as exc:
        raise ValidationError(f"{path}: not a readable .tar.gz archive: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{path}: not a UTF-8 CSV file: {exc}") from None


def _column(where: str, file: IO[str], column: str, scale: float) -> list[float]:
    rows: Iterable[list[str]] = csv.reader(file)
    header = next(iter(rows), None)
    if header is None:
        raise ValidationError(f"{where}: empty file, expected a header with {column!r}")
    names = [h.strip() for h in header]
    if column not in names:
        raise ValidationError(f"{where}: no column {column!r} (the header has {', '.join(names)})")
    k = names.index(column)
    values: list[float] = []
    for line, row in enumerate(rows, start=2):
        cell = row[k].strip() if k < len(row) else ""
        if not cell:
            continue
        try:
            value = float(cell)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value >= 0):
            raise ValidationError(
                f"{where}:{line}: {column}: expected a number >= 0, got {cell[:40]!r}"
            )
        if len(values) >= MAX_SAMPLES:
            raise ValidationError(f"{where}: more than {MAX_SAMPLES} samples")
        values.append(value * scale)
    if not values:
        raise ValidationError(f"{where}: no values in column {column!r}")
    return values
