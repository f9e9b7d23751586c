"""A test helper: whether an object is in a reference cycle, which only CPython's cyclic
collector frees (a process that freezes its heap keeps such garbage until a sweep)."""

from __future__ import annotations

import gc
import types
from typing import Any

_OPAQUE = (type, types.ModuleType, types.CodeType)


def in_a_cycle(obj: Any, limit: int = 100_000) -> bool:
    """True if `obj` can reach itself through the objects it refers to. Classes, modules and
    code are not followed, nor a function's globals (they reach half the interpreter): a
    function is followed into its closure and defaults. `limit` bounds the walk."""
    seen: set[int] = set()
    frontier = list(gc.get_referents(obj))
    while frontier and len(seen) < limit:
        item = frontier.pop()
        if item is obj:
            return True
        if id(item) in seen or isinstance(item, _OPAQUE):
            continue
        seen.add(id(item))
        if isinstance(item, types.FunctionType):
            frontier.extend(item.__closure__ or ())
            frontier.extend(item.__defaults__ or ())
        else:
            frontier.extend(gc.get_referents(item))
    return False
