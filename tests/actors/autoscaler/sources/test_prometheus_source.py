"""The prometheus source without a server: Prometheus' answers parsed (matrix, vector, scalar,
one series or none, NaN/Inf skipped, errors), the URLs it asks, and a server that is not
there or does not answer. The real server: tests/launch/test_prometheus.py."""

from __future__ import annotations

import socket
import time
from urllib.parse import parse_qs, urlsplit

import orjson
import pytest

from actors.autoscaler.sources import PrometheusSource
from actors.autoscaler.sources.prometheus import parse_response, step_s
from contracts.autoscaling import MetricQuery, MetricReadError


def answer(kind: str, result: object) -> bytes:
    return orjson.dumps({"status": "success", "data": {"resultType": kind, "result": result}})


def test_a_matrix_of_one_series_gives_its_points_without_nan_or_inf() -> None:
    body = answer(
        "matrix",
        [
            {
                "metric": {"job": "web"},
                "values": [[100, "1.5"], [101.5, "NaN"], [102, "+Inf"], [103, "-2e3"]],
            }
        ],
    )
    assert parse_response(body, "q") == [(100.0, 1.5), (103.0, -2000.0)]


def test_vector_and_scalar_answers() -> None:
    vector = answer("vector", [{"metric": {}, "value": [1700000000.25, "42"]}])
    assert parse_response(vector, "q") == [(1700000000.25, 42.0)]
    assert parse_response(answer("scalar", [5, "0.5"]), "q") == [(5.0, 0.5)]


def test_no_series_is_no_points() -> None:
    assert parse_response(answer("matrix", []), "q") == []
    assert parse_response(answer("vector", []), "q") == []


def test_several_series_is_an_error_naming_the_query_and_count() -> None:
    two = [{"metric": {"a": "1"}, "values": [[1, "1"]]}, {"metric": {"a": "2"}, "values": []}]
    with pytest.raises(MetricReadError, match=r'query "up" returned 2 series, only 1'):
        parse_response(answer("matrix", two), "up")


def test_prometheus_errors_carry_its_message() -> None:
    body = orjson.dumps(
        {"status": "error", "errorType": "bad_data", "error": "1:5: parse error: unclosed"}
    )
    with pytest.raises(MetricReadError) as caught:
        parse_response(body, "sum(")
    assert str(caught.value) == (
        'prometheus query "sum(" failed: bad_data: 1:5: parse error: unclosed'
    )


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"<html>", "not JSON"),
        (b"[]", "not a JSON object"),
        (b'{"status": "success"}', "no data"),
        (answer("matrix", [{"metric": {}}]), "malformed matrix"),
        (answer("vector", [{"metric": {}, "value": ["x", "y"]}]), "malformed vector"),
        (answer("string", [1, "a"]), "'string' is not supported"),
    ],
)
def test_malformed_answers_are_read_errors(body: bytes, reason: str) -> None:
    with pytest.raises(MetricReadError, match=reason):
        parse_response(body, "q")


def test_urls_for_windowed_and_instant_queries() -> None:
    source = PrometheusSource("http://prom:9090/")
    window = urlsplit(source.url(MetricQuery("prometheus", "sum(up)", 1000.0, 1060.0)))
    assert window.path == "/api/v1/query_range"
    assert parse_qs(window.query) == {
        "query": ["sum(up)"],
        "start": ["1000.000"],
        "end": ["1060.000"],
        "step": ["1.000"],
    }
    instant = urlsplit(source.url(MetricQuery("prometheus", "up", 1060.0, 1060.0, instant=True)))
    assert instant.path == "/api/v1/query"
    assert parse_qs(instant.query) == {"query": ["up"], "time": ["1060.000"]}
    assert step_s(3600) == 36.0 and step_s(10) == 1.0
    with pytest.raises(ValueError, match="http"):
        PrometheusSource("prom:9090")


def test_an_absent_server_is_a_read_error() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    source = PrometheusSource(f"http://127.0.0.1:{port}", timeout_s=2.0)
    with pytest.raises(MetricReadError, match=r'query "up" failed: .*unreachable: .*refused'):
        source.read(MetricQuery("prometheus", "up", 0.0, 0.0, instant=True))


def test_a_server_that_does_not_answer_times_out() -> None:
    with socket.socket() as silent:  # accepts connections (backlog) but never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        port = silent.getsockname()[1]
        source = PrometheusSource(f"http://127.0.0.1:{port}", timeout_s=0.3)
        started = time.monotonic()
        with pytest.raises(MetricReadError, match="timed out"):
            source.read(MetricQuery("prometheus", "up", 0.0, 10.0))
        assert time.monotonic() - started < 3.0
