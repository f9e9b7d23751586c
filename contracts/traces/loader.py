"""One series from a file in any of the series formats, told apart by its first line: the Azure
Functions header, a line without a comma (per-minute counts), or `timestamp,value` pairs.
Parsed once per path, version and bounds."""

from __future__ import annotations

from contracts.traces.nab import read_nab
from contracts.traces.per_minute import AZURE_ID_COLUMNS, read_azure_functions, read_counts
from contracts.traces.series import (
    MAX_BYTES,
    MAX_POINTS,
    ParseCache,
    Series,
    cannot_read,
    not_csv,
)

CACHE = ParseCache()


def detect(path: str) -> str:
    """'azure-functions', 'counts' or 'nab'."""
    try:
        with open(path, newline="", encoding="utf-8") as file:
            first_line = file.readline()
    except OSError as exc:
        raise cannot_read(path, exc) from None
    except UnicodeDecodeError as exc:
        raise not_csv(path, exc) from None
    if first_line.startswith(AZURE_ID_COLUMNS[0]):
        return "azure-functions"
    if "," not in first_line and first_line.strip():
        return "counts"
    return "nab"


def parse_series(path: str, *, max_points: int = MAX_POINTS) -> Series:
    kind = detect(path)
    if kind == "azure-functions":
        return read_azure_functions(path)
    if kind == "counts":
        return read_counts(path, max_points=max_points)
    return read_nab(path, max_points=max_points)


def load_series(path: str, *, max_bytes: int = MAX_BYTES, max_points: int = MAX_POINTS) -> Series:
    return CACHE.get(
        path,
        lambda p: parse_series(p, max_points=max_points),
        max_bytes=max_bytes,
        options=max_points,
    )
