"""Per-minute counts: one number per line (minute 0, 1, 2...), or the Azure Functions 2019
per-minute format (`HashOwner,HashApp,HashFunction,Trigger,1,...,1440`): each row a function's
invocations in each minute of a day, summed per minute over the rows kept (all, or those of one
app and/or one function hash). Each count holds for its minute."""

from __future__ import annotations

import csv
from array import array

from contracts.errors import ValidationError
from contracts.traces.series import MAX_POINTS, Series, cannot_read, count, not_csv, too_many

AZURE_ID_COLUMNS = ("HashOwner", "HashApp", "HashFunction", "Trigger")
MINUTES_PER_DAY = 1440


def per_minute(path: str, counts: array[float]) -> Series:
    if not counts:
        raise ValidationError(f"{path!r} has no per-minute counts")
    offsets = array("d", (60.0 * minute for minute in range(len(counts))))
    return Series(path, offsets, counts)


def read_counts(path: str, *, max_points: int = MAX_POINTS) -> Series:
    counts: array[float] = array("d")
    try:
        with open(path, encoding="utf-8") as file:
            for line, text in enumerate(file, start=1):
                if not text.strip():
                    continue
                if len(counts) == max_points:
                    raise too_many(path, max_points)
                counts.append(count(path, line, text))
    except OSError as exc:
        raise cannot_read(path, exc) from None
    except UnicodeDecodeError as exc:
        raise not_csv(path, exc) from None
    return per_minute(path, counts)


def read_azure_functions(
    path: str, *, app: str | None = None, function: str | None = None
) -> Series:
    totals = array("d", bytes(8 * MINUTES_PER_DAY))
    width = len(AZURE_ID_COLUMNS) + MINUTES_PER_DAY
    kept = 0
    try:
        with open(path, newline="", encoding="utf-8") as file:
            rows = csv.reader(file)
            header = next(rows, [])
            if tuple(header[:4]) != AZURE_ID_COLUMNS or len(header) != width:
                raise ValidationError(
                    f"{path!r} line 1: expected {','.join(AZURE_ID_COLUMNS)},1,...,1440"
                )
            for line, row in enumerate(rows, start=2):
                if not row:
                    continue
                if len(row) != width:
                    raise ValidationError(f"{path!r} line {line}: expected {width} columns")
                if (app is not None and row[1] != app) or (
                    function is not None and row[2] != function
                ):
                    continue
                kept += 1
                for minute, text in enumerate(row[len(AZURE_ID_COLUMNS) :]):
                    totals[minute] += count(path, line, text, f"minute {minute + 1}")
    except OSError as exc:
        raise cannot_read(path, exc) from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise not_csv(path, exc) from None
    if not kept and (app is not None or function is not None):
        raise ValidationError(f"{path!r} has no rows of app {app!r} and function {function!r}")
    return per_minute(path, totals)
