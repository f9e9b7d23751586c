"""Errors raised at input boundaries (job files, API bodies, stream messages)."""

from __future__ import annotations


class ValidationError(ValueError):
    """One or more problems with an input, each naming the path and the bad value."""

    def __init__(self, problems: list[str] | str) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("; ".join(self.problems))


class ConflictError(ValueError):
    """A check-and-set precondition (EnforceIndex, EnforcePriorVersion) did not hold."""


class NotFoundError(LookupError):
    """An ID that does not exist."""
