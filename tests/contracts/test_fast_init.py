"""Generated constructors (contracts/fast_init.py) build what the dataclass's own `__init__`
builds, for every record class in contracts, and every module of records installs them."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
from typing import Any

import pytest

import contracts
from contracts import Job, TaskGroup
from contracts.fast_init import DATACLASS_INITS, fast_init_fits, install_fast_inits


def _record_classes() -> list[type]:
    """Every frozen slotted dataclass defined in a contracts module."""
    found = []
    for info in pkgutil.walk_packages(contracts.__path__, "contracts."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and value.__module__ == info.name
                and dataclasses.is_dataclass(value)
                and "__slots__" in value.__dict__
                and value.__dict__["__dataclass_params__"].frozen
            ):
                found.append(value)
    return sorted(found, key=lambda c: f"{c.__module__}.{c.__qualname__}")


RECORDS = _record_classes()
FAST = [cls for cls in RECORDS if cls in DATACLASS_INITS]


def test_every_module_of_records_installs_them() -> None:
    missing = [cls.__qualname__ for cls in RECORDS if fast_init_fits(cls) != (cls in FAST)]
    assert not missing, f"no install_fast_inits(__name__) at the end of their module: {missing}"
    assert len(FAST) > 100  # nearly every record: Job, Allocation, the messages...


def _arguments(cls: type) -> dict[str, Any]:
    """A value for every field without a default (a distinct object each: nothing is
    checked on the way in) and a distinct one for half of the others."""
    given: dict[str, Any] = {}
    for i, f in enumerate(dataclasses.fields(cls)):
        no_default = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if no_default or i % 2:
            given[f.name] = object()
    return given


def _built_by_dataclass(cls: type, *args: Any, **kwargs: Any) -> Any:
    record = object.__new__(cls)
    DATACLASS_INITS[cls](record, *args, **kwargs)
    return record


def _fields_alike(cls: type, fast: Any, reference: Any) -> None:
    for f in dataclasses.fields(cls):
        mine, theirs = getattr(fast, f.name), getattr(reference, f.name)
        if f.default_factory is not dataclasses.MISSING and f.name not in _arguments(cls):
            assert type(mine) is type(theirs) and mine == theirs, (cls, f.name)
        else:
            assert mine is theirs, (cls, f.name)


@pytest.mark.parametrize("cls", FAST, ids=lambda c: c.__qualname__)
def test_built_as_the_dataclass_builds_it(cls: type) -> None:
    given = _arguments(cls)
    fast = cls(**given)
    assert type(fast) is cls
    _fields_alike(cls, fast, _built_by_dataclass(cls, **given))
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(fast, dataclasses.fields(cls)[0].name, 1)
    # Positional where the dataclass takes them positionally.
    fields = dataclasses.fields(cls)
    positional = [given[f.name] for f in fields if not f.kw_only and f.name in given]
    if len(positional) == sum(1 for f in fields if not f.kw_only):
        keyword = {f.name: given[f.name] for f in fields if f.kw_only and f.name in given}
        by_position = cls(*positional, **keyword)
        _fields_alike(cls, by_position, _built_by_dataclass(cls, *positional, **keyword))


@pytest.mark.parametrize("cls", FAST, ids=lambda c: c.__qualname__)
def test_the_signature_is_the_dataclasses(cls: type) -> None:
    mine = inspect.signature(cls.__init__).parameters.values()
    theirs = inspect.signature(DATACLASS_INITS[cls]).parameters.values()
    assert [(p.name, p.kind) for p in mine][1:] == [(p.name, p.kind) for p in theirs][1:]


def test_wrong_calls_are_refused_as_the_dataclass_refuses_them() -> None:
    with pytest.raises(TypeError, match="missing"):
        TaskGroup()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        TaskGroup("app", colour="red")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="positional"):
        TaskGroup("app", 1, (), (), (), None, (), {}, None, None, None, 0, 1, 2, 3)  # type: ignore[call-arg]


def test_default_factories_give_each_record_its_own_value() -> None:
    first, second = Job("a", "a"), Job("b", "b")
    assert first.meta == {} and first.meta is not second.meta
    assert Job("c", "c", meta={"k": "v"}).meta == {"k": "v"}


@dataclasses.dataclass(frozen=True, slots=True)
class Awkward:
    """Fields named as builtins and the generated function's collaborators."""

    type: str
    object: int = 0
    cls: str = "c"
    set: tuple[int, ...] = dataclasses.field(default_factory=tuple)
    twin: dict[str, int] = dataclasses.field(default_factory=dict, kw_only=True)


class PlainSubclass(Awkward):
    """Not a dataclass of its own: built by the dataclass's constructor, as itself."""


install_fast_inits(__name__)


def test_fields_named_as_builtins_and_a_plain_subclass() -> None:
    assert Awkward in DATACLASS_INITS
    record = Awkward("t", 1, "k", (2,), twin={"x": 1})
    assert (record.type, record.object, record.cls, record.set, record.twin) == (
        "t",
        1,
        "k",
        (2,),
        {"x": 1},
    )
    assert Awkward("t") == Awkward("t", 0, "c", (), twin={})
    sub = PlainSubclass("s", twin={"y": 2})
    assert type(sub) is PlainSubclass and sub.twin == {"y": 2} and sub.set == ()
    assert PlainSubclass not in DATACLASS_INITS
