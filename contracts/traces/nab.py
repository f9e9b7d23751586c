"""`timestamp,value` CSV series, as the Numenta Anomaly Benchmark (NAB) ships them.

A timestamp is a number of seconds (any origin) or an ISO 8601 date and time
(`2014-04-01 00:05:00`; naive ones are read as UTC: only differences matter). A first line whose
value is not a number is a header. Timestamps never go back; values are numbers >= 0.
"""

from __future__ import annotations

import csv
from array import array

from contracts.errors import ValidationError
from contracts.traces.series import (
    MAX_POINTS,
    Series,
    cannot_read,
    count,
    not_csv,
    number,
    timestamp,
    too_many,
)


def read_nab(path: str, *, max_points: int = MAX_POINTS) -> Series:
    offsets: array[float] = array("d")
    values: array[float] = array("d")
    first = previous = 0.0
    try:
        with open(path, newline="", encoding="utf-8") as file:
            for line, row in enumerate(csv.reader(file), start=1):
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue
                if len(row) != 2:
                    raise ValidationError(f"{path!r} line {line}: expected `timestamp,value`")
                if not values and line == 1 and number(row[1]) is None:
                    continue  # the header
                value = count(path, line, row[1], "value")
                stamp = timestamp(row[0])
                if stamp is None:
                    raise ValidationError(
                        f"{path!r} line {line}: timestamp {row[0].strip()!r} is neither seconds"
                        " nor an ISO 8601 date and time"
                    )
                if not values:
                    first = previous = stamp
                elif stamp < previous:
                    raise ValidationError(f"{path!r} line {line}: timestamps go back in time")
                if len(values) == max_points:
                    raise too_many(path, max_points)
                previous = stamp
                offsets.append(stamp - first)
                values.append(value)
    except OSError as exc:
        raise cannot_read(path, exc) from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise not_csv(path, exc) from None
    if not values:
        raise ValidationError(f"{path!r} has no `timestamp,value` points")
    return Series(path, offsets, values)
