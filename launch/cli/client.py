"""The CLI's HTTP client: `DROVER_ADDR` (default http://127.0.0.1:4646), `DROVER_TOKEN`.

Every failure becomes a `CliError` with one line saying what went wrong and where (the HTTP
status and the server's message, or why the agent could not be reached)."""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import quote, urlencode

import orjson

DEFAULT_ADDR = "http://127.0.0.1:4646"


class CliError(Exception):
    """A failure to report as one line on stderr, with a non-zero exit."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def segment(value: str) -> str:
    """A path segment, escaped (job IDs may hold any character)."""
    return quote(value, safe="")


class ApiClient:
    def __init__(self, addr: str | None = None, token: str | None = None) -> None:
        self.addr = (addr or os.environ.get("DROVER_ADDR") or DEFAULT_ADDR).rstrip("/")
        if "://" not in self.addr:
            self.addr = "http://" + self.addr
        self.token = token if token is not None else os.environ.get("DROVER_TOKEN", "")

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: dict[str, Any] | None = None,
        timeout_s: float = 330.0,
    ) -> tuple[Any, int]:
        """(decoded JSON body, X-Nomad-Index) of a call; CliError on any failure."""
        url = self.addr + path
        if query:
            url += "?" + urlencode({k: v for k, v in query.items() if v is not None})
        data = orjson.dumps(body) if body is not None else None
        request = urllib.request.Request(url, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("X-Nomad-Token", self.token)
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                payload = response.read()
                index = int(response.headers.get("X-Nomad-Index") or 0)
        except urllib.error.HTTPError as exc:
            message = exc.read().decode(errors="replace").strip() or exc.reason
            raise CliError(f"{method} {path}: {exc.code} {message}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise CliError(
                f"cannot reach the drover agent at {self.addr} ({reason}); "
                "is `drover agent -dev` running, and is DROVER_ADDR right?"
            ) from None
        return (orjson.loads(payload) if payload else None), index

    def get(self, path: str, **query: Any) -> Any:
        return self.request("GET", path, query=query or None)[0]

    def post(self, path: str, body: Any = None, **query: Any) -> Any:
        return self.request("POST", path, body if body is not None else {}, query or None)[0]

    def delete(self, path: str, **query: Any) -> Any:
        return self.request("DELETE", path, query=query or None)[0]

    def resolve(self, kind: str, prefix: str) -> str:
        """The full ID of an eval, allocation, node or deployment from a unique prefix."""
        plural = {
            "eval": "evaluations",
            "alloc": "allocations",
            "node": "nodes",
            "deployment": "deployments",
        }[kind]
        matches = self.get(f"/v1/{plural}", prefix=prefix, namespace="*")
        ids = [m["ID"] for m in matches]
        if kind == "node" and not ids:
            ids = [m["ID"] for m in self.get("/v1/nodes") if m["Name"] == prefix]
        if len(ids) == 1:
            return str(ids[0])
        if not ids:
            raise CliError(f'no {kind} with ID prefix "{prefix}"')
        raise CliError(f'{kind} prefix "{prefix}" is ambiguous: {len(ids)} matches')
