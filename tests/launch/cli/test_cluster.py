"""`drover node|alloc|eval|fleet ...`: against a drover cluster in process (three simulated
nodes, real scheduling, real HTTP) for what the commands do, and against a canned server for
the request bodies they send and the tables of answers a small cluster never gives."""

from __future__ import annotations

import itertools
import re
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from actors.api.core.shapes import alloc_full
from contracts import (
    AllocatedResources,
    Allocation,
    ClientStatus,
    Job,
    Resources,
    Task,
    TaskGroup,
)

Cli = Callable[..., tuple[int, str, str]]
NODE_A = "0a1b2c3d-0000-4000-8000-000000000001"


def as_json(cli: Cli, *argv: str) -> Any:
    code, out, err = cli(*argv)
    assert code == 0, err
    return orjson.loads(out)


def _ages(text: str) -> str:
    return re.sub(r"\b\d+[smh] ago\b", "<age> ago", text)


def test_node_status_lists_nodes_and_shows_one_by_name_or_unique_prefix(agent_cli: Cli) -> None:
    code, out, _ = agent_cli("node", "status")
    header, *rows = out.splitlines()
    assert code == 0 and header.split() == [
        *("ID", "Node", "Pool", "DC", "Name", "Class", "Drain", "Eligibility", "Status"),
    ]
    names = sorted(row.split()[3] for row in rows)
    assert names == ["sim-0000", "sim-0001", "sim-0002"]
    for row in rows:
        short_id, pool, dc, _name, cls, *_ = row.split()
        assert len(short_id) == 8 and (pool, dc, cls) == ("default", "dc1", "<none>")

    node = as_json(agent_cli, "node", "status", "-json", "sim-0001")["Node"]
    code, by_name, _ = agent_cli("node", "status", "sim-0001")
    code, by_prefix, _ = agent_cli("node", "status", node["ID"][:6])
    # The same node, read a moment apart: its last heartbeat's age may have ticked.
    assert code == 0 and _ages(by_name) == _ages(by_prefix)
    assert f"ID          = {node['ID']}\n" in by_name
    assert "CPU         = 4000 MHz\n" in by_name and "Memory      = 8192 MiB\n" in by_name
    assert "\nAllocations\n" in by_name

    code, _, err = agent_cli("node", "status", "no-such-node")
    assert (code, err) == (1, 'drover: no node with ID prefix "no-such-node"\n')


def test_drain_and_eligibility_take_exactly_one_of_enable_and_disable(agent_cli: Cli) -> None:
    for argv in (("drain", "sim-0002"), ("eligibility", "-enable", "-disable", "sim-0002")):
        code, _, err = agent_cli("node", *argv)
        assert (code, err) == (1, "drover: exactly one of -enable and -disable is required\n")

    code, out, _ = agent_cli("node", "drain", "-enable", "-deadline", "5", "sim-0002")
    assert code == 0 and re.match(r'Node "[0-9a-f]{8}" drain strategy enabled\n', out)
    # Draining makes the node ineligible (and it stays so once the drain completes).
    node = as_json(agent_cli, "node", "status", "-json", "sim-0002")["Node"]
    assert node["SchedulingEligibility"] == "ineligible"

    code, out, _ = agent_cli("node", "drain", "-disable", "sim-0002")
    # An eval line may follow when other tests left allocations on the node.
    assert code == 0 and re.match(r'Node "[0-9a-f]{8}" drain strategy disabled\n', out), out
    node = as_json(agent_cli, "node", "status", "-json", "sim-0002")["Node"]
    assert node["Drain"] is False and node["SchedulingEligibility"] == "eligible"


PACED_JOB = """
job "paced" {
  datacenters = ["dc1"]
  constraint {
    attribute = "${node.unique.name}"
    operator  = "regexp"
    value     = "^sim-000[01]$"
  }
  migrate {
    max_parallel     = 1
    min_healthy_time = "1s"
  }
  group "g" {
    count = 3
    task "t" {
      driver = "mock"
      config { run_for = "1h" }
      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
"""


def get(cluster: Any, path: str) -> Any:
    with urllib.request.urlopen(cluster.address + path, timeout=10) as reply:
        return orjson.loads(reply.read())


def test_a_drain_moves_a_group_one_allocation_at_a_time(
    agent_cli: Cli, cluster: Any, tmp_path: Path
) -> None:
    """The migrate block paces a drain (Nomad's drainer): with max_parallel 1 one allocation
    of the group is on its way at a time, each batch with its own node-drain eval, the next
    once the previous replacement has run for min_healthy_time; count - max_parallel keep
    running throughout."""
    spec = tmp_path / "paced.nomad"
    spec.write_text(PACED_JOB)
    code, out, _ = agent_cli("job", "run", str(spec))  # followed until all three run
    assert code == 0 and out.endswith("Allocations: 3 running\n"), out
    placed = get(cluster, "/v1/job/paced/allocations")
    by_node: dict[str, list[str]] = {}
    for alloc in placed:
        by_node.setdefault(alloc["NodeID"], []).append(alloc["ID"])
    node_id, moving = max(by_node.items(), key=lambda item: len(item[1]))
    assert len(moving) >= 2  # three allocations on two nodes
    assert agent_cli("node", "drain", "-enable", "-deadline", "60", node_id)[0] == 0
    try:
        least_running = 3
        deadline = time.monotonic() + 30
        while True:
            allocs = get(cluster, "/v1/job/paced/allocations")
            wanted = [a for a in allocs if a["DesiredStatus"] == "run"]
            least_running = min(least_running, sum(a["ClientStatus"] == "running" for a in wanted))
            if not [a for a in wanted if a["NodeID"] == node_id]:
                break
            assert time.monotonic() < deadline, "the drain never moved the group off"
            time.sleep(0.05)
        assert least_running >= 2, "more than max_parallel were on their way at once"
        evals = get(cluster, "/v1/job/paced/evaluations")
        assert sum(e["TriggeredBy"] == "node-drain" for e in evals) == len(moving)
        replacements = sorted(
            a["CreateTime"] for a in allocs if a["ID"] not in {p["ID"] for p in placed}
        )
        assert len(replacements) == len(moving)
        gaps = [b - a for a, b in itertools.pairwise(replacements)]
        assert all(gap >= 1_000_000_000 for gap in gaps), "a batch went before min_healthy_time"
    finally:
        agent_cli("node", "drain", "-disable", node_id)
        agent_cli("job", "stop", "-purge", "-detach", "paced")


def test_eval_and_alloc_status_resolve_prefixes_and_show_their_fields(
    agent_cli: Cli, tmp_path: Path
) -> None:
    spec = tmp_path / "shown.nomad"
    spec.write_text(
        'job "shown" {\n  datacenters = ["dc1"]\n  group "g" {\n    count = 1\n'
        '    task "t" {\n      driver = "mock"\n      config { run_for = "1h" }\n'
        "      resources {\n        cpu    = 250\n        memory = 96\n      }\n    }\n  }\n}\n"
    )
    code, out, _ = agent_cli("job", "run", str(spec))
    assert code == 0, out
    status = as_json(agent_cli, "job", "status", "-json", "shown")
    (alloc,) = status["Allocations"]
    eval_id = alloc["EvalID"]

    code, out, _ = agent_cli("eval", "status", eval_id[:8])
    assert code == 0 and f"ID                 = {eval_id}\n" in out
    for line in (
        "Status             = complete",
        "TriggeredBy        = job-register",
        "Job ID             = shown",
        "Placement Failures = false",
        "Blocked Eval       = <none>",
    ):
        assert line + "\n" in out
    code, out, _ = agent_cli("eval", "list")
    (row,) = [r for r in out.splitlines() if r.startswith(eval_id[:8])]
    assert row.split()[1:] == ["50", "job-register", "shown", "<none>", "complete", "false"]

    code, out, _ = agent_cli("alloc", "status", alloc["ID"][:8])
    assert code == 0 and f"ID                  = {alloc['ID']}\n" in out
    for line in (
        f"Eval ID             = {eval_id[:8]}",
        "Job ID              = shown",
        "Desired Status      = run",
        "CPU                 = 250 MHz",
        "Memory              = 96 MiB",
    ):
        assert line + "\n" in out
    code, _, err = agent_cli("alloc", "status", "zzzz")
    assert (code, err) == (1, 'drover: no alloc with ID prefix "zzzz"\n')


def test_alloc_signal_reaches_the_tasks_and_its_events_show_in_alloc_status(
    agent_cli: Cli, tmp_path: Path
) -> None:
    spec = tmp_path / "signalled.nomad"
    spec.write_text(
        'job "signalled" {\n  datacenters = ["dc1"]\n  group "g" {\n'
        '    task "t" {\n      driver = "mock"\n      config { run_for = "1h" }\n    }\n  }\n}\n'
    )
    assert agent_cli("job", "run", str(spec))[0] == 0
    try:
        (alloc,) = as_json(agent_cli, "job", "status", "-json", "signalled")["Allocations"]
        short = alloc["ID"][:8]
        assert agent_cli("alloc", "signal", "-s", "sighup", "-task", "t", short) == (0, "", "")
        assert agent_cli("alloc", "signal", short) == (0, "", "")  # every task, SIGKILL
        code, out, _ = agent_cli("alloc", "status", short)
        assert code == 0 and "Task being sent signal SIGHUP" in out
        assert "Task being sent signal SIGKILL" in out
        code, _, err = agent_cli("alloc", "signal", "-task", "nope", short)
        assert code == 1 and 'Task not found: "nope" is not a task of allocation' in err
        code, _, err = agent_cli("alloc", "signal", "-task", "t", short, "other")
        assert (code, err) == (1, 'drover: -task "t" and the task argument "other" differ\n')
    finally:
        agent_cli("job", "stop", "-purge", "-detach", "signalled")


def test_fleet_files_are_checked_before_sending_and_a_refusal_names_the_file(
    cli: Cli, agent_cli: Cli, canned: Any, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("nodes: [1,\n")
    listed = tmp_path / "listed.yaml"
    listed.write_text("- type: fleet\n")
    for path, message in (
        (tmp_path / "missing.yaml", f"{tmp_path / 'missing.yaml'}: No such file or directory"),
        (broken, f"{broken}: invalid YAML: "),
        (listed, f"{listed}: expected a mapping with `type: fleet` or `type: task`"),
    ):
        code, _, err = cli("-address", canned.address, "fleet", "apply", str(path))
        assert code == 1 and err.startswith(f"drover: {message}") and err.count("\n") == 1
    assert canned.requests == []  # nothing went out

    good = tmp_path / "good.yaml"
    good.write_text("type: fleet\nname: extra\nnodes: 2\nresources: {cpu: 2, memory: 4GB}\n")
    code, _, err = agent_cli("fleet", "apply", str(good))  # this agent hosts no fleets
    assert code == 1
    assert err == (
        f"drover: {good}: POST /v1/fleets: 400 this agent hosts no simulated fleets "
        "(started without Ray)\n"
    )
    assert agent_cli("fleet", "status")[:2] == (0, "No fleets declared\n")


def test_drain_bodies_and_the_tables_of_canned_answers(cli: Cli, canned: Any) -> None:
    canned.answer("GET", "/v1/nodes", [{"ID": NODE_A, "Name": "big-0"}])
    canned.answer("POST", f"/v1/node/{NODE_A}/drain", {"EvalIDs": ["e0e1e2e3-aaaa"]})
    code, out, _ = cli(
        "-address", canned.address, "node", "drain", "-enable", "-deadline", "1.5",
        "-ignore-system", "0a1b",
    )  # fmt: skip
    assert code == 0
    assert out == (
        'Node "0a1b2c3d" drain strategy enabled\n'
        '    Evaluation "e0e1e2e3" migrates its allocations\n'
    )
    assert cli("-address", canned.address, "node", "drain", "-disable", "big-0")[0] == 0
    lookup, enable, _, disable = canned.requests[:4]
    assert lookup.query == {"prefix": "0a1b", "namespace": "*"}
    assert enable.body == {
        "NodeID": NODE_A,
        "DrainSpec": {"Deadline": 1_500_000_000, "IgnoreSystemJobs": True},
        "MarkEligible": False,
    }
    assert disable.body == {"NodeID": NODE_A, "DrainSpec": None, "MarkEligible": True}
    # Nomad's -force and -no-deadline are deadlines < 0 and 0.
    for option, deadline in (("-force", -1), ("-no-deadline", 0)):
        assert cli("-address", canned.address, "node", "drain", "-enable", option, "big-0")[0] == 0
        assert canned.requests[-1].body["DrainSpec"]["Deadline"] == deadline
    code, _, err = cli(
        "-address", canned.address, "node", "drain", "-enable", "-force", "-no-deadline", "big-0"
    )
    assert (code, err) == (1, "drover: -force and -no-deadline are mutually exclusive\n")

    canned.answer("GET", "/v1/allocations", [{"ID": "a1"}, {"ID": "a2"}])
    code, _, err = cli("-address", canned.address, "alloc", "status", "a")
    assert (code, err) == (1, 'drover: alloc prefix "a" is ambiguous: 2 matches\n')

    canned.answer("GET", "/v1/evaluations", [])
    assert cli("-address", canned.address, "eval", "list")[:2] == (0, "No evals found\n")
    fleet = {
        **{"Name": "gpu", "Nodes": 4, "Ready": 3, "Down": 1, "CPU": 32000, "MemoryMB": 131072},
        **{"GPUs": 16, "GPUModel": "A100", "Datacenter": "dc2", "NodeClass": "", "Allocs": 7},
        **{"Placement": "cluster", "Blocks": 4, "Busy": "5/16 busy", "Status": "deleting"},
    }
    canned.answer("GET", "/v1/fleets", [fleet])
    code, out, _ = cli("-address", canned.address, "fleet", "status")
    assert out.splitlines() == [
        "Name  Status    Instances  Ready  Placement  Blocks  Busy       CPU        Memory"
        "      GPUs     DC   Allocs",
        "gpu   deleting  4          3      cluster    4       5/16 busy  32000 MHz  131072 MiB"
        "  16 A100  dc2  7",
    ]


def test_alloc_status_shows_each_task_as_nomad_does(cli: Cli, canned: Any) -> None:
    """The API's own allocation JSON (shapes.alloc_full) for a failed two-task allocation:
    one block per task, its resources, times and recent events, newest first."""
    t0 = 1_700_000_000_000_000_000
    tasks = (
        Task(name="web", driver="mock", resources=Resources(cpu=300, memory_mb=256)),
        Task(name="sidecar", driver="mock", resources=Resources(cpu=100, memory_mb=64)),
    )
    job = Job(id="shop", task_groups=(TaskGroup("g", 1, tasks=tasks),))
    alloc = Allocation(
        id="a7a7a7a7-0000-4000-8000-000000000001",
        job_id="shop",
        task_group="g",
        client_status=ClientStatus.FAILED,
        client_description='task "web" failed: exited with code 2',
        allocated_resources=AllocatedResources(cpu=400, memory_mb=320),
        create_time=t0,
        modify_time=t0 + 9_000_000_000,
    )
    canned.answer("GET", "/v1/allocations", [{"ID": alloc.id}])
    canned.answer("GET", f"/v1/allocation/{alloc.id}", alloc_full(alloc, job))
    code, out, _ = cli("-address", canned.address, "alloc", "status", "a7a7")
    assert code == 0
    blocks = out.split("\n\n")
    assert blocks[1:] == [
        'Task "sidecar" is "dead"\nTask Resources:\nCPU      Memory\n100 MHz  64 MiB',
        "Task Events:\n"
        "Started At     = N/A\n"
        "Finished At    = 2023-11-14T22:13:29Z\n"
        "Total Restarts = 0\n"
        "Last Restart   = N/A",
        "Recent Events:\n"
        "Time                  Type                 Description\n"
        "2023-11-14T22:13:29Z  Sibling Task Failed  Task's sibling failed\n"
        "2023-11-14T22:13:29Z  Killed               Task successfully killed\n"
        "2023-11-14T22:13:20Z  Received             Task received by client",
        'Task "web" is "dead"\nTask Resources:\nCPU      Memory\n300 MHz  256 MiB',
        "Task Events:\n"
        "Started At     = N/A\n"
        "Finished At    = 2023-11-14T22:13:29Z\n"
        "Total Restarts = 0\n"
        "Last Restart   = N/A",
        "Recent Events:\n"
        "Time                  Type        Description\n"
        '2023-11-14T22:13:29Z  Terminated  task "web" failed: exited with code 2\n'
        "2023-11-14T22:13:20Z  Received    Task received by client\n",
    ]
