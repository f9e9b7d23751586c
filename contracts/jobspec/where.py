"""Where a problem is: HCL block chains (`job "web" > group "api"`) and JSON paths (`$.Job.ID`).

Both walkers report through the same small interface so messages read naturally in the
format the user wrote: HCL errors name blocks and dotted attributes, JSON errors name paths.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from contracts.codec import describe
from contracts.fast_init import install_fast_inits


@dataclass(slots=True)
class Problems:
    """Collects every error and warning so the user sees them all at once."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class Where(Protocol):
    def child(self, name: str) -> Where: ...
    def index(self, i: int) -> Where: ...
    def at(self, detail: str) -> str: ...
    def unknown(self) -> str: ...
    def missing(self) -> str: ...
    def ignored(self) -> str: ...


def bad_value(where: Where, expected: str, value: object, hint: str = "") -> str:
    """`... resources.memory must be a positive integer, got "lots"`."""
    return where.at(f"must be {expected}, got {describe(value)}{hint}")


@dataclass(frozen=True, slots=True)
class HclWhere:
    """A chain of labelled blocks plus a dotted path inside the innermost one."""

    chain: tuple[str, ...] = ()
    dotted: tuple[str, ...] = ()

    def child(self, name: str) -> HclWhere:
        return HclWhere(self.chain, (*self.dotted, name))

    def index(self, i: int) -> HclWhere:
        *head, last = self.dotted or ("",)
        return HclWhere(self.chain, (*head, f"{last}[{i}]"))

    def labelled(self, block: str, label: str) -> HclWhere:
        """`group "api"`; a labelled block nested in plain ones keeps their dotted prefix."""
        prefix = ".".join(self.dotted)
        element = f'{prefix + "." if prefix else ""}{block} "{label}"'
        return HclWhere((*self.chain, element), ())

    def _head(self) -> str:
        return " > ".join(self.chain) if self.chain else "job file"

    def _field(self) -> str:
        return ".".join(self.dotted)

    def at(self, detail: str) -> str:
        name = self._field()
        return f"{self._head()}: {name} {detail}" if name else f"{self._head()}: {detail}"

    def unknown(self) -> str:
        return f'{self._head()}: unknown field "{self._field()}"'

    def missing(self) -> str:
        return f"{self._head()}: {self._field()} is required"

    def ignored(self) -> str:
        return f'{self._head()}: "{self._field()}" is not supported by drover yet and was ignored'


class JsonWhere:
    """A JSON path as in contracts.codec errors: `$.Job.TaskGroups[0].Count`.

    A walk makes one for every field it reads and words a path only for the few that have a
    problem, so the path is kept as its parent and last step and joined when asked for."""

    __slots__ = ("_parent", "_step")

    def __init__(self, parent: JsonWhere | None = None, step: str = "$") -> None:
        self._parent = parent
        self._step = step

    @property
    def path(self) -> str:
        steps: list[str] = []
        where: JsonWhere | None = self
        while where is not None:
            steps.append(where._step)
            where = where._parent
        return "".join(reversed(steps))

    def child(self, name: str) -> JsonWhere:
        return JsonWhere(self, "." + name)

    def index(self, i: int) -> JsonWhere:
        return JsonWhere(self, f"[{i}]")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JsonWhere) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)

    def __repr__(self) -> str:
        return f"JsonWhere({self.path!r})"

    def at(self, detail: str) -> str:
        return f"{self.path}: {detail}"

    def unknown(self) -> str:
        return f"{self.path}: unknown field"

    def missing(self) -> str:
        return f"{self.path}: required field is missing"

    def ignored(self) -> str:
        return f"{self.path}: not supported by drover yet; ignored"


install_fast_inits(__name__)
