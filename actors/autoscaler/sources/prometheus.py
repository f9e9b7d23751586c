"""The `prometheus` metric source: PromQL over Prometheus' HTTP API, as Nomad Autoscaler's
prometheus APM plugin reads it.

A windowed query is `GET /api/v1/query_range` over [start, end] with a step of
max(1 s, window / 100) (Nomad's plugin always steps 1 s; a long window would then ask for
thousands of points), an instant one `GET /api/v1/query` at its end. As in Nomad's plugin,
the result must be one series: none gives no points (the core's "no metrics available"),
several are an error naming the query and the count. Where Nomad fails the whole query on a
NaN value, drover skips NaN and infinite values (a ratio over an idle window is NaN for a
moment; that is no reason to fail the check). Unreachable server, timeout, HTTP error and
Prometheus' `"status": "error"` all become MetricReadError with the reason Prometheus gave.
"""

from __future__ import annotations

import http.client
import json
import math
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from contracts.autoscaling import MetricPoint, MetricQuery, MetricReadError

SOURCE = "prometheus"
MIN_STEP_S = 1.0
POINTS_PER_WINDOW = 100


class PrometheusSource:
    """Reads MetricQuery's against the Prometheus server at `address` (`http://host:9090`,
    Nomad Autoscaler's `apm "prometheus" { config = { address = ... } }`)."""

    def __init__(self, address: str, timeout_s: float = 5.0) -> None:
        if not address.startswith(("http://", "https://")):
            raise ValueError(f"prometheus address: expected http(s)://HOST:PORT, got {address!r}")
        self.address = address.rstrip("/")
        self.timeout_s = timeout_s

    def url(self, query: MetricQuery) -> str:
        """The API call for a query (instant, or a range of at least one step)."""
        if query.instant or query.start_s >= query.end_s:
            params = {"query": query.query, "time": _seconds(query.end_s)}
            return f"{self.address}/api/v1/query?{urllib.parse.urlencode(params)}"
        params = {
            "query": query.query,
            "start": _seconds(query.start_s),
            "end": _seconds(query.end_s),
            "step": _seconds(step_s(query.end_s - query.start_s)),
        }
        return f"{self.address}/api/v1/query_range?{urllib.parse.urlencode(params)}"

    def read(self, query: MetricQuery) -> list[MetricPoint]:
        request = urllib.request.Request(self.url(query), headers={"Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            # Prometheus answers a bad query with 400 and its JSON error body.
            body = exc.read()
            if not body:
                raise MetricReadError(
                    _failed(query.query, f"HTTP {exc.code} {exc.reason}")
                ) from None
        except (OSError, http.client.HTTPException) as exc:  # URLError, timeouts, resets
            reason = getattr(exc, "reason", None) or exc
            raise MetricReadError(
                _failed(query.query, f"{self.address} unreachable: {reason}")
            ) from None
        return parse_response(body, query.query)


def step_s(window_s: float) -> float:
    return max(MIN_STEP_S, window_s / POINTS_PER_WINDOW)


def parse_response(body: bytes | str, query: str) -> list[MetricPoint]:
    """The points of one Prometheus API answer (`/api/v1/query` or `/query_range`): a
    matrix, vector or scalar of at most one series, in time order, NaN and infinities left
    out. MetricReadError for an error answer, several series or a malformed body."""
    try:
        answer = json.loads(body)
    except ValueError:
        raise MetricReadError(_failed(query, "the answer is not JSON")) from None
    if not isinstance(answer, dict):
        raise MetricReadError(_failed(query, "the answer is not a JSON object"))
    if answer.get("status") != "success":
        kind = answer.get("errorType") or "error"
        message = answer.get("error") or f"status {answer.get('status')!r}"
        raise MetricReadError(_failed(query, f"{kind}: {message}"))
    data = answer.get("data")
    if not isinstance(data, dict):
        raise MetricReadError(_failed(query, "the answer has no data"))
    kind, result = data.get("resultType"), data.get("result")
    try:
        if kind == "scalar":
            return _points([result])
        if kind in ("vector", "matrix") and isinstance(result, list):
            if not result:
                return []
            if len(result) > 1:
                raise MetricReadError(
                    f'prometheus query "{query}" returned {len(result)} series, '
                    "only 1 is expected: aggregate it (sum, avg, max...) to one"
                )
            (series,) = result
            return _points([series["value"]] if kind == "vector" else series["values"])
    except (KeyError, TypeError, ValueError, IndexError):
        raise MetricReadError(_failed(query, f"malformed {kind} result")) from None
    raise MetricReadError(_failed(query, f"result type {kind!r} is not supported"))


def _points(pairs: Any) -> list[MetricPoint]:
    points = []
    for at, raw in pairs:
        value = float(raw)  # Prometheus sends values as strings: "1.5", "NaN", "+Inf"
        if math.isfinite(value):
            points.append((float(at), value))
    return points


def _seconds(value: float) -> str:
    return f"{value:.3f}"


def _failed(query: str, reason: str) -> str:
    return f'prometheus query "{query}" failed: {reason}'
