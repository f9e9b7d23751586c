"""`drover job ...` against a drover cluster in process (real scheduling, real HTTP): the
monitor's output and exit codes (placed, placement failures), `job plan`'s exit codes and the
`-check-index` it suggests, warnings, and the text of reads the HTTP tests do not look at.
(`tests/launch/test_http_api.py` covers -preserve-counts, revert, history and the 409.)"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

Cli = Callable[..., tuple[int, str, str]]
SHORT = r'"[0-9a-f]{8}"'
DATE = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


def job_file(
    tmp_path: Path, job_id: str, *, count: int = 2, cpu: int = 100, extra: str = ""
) -> str:
    path = tmp_path / f"{job_id}.nomad"
    path.write_text(
        f"""
job "{job_id}" {{
  datacenters = ["dc1"]
  group "g" {{
    count = {count}
    task "t" {{
      driver = "mock"
      config {{ run_for = "1h" }}
      {extra}
      resources {{
        cpu    = {cpu}
        memory = 64
      }}
    }}
  }}
}}
"""
    )
    return str(path)


def wait_for_eval(cli: Cli, eval_id: str, timeout_s: float = 60.0) -> dict[str, object]:
    deadline = time.monotonic() + timeout_s
    while True:
        code, out, _ = cli("eval", "status", "-json", eval_id)
        assert code == 0
        evaluation: dict[str, object] = orjson.loads(out)
        if evaluation["Status"] == "complete":
            return evaluation
        assert time.monotonic() < deadline, f"eval {eval_id} still {evaluation['Status']}"
        time.sleep(0.05)


def detached_eval(out: str) -> str:
    match = re.search(r"Evaluation ID: ([0-9a-f-]{36})", out)
    assert match is not None, out
    return match.group(1)


def test_run_monitors_the_eval_and_its_allocations_until_they_run(
    agent_cli: Cli, tmp_path: Path
) -> None:
    code, out, err = agent_cli("job", "run", job_file(tmp_path, "placed"))
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert re.fullmatch(rf"==> Monitoring evaluation {SHORT}", lines[0])
    assert lines[1] == '    Evaluation triggered by job "placed"'
    created = [line for line in lines if "created: node" in line]
    assert len(created) == 2
    assert all(
        re.fullmatch(rf'    Allocation {SHORT} created: node {SHORT}, group "g"', line)
        for line in created
    )
    assert re.search(rf'==> Evaluation {SHORT} finished with status "complete"\n', out)
    assert lines[-1] == "    Allocations: 2 running"  # followed until none is pending

    code, out, _ = agent_cli("job", "status", "placed")
    assert code == 0
    head, summary, allocs = out.split("\n\n")
    assert re.search(r"^ID +  = placed$", head, re.M)
    assert re.search(rf"^Submit Date = {DATE}$", head, re.M)
    assert summary.splitlines()[1:] == [
        "Task Group  Queued  Starting  Running  Failed  Complete  Lost  Unknown",
        "g           0       0         2        0       0         0     0",
    ]
    rows = allocs.splitlines()[2:]
    assert len(rows) == 2 and all(row.split()[2:6] == ["g", "0", "run", "running"] for row in rows)

    code, out, _ = agent_cli("job", "status")
    header, *rows = out.splitlines()
    assert header.split() == ["ID", "Type", "Priority", "Status", "Submit", "Date"]
    (row,) = [r for r in rows if r.startswith("placed ")]
    assert row.split()[1:4] == ["service", "50", "running"] and re.search(DATE, row)
    # Columns are aligned: every row's Type starts under the header's.
    assert all(r.index(r.split()[1]) == header.index("Type") for r in rows)


def test_a_run_that_cannot_place_says_why_and_exits_2(agent_cli: Cli, tmp_path: Path) -> None:
    too_big = job_file(tmp_path, "huge", cpu=100_000)
    code, out, _ = agent_cli("job", "run", too_big)
    assert code == 2
    assert 'finished with status "complete" but failed to place all allocations:' in out
    assert '    Task Group "g" (failed to place allocations):' in out
    assert '      * Dimension "cpu" exhausted on 3 nodes' in out
    assert re.search(rf"    Evaluation {SHORT} waiting for additional capacity", out)
    assert "Allocations:" not in out  # nothing placed, nothing to follow

    code, out, _ = agent_cli("job", "plan", too_big)
    assert code == 1  # Nomad's: allocations would be created (or fail)
    assert "- WARNING: Failed to place all allocations." in out
    assert '  Task Group "g" (failed to place allocations):' in out


def test_plan_exits_0_when_nothing_changes_and_its_check_index_guards_the_run(
    agent_cli: Cli, tmp_path: Path
) -> None:
    path = job_file(tmp_path, "planned")
    code, out, _ = agent_cli("job", "run", "-detach", path)
    assert code == 0 and out.startswith("Job registration successful\n")
    wait_for_eval(agent_cli, detached_eval(out))

    code, out, _ = agent_cli("job", "plan", path)
    assert code == 0, out
    assert '    Task Group: "g" (2 ignore)' in out
    assert "- All tasks successfully allocated." in out

    path = job_file(tmp_path, "planned", count=3)
    code, out, _ = agent_cli("job", "plan", path)
    assert code == 1 and '+/- Job: "planned"' in out
    assert '    Task Group: "g" (1 create, 2 in-place update)' in out
    index = re.search(r"Job Modify Index: (\d+)", out)
    assert index is not None and f"drover job run -check-index {index[1]} {path}" in out
    code, out, err = agent_cli("job", "run", "-detach", "-check-index", index[1], path)
    assert (code, err) == (0, "")
    wait_for_eval(agent_cli, detached_eval(out))
    code, out, _ = agent_cli("job", "inspect", "planned")
    assert orjson.loads(out)["Job"]["TaskGroups"][0]["Count"] == 3
    # The job moved on since that plan: the same index is now refused.
    code, _, err = agent_cli("job", "run", "-detach", "-check-index", index[1], path)
    assert code == 1 and "409" in err and err.count("\n") == 1


def test_missing_versions_events_and_jobs_are_one_line_errors_or_empty_reads(
    agent_cli: Cli, tmp_path: Path
) -> None:
    code, out, _ = agent_cli("job", "run", "-detach", job_file(tmp_path, "brief"))
    assert code == 0
    code, out, _ = agent_cli("job", "scaling-events", "brief")
    assert (code, out) == (0, 'No scaling events found for job "brief"\n')
    code, _, err = agent_cli("job", "inspect", "-version", "7", "brief")
    assert (code, err) == (1, 'drover: job "brief" has no version 7\n')
    code, out, _ = agent_cli("job", "status", "-namespace", "nowhere")
    assert (code, out) == (0, "No running jobs\n")

    code, out, _ = agent_cli("job", "stop", "-purge", "-detach", "brief")
    assert code == 0 and detached_eval(out)
    code, _, err = agent_cli("job", "status", "brief")
    assert code == 1 and err.count("\n") == 1 and "404" in err  # purged: gone


def test_blocks_drover_does_not_model_are_run_with_a_warning(
    agent_cli: Cli, tmp_path: Path
) -> None:
    template = 'template {\n        data        = "x"\n        destination = "local/x"\n      }'
    path = job_file(tmp_path, "warned", extra=template)
    code, _, err = agent_cli("job", "run", "-detach", path)
    assert code == 0
    assert err == (
        f'drover: warning: {path}: job "warned" > group "g" > task "t": '
        '"template" is not supported by drover yet and was ignored\n'
    )


EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def sections(out: str) -> dict[str, list[str]]:
    """`job status` output by section title (the header under ""): each section's lines."""
    blocks = out.strip("\n").split("\n\n")
    found = {"": blocks[0].splitlines()}
    for block in blocks[1:]:
        title, *lines = block.splitlines()
        found[title] = lines
    return found


def test_status_of_a_periodic_job_lists_its_launched_children(agent_cli: Cli) -> None:
    """Nomad's outputPeriodicInfo: the next launch, the Children Job Summary and the
    Previously Launched Jobs (read with /v1/jobs?prefix=<id>/periodic-)."""
    assert agent_cli("job", "run", "-detach", str(EXAMPLES / "periodic.nomad"))[0] == 0
    code, out, _ = agent_cli("job", "status", "report")
    assert code == 0 and "No instances of periodic job found" in out
    assert agent_cli("job", "periodic", "force", "-detach", "report")[0] == 0
    code, out, _ = agent_cli("job", "status", "report")
    shown = sections(out)
    assert "Periodic             = true" in shown[""]
    assert "Parameterized        = false" in shown[""]
    (launch,) = [line for line in shown[""] if line.startswith("Next Periodic Launch = ")]
    assert re.fullmatch(rf"Next Periodic Launch = {DATE} \(\d+s from now\)", launch)
    header, counts = shown["Children Job Summary"]
    assert header.split() == ["Pending", "Running", "Dead"] and sum(map(int, counts.split())) == 1
    (child,) = shown["Previously Launched Jobs"][1:]
    child_id, child_status = child.split()
    assert re.fullmatch(r"report/periodic-\d+", child_id)
    assert child_status in ("pending", "running", "dead")
    assert "Summary" not in shown and "Allocations" not in shown

    code, out, _ = agent_cli("job", "status")
    (row,) = [r for r in out.splitlines() if r.startswith("report ")]
    assert row.split()[1] == "batch/periodic"


def test_status_of_a_parameterized_job_lists_its_dispatched_children(agent_cli: Cli) -> None:
    """Nomad's outputParameterizedInfo: the block, its summary and the Dispatched Jobs."""
    assert agent_cli("job", "run", "-detach", str(EXAMPLES / "parameterized.nomad"))[0] == 0
    code, out, _ = agent_cli("job", "status", "convert")
    shown = sections(out)
    assert shown["Parameterized Job"] == [
        "Payload           = optional",
        "Required Metadata = input",
        "Optional Metadata = format",
    ]
    assert shown["Parameterized Job Summary"][1].split() == ["0", "0", "0"]
    assert "No dispatched instances of parameterized job found" in shown
    dispatched = []
    for name in ("a", "b"):
        code, out, _ = agent_cli("job", "dispatch", "-detach", "-meta", f"input={name}", "convert")
        assert code == 0
        dispatched.append(out.splitlines()[0].removeprefix("Dispatched Job ID = "))
    code, out, _ = agent_cli("job", "status", "convert")
    shown = sections(out)
    assert sum(map(int, shown["Parameterized Job Summary"][1].split())) == 2
    rows = shown["Dispatched Jobs"]
    assert rows[0].split() == ["ID", "Status"]
    assert sorted(r.split()[0] for r in rows[1:]) == sorted(dispatched)
    summary = orjson.loads(agent_cli("job", "status", "-json", "convert")[1])
    assert sum(summary["Summary"]["Children"].values()) == 2
    assert sorted(c["ID"] for c in summary["Children"]) == sorted(dispatched)


def test_status_of_a_service_job_shows_its_latest_deployment(
    agent_cli: Cli, tmp_path: Path
) -> None:
    """Nomad's outputJobInfo: Latest Deployment (ID, Status, Description) and its Deployed
    table between the Summary and the Allocations."""
    update = 'update {\n    max_parallel = 1\n    min_healthy_time = "30s"\n  }\n  group "g"'
    path = job_file(tmp_path, "rolled", count=2)
    Path(path).write_text(Path(path).read_text().replace('group "g"', update, 1))
    code, out, err = agent_cli("job", "run", path)
    assert code == 0, err
    deployment = orjson.loads(agent_cli("job", "status", "-json", "rolled")[1])["LatestDeployment"]
    code, out, _ = agent_cli("job", "status", "rolled")
    assert code == 0
    shown = sections(out)
    assert list(shown) == ["", "Summary", "Latest Deployment", "Deployed", "Allocations"]
    assert shown["Latest Deployment"] == [
        f"ID          = {deployment['ID'][:8]}",
        "Status      = running",
        "Description = Deployment is running",
    ]
    header, row = shown["Deployed"]
    assert header.split()[:6] == ["Task", "Group", "Auto", "Revert", "Desired", "Placed"]
    assert header.split()[6:8] == ["Healthy", "Unhealthy"]
    assert row.split()[:5] == ["g", "false", "2", "2", "0"]


def test_plan_lists_the_allocations_it_would_preempt_and_sums_them_per_job_past_ten(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from launch.cli.job import _print_preemptions

    few = [
        {"ID": f"a{i}", "JobID": "low", "TaskGroup": "g", "Namespace": "default"} for i in (1, 2)
    ]
    _print_preemptions(few)
    out = capsys.readouterr().out
    assert "Preemptions:" in out and "Alloc ID" in out
    assert [line.split() for line in out.splitlines()[-2:]] == [
        ["a1", "low", "g"],
        ["a2", "low", "g"],
    ]
    many = [
        {"ID": f"b{i}", "JobID": "batchy", "TaskGroup": "g", "Namespace": "ns"} for i in range(11)
    ]
    _print_preemptions(many)
    assert capsys.readouterr().out.splitlines()[-1].split() == ["batchy", "ns", "11"]
    _print_preemptions([])
    assert capsys.readouterr().out == ""
