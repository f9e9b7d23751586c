"""`drover apply -f`, `ps`, `run status` and `stop` against a canned API: what goes out, what
is printed, and bad files refused before anything is sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

RUN = {
    "Name": "iperf",
    "Status": "running",
    "Nodes": 2,
    "Priority": 50,
    "StopCriteria": "all-done",
    "SubmitTime": 0,
    "Waiting": {},
    "Ranks": [
        {"Rank": 0, "AllocID": "a0a0a0a0-1", "Instance": "c-0000", "Fleet": "c", "Blocks": "2/2",
         "GPUs": 0, "ClientStatus": "running"},
    ],
}  # fmt: skip


def test_apply_refuses_files_that_are_neither_a_fleet_nor_a_task(
    cli: Any, canned: Any, tmp_path: Path
) -> None:
    service = tmp_path / "service.yaml"
    service.write_text("type: service\nname: web\n")
    code, _, err = cli("-address", canned.address, "apply", "-f", str(service))
    assert code == 1 and err == f"drover: {service}: type: expected fleet or task, got 'service'\n"
    code, _, err = cli("-address", canned.address, "apply", "-f", str(tmp_path / "none.yaml"))
    assert code == 1 and "No such file or directory" in err
    assert canned.requests == []


def test_a_task_file_is_sent_with_its_directory_and_the_api_refusal_names_the_file(
    cli: Any, canned: Any, tmp_path: Path
) -> None:
    task = tmp_path / "task.yaml"
    task.write_text("type: task\nname: iperf\nnodes: 2\ncommands: [echo hi]\n")
    canned.answer(
        "POST", "/v1/runs", {"Name": "iperf", "EvalID": "e1e2e3e4-x", "JobModifyIndex": 7}
    )
    code, out, _ = cli("-address", canned.address, "apply", "-f", str(task))
    assert code == 0 and out.startswith('Run "iperf" submitted (evaluation e1e2e3e4)')
    (sent,) = canned.requests
    assert sent.body == {
        "Run": {"name": "iperf", "nodes": 2, "commands": ["echo hi"]},
        "WorkingDir": str(tmp_path.resolve()),
    }
    canned.answer("POST", "/v1/runs", "nodes: expected an integer from 1, got 0", status=400)
    code, _, err = cli("-address", canned.address, "apply", "-f", str(task))
    assert code == 1 and err.startswith(f"drover: {task}: POST /v1/runs: 400 nodes:")


def test_ps_run_status_and_stop(cli: Any, canned: Any) -> None:
    canned.answer("GET", "/v1/runs", [RUN])
    code, out, _ = cli("-address", canned.address, "ps")
    assert code == 0 and out.splitlines()[1].split()[:4] == ["iperf", "running", "2", "c-0000"]
    canned.answer("GET", "/v1/run/iperf", RUN)
    code, out, _ = cli("-address", canned.address, "run", "status", "iperf")
    assert "Status        = running" in out and "a0a0a0a0  c-0000" in out
    canned.answer("POST", "/v1/run/iperf/stop", {"Name": "iperf", "EvalID": "f0f1f2f3-y"})
    code, out, _ = cli("-address", canned.address, "stop", "iperf")
    assert (code, out) == (0, 'Run "iperf" stopping (evaluation f0f1f2f3)\n')


def test_fleet_delete_drains_then_waits_for_the_fleet_to_go(cli: Any, canned: Any) -> None:
    canned.answer("DELETE", "/v1/fleet/gpu", {"Name": "gpu", "Draining": 2, "DeadlineSeconds": 600})
    left = {"Name": "gpu", "Instances": [{}, {}], "Allocs": 1}
    canned.answer_in_turn("GET", "/v1/fleets", [[left], [left], []])
    code, out, _ = cli(
        "-address", canned.address, "fleet", "delete", "-deadline", "600", "-poll", "0.01", "gpu"
    )
    assert code == 0
    assert out == (
        'Fleet "gpu" deleting: 2 instances draining\n'
        "    2 instances left, 1 allocations on them\n"
        "    2 instances left, 1 allocations on them\n"
        'Fleet "gpu" deleted\n'
    )
    assert canned.requests[0].query == {"deadline": "600"}

    code, out, _ = cli("-address", canned.address, "fleet", "delete", "-force", "-detach", "gpu")
    assert (code, out) == (0, 'Fleet "gpu" deleting: 2 instances draining\n')
    assert canned.requests[-1].query == {"force": "true"}
