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


def test_a_short_write_run_measures_what_each_registration_cost_the_server() -> None:
    line = api.run_writes(clients=8, seconds=1.0, leader_turn_ms=2.0)
    assert line["write_rps"] > 0 and line["write_errors"] == 0
    assert 0 < line["write_p50_ms"] <= line["write_p99_ms"]
    # CPU of the serving process per registration: parsing and encoding a job costs tens
    # of microseconds at the very least, and nothing here costs a second.
    assert 10 < line["write_cpu_us"] < 1_000_000
    assert line["write_context_switches"] >= 0 and line["leader_turn_ms"] == 2.0


def test_the_leader_stand_in_answers_each_write_of_a_turn_with_an_index_of_its_own() -> None:
    from contracts.messages import LeaderRequest, RequestKind

    leader = api.TurnLeader(turn_s=0.01)
    try:
        futures = [
            leader.submit(LeaderRequest(RequestKind.REGISTER_JOB, request_id=f"r{i}"))
            for i in range(5)
        ]
        answers = [f.result(timeout=5) for f in futures]
    finally:
        leader.stop()
    assert [a.request_id for a in answers] == [f"r{i}" for i in range(5)]
    assert all(a.ok for a in answers) and len({a.index for a in answers}) == 5
