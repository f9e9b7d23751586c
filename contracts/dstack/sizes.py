"""dstack's `Memory` (core/models/resources.py): a size in GB as a float.

Suffixes MB, GB and TB are case-insensitive and spaces are ignored (`"16 Gb"`); a bare number
means GB; `512MB` is 0.5 GB and `1TB` is 1024 GB. A memory range reads each bound on its own,
so `"16GB..32"` is 16..32 GB and `"512..1 TB"` is 512..1024 GB.
"""

from __future__ import annotations

import math
import re

from contracts.dstack.fields import MAX_NUMBER, expect_number, expect_str, number, show
from contracts.dstack.ranges import Range, parse_range
from contracts.errors import ValidationError

_SIZE = re.compile(r"^(\d{1,16}(?:\.\d{0,16})?|\.\d{1,16})(mb|gb|tb)?$")
_GB_PER_UNIT = {"mb": 1 / 1024, "gb": 1.0, "tb": 1024.0, None: 1.0}
MB_PER_GB = 1024


def parse_memory(value: object, where: str) -> float:
    """A size in GB from `16`, `1.5`, `"512MB"`, `"16 GB"`, `"1TB"`."""
    if isinstance(value, str):
        text = expect_str(value, where).replace(" ", "").lower()
        match = _SIZE.match(text)
        if match is None:
            raise ValidationError(
                f"{where}: expected a size such as 512MB, 16GB or 1TB, got {show(value)}"
            )
        size = float(match.group(1)) * _GB_PER_UNIT[match.group(2)]
        if not math.isfinite(size) or size > MAX_NUMBER:
            raise ValidationError(f"{where}: {show(value)} is out of range 0..{MAX_NUMBER}GB")
        return size
    return expect_number(value, where)


def parse_memory_range(value: object, where: str) -> Range[float]:
    """`Range[Memory]`: `"8GB.."`, `"16GB..32"`, `"..1TB"`, `24`, `{min: 512MB, max: 1TB}`."""
    return parse_range(value, where, parse_memory)


def has_unit(token: str) -> bool:
    """dstack's GPU shorthand test for a memory token: it contains a letter (a unit)."""
    return any(char.isalpha() for char in token)


def gb_to_mb(size_gb: float) -> int:
    """Whole megabytes (MiB, as dstack's `memory_mib`) in a size given in GB."""
    return round(size_gb * MB_PER_GB)


def format_gb(size_gb: float) -> str:
    return f"{number(size_gb)}GB"
