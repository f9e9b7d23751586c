"""API errors carry their HTTP status: 400 bad input, 403 token, 404 unknown ID, 409 conflict."""

from __future__ import annotations

from contracts.errors import ConflictError, NotFoundError, ValidationError


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def bad_request(message: str) -> ApiError:
    return ApiError(400, message)


def not_found(message: str) -> ApiError:
    return ApiError(404, message)


def from_exception(exc: Exception) -> ApiError:
    """The status of an error raised by the contracts layer."""
    if isinstance(exc, NotFoundError):
        return ApiError(404, str(exc.args[0] if exc.args else exc))
    if isinstance(exc, ConflictError):
        return ApiError(409, str(exc))
    if isinstance(exc, ValidationError):
        return ApiError(400, str(exc))
    return ApiError(500, f"{type(exc).__name__}: {exc}")
