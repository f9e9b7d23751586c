"""Generated copies (contracts/copying.py) equal `dataclasses.replace`, whatever the fields
are named and whatever the record's class."""

from __future__ import annotations

import dataclasses

import pytest

from contracts import EvalStatus, Evaluation, Job
from contracts.copying import replaced, replacer


@dataclasses.dataclass(frozen=True, slots=True)
class Named:
    src: int
    obj: int = 2
    cls: str = "c"


class Unslotted(Named):
    """A subclass without slots of its own: copied through its constructor."""


def test_fields_named_as_the_generated_functions_locals_are_copied_right() -> None:
    record = Named(1)
    assert replacer(Named, "src")(record, 5) == dataclasses.replace(record, src=5)
    assert replaced(record, obj=7, cls="d") == Named(1, 7, "d")


def test_a_subclass_copies_as_itself() -> None:
    copy = replaced(Unslotted(1), src=3)
    assert type(copy) is Unslotted and copy == dataclasses.replace(Unslotted(1), src=3)


@dataclasses.dataclass(frozen=True, slots=True)
class Derived:
    """A slotted record with a field its constructor sets (init=False), no __post_init__."""

    value: int
    cache: int = dataclasses.field(default=0, init=False, compare=False)


def test_a_field_the_constructor_sets_is_set_again_not_copied() -> None:
    record = Derived(1)
    object.__setattr__(record, "cache", 99)  # as a record that filled its cache
    copy = replacer(Derived, "value")(record, 2)
    expected = dataclasses.replace(record, value=2)
    assert copy == expected and copy.cache == expected.cache == 0
    with pytest.raises(ValueError, match=r"\['cache'\] are init=False"):
        replacer(Derived, "cache")


def test_records_copy_as_dataclasses_replace_does() -> None:
    job = Job(id="web", name="web")
    assert job.replace(stop=True, version=3) == dataclasses.replace(job, stop=True, version=3)
    ev = Evaluation(id="e", namespace="default", job_id="web")
    assert replaced(ev, status=EvalStatus.COMPLETE) == dataclasses.replace(
        ev, status=EvalStatus.COMPLETE
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Extended(Named):
    """Slots of its own for its new field only: built through its constructor."""

    more: int = 0


def test_a_copy_is_of_its_own_class_and_frozen_and_twins_only_where_layouts_allow() -> None:
    from contracts.copying import writable_twin

    copy = replacer(Named, "src")(Named(1), 5)
    assert type(copy) is Named and copy == Named(5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        copy.src = 6  # type: ignore[misc]
    assert writable_twin(Named) is not None and writable_twin(Named) is writable_twin(Named)
    assert writable_twin(Extended) is None and writable_twin(Unslotted) is None
    extended = replaced(Extended(1, more=2), src=3)
    assert type(extended) is Extended and extended == Extended(3, more=2)
