"""bench.api, short: the figures it prints are measured, and a normal client is served
while slow clients hold connections (none of its requests is refused)."""

from __future__ import annotations

from bench import api


def test_a_short_api_run_serves_under_slow_clients() -> None:
    line = api.run(jobs=10, clients=8, slow=300, seconds=1.0)
    assert line["server"] == "asyncio"
    assert line["rps"] > 0 and line["errors"] == 0
    assert 0 < line["p50_ms"] <= line["p99_ms"]
    assert line["slow_connected"] == 300
    assert line["requests_under_slow_clients"] > 0 and line["errors_under_slow_clients"] == 0
    assert line["p99_ms_under_slow_clients"] is not None
