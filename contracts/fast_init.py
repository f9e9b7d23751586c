"""Frozen records built without a call per field.

A frozen dataclass's `__init__` stores every field through `object.__setattr__` (its own
`__setattr__` refuses): a method call per field, ~2.5x what the whole record costs built
as its writable twin (copying.py) — a Job 7.9 -> 2.2 us, measured beside each other. Every
process builds records all the time (the API a job per registration, the leader its
answers, evaluations and plans), so each module of records calls `install_fast_inits` at its
end: every frozen slotted record class defined there whose twin exists gets a generated
`__init__` with the dataclass's own signature (the same parameters, defaults and default
factories) that stores the fields into the twin and hands the record back its class.

Classes the twin cannot serve (a `__post_init__`, inherited slots, an init=False field)
keep the dataclass's `__init__`; so does a subclass that was not made a dataclass of its
own (it is handed to the dataclass's `__init__`, which builds it as what it is). The
dataclass's `__init__` stays in `DATACLASS_INITS`, which the tests hold the generated one
to, class by class.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any

from contracts.copying import writable_twin

DATACLASS_INITS: dict[type, Callable[..., None]] = {}


def install_fast_inits(module_name: str) -> list[type]:
    """Give every frozen slotted dataclass defined in `module_name` a generated `__init__`
    where it can have one; the classes that got one."""
    installed = []
    for value in list(vars(sys.modules[module_name]).values()):
        if (
            isinstance(value, type)
            and value.__module__ == module_name
            and value not in DATACLASS_INITS
            and fast_init_fits(value)
        ):
            _install(value)
            installed.append(value)
    return installed


def fast_init_fits(cls: type) -> bool:
    """A frozen slotted dataclass whose records its twin can build."""
    if not dataclasses.is_dataclass(cls) or "__slots__" not in cls.__dict__:
        return False
    params = cls.__dict__.get("__dataclass_params__")
    if params is None or not params.frozen or not params.init:
        return False
    if any(not f.init for f in dataclasses.fields(cls)):
        return False
    return writable_twin(cls) is not None


def _install(cls: type) -> None:
    fields = dataclasses.fields(cls)
    namespace: dict[str, Any] = {
        "__cls": cls,
        "__twin": writable_twin(cls),
        "__set": object.__setattr__,
        "__type": type,  # a field may be named `type`
        "__dataclass_init": cls.__dict__["__init__"],
        "__no_value": _NO_VALUE,
    }
    positional: list[str] = []
    keyword: list[str] = []
    factories: list[str] = []
    for f in fields:
        # Parameters are named as the fields (so keyword calls read the same); the
        # generated function's own names start with "__", which no field's does.
        param = f.name
        if f.default is not dataclasses.MISSING:
            namespace[f"__default_{f.name}"] = f.default
            param += f"=__default_{f.name}"
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"__factory_{f.name}"] = f.default_factory
            param += "=__no_value"
            factories.append(f.name)
        (keyword if f.kw_only else positional).append(param)
    params = ["__self", *positional, *(["*", *keyword] if keyword else [])]
    body = [f"    if {name} is __no_value: {name} = __factory_{name}()" for name in factories]
    every = ", ".join(f"{f.name}={f.name}" for f in fields)
    body += [
        "    if __type(__self) is not __cls:",
        f"        return __dataclass_init(__self, {every})",
        "    __set(__self, '__class__', __twin)",
        *(f"    __self.{f.name} = {f.name}" for f in fields),
        "    __self.__class__ = __cls",
    ]
    source = f"def __init__({', '.join(params)}) -> None:\n" + "\n".join(body) + "\n"
    exec(source, namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    DATACLASS_INITS[cls] = cls.__dict__["__init__"]
    cls.__init__ = init  # type: ignore[misc]


class _NoValue:
    """A default factory's parameter not given (the factory runs)."""

    def __repr__(self) -> str:
        return "<factory>"


_NO_VALUE = _NoValue()
