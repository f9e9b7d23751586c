"""The compact wire form of a batch of allocations.

Allocations placed or stopped by one plan share almost everything (namespace, eval, job,
version, group, statuses, usually their resources), and they cross the wire several times:
worker -> leader in the plan, then leader -> every replica in the state log. So a batch is
sent grouped: the shared fields once per group ("Shared"), and per allocation only the
fields that differ ("Rows", in ROW_FIELDS order). Decoding copies the group's prototype with
each row's values, several times cheaper than building every record from its JSON; rows and
shared fields are validated and errors name their path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from contracts.allocation import Allocation
from contracts.codec import CodecError, describe, from_wire, json_name, to_lean_wire
from contracts.copying import replacer
from contracts.fast_init import install_fast_inits

ROW_FIELDS = (
    "id",
    "name",
    "node_id",
    "node_name",
    "previous_allocation",
    "next_allocation",
    "create_index",
    "modify_index",
    "alloc_modify_index",
    "create_time",
    "modify_time",
)
_ROW_TYPES = (str, str, str, str, str, str, int, int, int, int, int)
_SHARED_FIELDS = tuple(f.name for f in dataclasses.fields(Allocation) if f.name not in ROW_FIELDS)
_SHARED_KEYS = frozenset(json_name(name) for name in _SHARED_FIELDS)
_GROUP_KEYS = frozenset({"Shared", "Rows"})
_from_row = replacer(Allocation, *ROW_FIELDS)
_shared_of = attrgetter(*_SHARED_FIELDS)
_row_of = attrgetter(*ROW_FIELDS)


def compact_allocs(allocs: Iterable[Allocation]) -> list[dict[str, Any]]:
    groups: dict[tuple[Any, ...], tuple[Allocation, list[list[Any]]]] = {}
    last_key: tuple[Any, ...] | None = None
    rows: list[list[Any]] = []
    for alloc in allocs:
        key = _shared_of(alloc)
        # A batch is mostly long runs of one group: comparing with the previous key (element
        # identity first) is much cheaper than hashing the key (records hash field by field).
        if key != last_key:
            group = groups.get(key)
            if group is None:
                group = groups[key] = (alloc, [])
            last_key, rows = key, group[1]
        rows.append(list(_row_of(alloc)))
    # Shared fields holding their default are left out, whichever encoder asked (plans and
    # log entries are read only by decode_alloc_groups, which fills them in).
    return [{"Shared": _shared_wire(first), "Rows": rows} for first, rows in groups.values()]


def _shared_wire(alloc: Allocation) -> dict[str, Any]:
    return {k: v for k, v in to_lean_wire(alloc).items() if k in _SHARED_KEYS}


@dataclass(frozen=True, slots=True)
class AllocRows:
    """One group of a compact batch, validated but not expanded: the group's shared fields
    as a prototype record (row fields empty) and one row per allocation, in ROW_FIELDS order.

    A follower that needs only some of what a batch says (which nodes gained how much, which
    job the allocations belong to) reads it from here and builds the records later, if ever."""

    proto: Allocation
    rows: list[list[Any]]

    def expand(self) -> list[Allocation]:
        proto = self.proto
        return [_from_row(proto, *row) for row in self.rows]

    def subset(self, rows: list[list[Any]]) -> AllocRows:
        return AllocRows(self.proto, rows)


# Row positions a follower reads without expanding the row.
ROW_ID = ROW_FIELDS.index("id")
ROW_NODE_ID = ROW_FIELDS.index("node_id")
ROW_CREATE_INDEX = ROW_FIELDS.index("create_index")


def decode_alloc_groups(groups: Any, path: str) -> tuple[AllocRows, ...]:
    """The groups of a compact batch, validated (errors name the JSON path) but not expanded."""
    if not isinstance(groups, list):
        raise CodecError(path, f"expected a list, got {describe(groups)}")
    decoded: list[AllocRows] = []
    for g, group in enumerate(groups):
        where = f"{path}[{g}]"
        if type(group) is not dict or group.keys() != _GROUP_KEYS:
            raise CodecError(where, "expected an object with Shared and Rows")
        proto = from_wire(Allocation, {**group["Shared"], "ID": ""}, f"{where}.Shared")
        rows = group["Rows"]
        if not isinstance(rows, list):
            raise CodecError(f"{where}.Rows", f"expected a list, got {describe(rows)}")
        for r, row in enumerate(rows):
            if type(row) is not list or tuple(map(type, row)) != _ROW_TYPES:
                raise CodecError(
                    f"{where}.Rows[{r}]",
                    f"expected [{', '.join(ROW_FIELDS)}] with string ids and integer "
                    f"indexes and times, got {describe(row)}",
                )
        decoded.append(AllocRows(proto, rows))
    return tuple(decoded)


def expand_allocs(groups: Any, path: str) -> tuple[Allocation, ...]:
    allocs: list[Allocation] = []
    for group in decode_alloc_groups(groups, path):
        allocs += group.expand()
    return tuple(allocs)


install_fast_inits(__name__)
