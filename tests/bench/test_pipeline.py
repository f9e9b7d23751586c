"""bench.pipeline checks the leader's placed counter against the allocations it fetches and
says so loudly: the check on hand-made runs, then one tiny run through the real system."""

from __future__ import annotations

import dataclasses

import orjson
import pytest

from bench import pipeline
from bench.core import make_nodes
from bench.pipeline import check_run, pool_holds
from contracts import AllocatedResources, Allocation, ClientStatus, DesiredStatus, NodeStatus

NODES = make_nodes(4, seed=1)
SMALL = AllocatedResources(cpu=100, memory_mb=256)


def placed(jobs: int, count: int) -> list[Allocation]:
    """What a sound run leaves: every job's count, spread over the nodes."""
    return [
        Allocation(
            id=f"a-{j}-{k}",
            name=f"job-{j:04d}.app[{k}]",
            node_id=NODES[(j + k) % len(NODES)].id,
            job_id=f"job-{j:04d}",
            task_group="app",
            allocated_resources=SMALL,
            client_status=ClientStatus.RUNNING,
        )
        for j in range(jobs)
        for k in range(count)
    ]


def test_a_sound_run_passes_the_check() -> None:
    figures, problems = check_run(2, 3, 6, placed(2, 3), NODES)
    assert problems == []
    assert figures["live_allocs"] == figures["expected_placements"] == 6
    assert figures["overcommitted_nodes"] == figures["nodes_down"] == 0


def test_a_counter_ahead_of_the_records_is_reported() -> None:
    allocs = placed(2, 3)[:-1]
    _, problems = check_run(2, 3, 6, allocs, NODES)
    assert any("5 live allocation(s) fetched, the placed counter says 6" in p for p in problems)
    assert any("job(s) without 3 live allocation(s) (job-0001: 2)" in p for p in problems)


def test_a_counter_short_of_the_workload_is_reported() -> None:
    allocs = placed(2, 3)[:-1]
    _, problems = check_run(2, 3, 5, allocs, NODES)
    assert any("the placed counter says 5, the workload is 6" in p for p in problems)


def test_a_lost_allocation_replaced_during_the_run_is_reported() -> None:
    # A node that missed its heartbeats: its allocation is lost and placed again elsewhere,
    # so the counter counts one placement more than the workload, the records one terminal.
    allocs = placed(2, 3)
    lost = dataclasses.replace(allocs[0], client_status=ClientStatus.LOST)
    stopped = dataclasses.replace(allocs[1], desired_status=DesiredStatus.STOP)
    replacements = [dataclasses.replace(a, id=a.id + "-again") for a in (allocs[0], allocs[1])]
    down = [dataclasses.replace(NODES[0], status=NodeStatus.DOWN), *NODES[1:]]
    figures, problems = check_run(2, 3, 8, [lost, stopped, *allocs[2:], *replacements], down)
    assert figures["live_allocs"] == 6 and figures["terminal_allocs"] == 2
    assert any("the placed counter says 8, the workload is 6" in p for p in problems)
    assert any("6 live allocation(s) fetched, the placed counter says 8" in p for p in problems)
    assert any("1 node(s) not ready" in p for p in problems)


def test_an_overcommitted_node_is_reported() -> None:
    allocs = placed(2, 3)
    huge = dataclasses.replace(allocs[0], allocated_resources=AllocatedResources(cpu=10**6))
    figures, problems = check_run(2, 3, 6, [huge, *allocs[1:]], NODES)
    assert figures["overcommitted_nodes"] == 1
    assert any("1 overcommitted node(s)" in p for p in problems)


def test_a_workload_the_pool_cannot_hold_is_refused() -> None:
    # 40 allocations of bench.core's shape per node; the constrained (even) jobs only on the
    # linux half.
    assert pool_holds(4, 2, 40) == 80
    assert pool_holds(4, 1, 100) == 80  # one constrained job: the linux half only
    with pytest.raises(ValueError, match="hold at most 80"):
        pipeline.run(4, 1, 100, workers=1, timeout_s=1)
    with pytest.raises(SystemExit) as exited:
        pipeline.main(["--nodes", "4", "--jobs", "1", "--count", "100"])
    assert exited.value.code == 2


def test_a_failed_check_exits_non_zero_after_the_json_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def failing(*_: object) -> dict[str, object]:
        return {"bench": "pipeline", "ok": False, "problems": ["run 1: something is off"]}

    monkeypatch.setattr(pipeline, "run", failing)
    with pytest.raises(SystemExit) as exited:
        pipeline.main(["--nodes", "4", "--jobs", "1", "--count", "1"])
    assert exited.value.code == 1
    out, err = capsys.readouterr()
    assert orjson.loads(out)["ok"] is False
    assert "CHECK FAILED: run 1: something is off" in err


def test_a_tiny_run_through_the_system_checks_out_on_the_default_heartbeats() -> None:
    result = pipeline.run(4, 2, 3, workers=1, timeout_s=120, repeat=1, inprocess_repeat=1)
    assert result["problems"] == [] and result["ok"] is True
    assert result["placements"] == result["live_allocs"] == result["expected_placements"] == 6
    assert (result["heartbeat_s"], result["heartbeat_ttl_s"]) == (2.0, 10.0)
    assert result["light_heartbeats"] is False
