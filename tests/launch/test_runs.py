"""dstack fleets and runs end to end: real Ray actors, the embedded Redis, HTTP and the CLI.

dstack #2650 verbatim on simulated instances: a `placement: cluster` fleet of 2 instances
with 2 CPUs and 2 GB, `blocks: auto`, and a task with `nodes: 2`, `cpu: 1..`,
`memory: 1GB..`, `gpu: 0` runs on both instances (each `2/2 busy`); its ranks are real
processes (raw_exec) that see dstack's variables, and rank 1 reaches rank 0 over TCP at
`DSTACK_MASTER_NODE_IP` (an echo in place of iperf3).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from launch.system import DroverSystem, SystemConfig

FLEET_2650 = """\
type: fleet
name: iperf-fleet
placement: cluster
nodes: 2
blocks: auto
resources:
  cpu: 2..
  gpu: 0
  memory: 2GB
  disk: 1GB..
drivers: [mock, raw_exec]
"""

# Rank 0 serves one echo over TCP; rank 1 connects to the master's address and checks it.
# Both write their environment, and wait for the test's go-ahead before finishing, so that
# the test sees both instances busy.
TASK_2650 = """\
type: task
name: iperf
nodes: 2
fleets: [iperf-fleet]       # other tests' cluster fleets may run in the same system
resources:
  cpu: 1..
  memory: 1GB..
  gpu: 0
  disk: 1GB..
env:
  ECHO_PORT: "{port}"
  OUT: {out}
commands:
  - env | grep -E '^(DSTACK|DROVER)_' | sort > "$OUT/rank-$DSTACK_NODE_RANK.env"
  - cat "$DSTACK_MPI_HOSTFILE" > "$OUT/hostfile-$DSTACK_NODE_RANK"
  - python3 {script} "$DSTACK_NODE_RANK" "$DSTACK_MASTER_NODE_IP" "$ECHO_PORT" "$OUT"
"""

ECHO = """\
import pathlib, socket, sys, time
rank, master, port, out = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), pathlib.Path(sys.argv[4])
if rank == 0:
    server = socket.create_server(("0.0.0.0", port))
    connection, _ = server.accept()
    connection.sendall(connection.recv(100))
    connection.close()
    while not (out / "go").exists():
        time.sleep(0.05)
else:
    for _ in range(200):
        try:
            client = socket.create_connection((master, port), timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    client.sendall(b"hello from rank 1")
    (out / "echo").write_bytes(client.recv(100))
    while not (out / "go").exists():
        time.sleep(0.05)
"""


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DroverSystem]:
    config = SystemConfig(
        data_dir=Path(tmp_path_factory.mktemp("drover-runs")),
        workers=1,
        num_cpus=2,
        http_addr="127.0.0.1:0",
        raw_exec=True,
    )
    with DroverSystem(config) as running:
        yield running


def test_issue_2650_multi_node_run_on_block_split_instances(
    drover, e2e, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET_2650)
    code, out, err = drover("apply", "-f", str(fleet))
    assert code == 0 and 'Fleet "iperf-fleet" applied: 2 instances' in out, err
    status = e2e.json_of(drover, "fleet", "status", "iperf-fleet")
    assert [i["Busy"] for i in status["Instances"]] == ["0/2 busy", "0/2 busy"]

    out_dir = tmp_path / "out"
    out_dir.mkdir()
    request.addfinalizer((out_dir / "go").touch)  # the ranks never outlive a failed test
    (tmp_path / "echo.py").write_text(ECHO)
    task = tmp_path / "task.yaml"
    task.write_text(
        TASK_2650.format(port=e2e.free_port(), out=out_dir, script=tmp_path / "echo.py")
    )
    code, out, err = drover("apply", "-f", str(task))
    assert code == 0 and 'Run "iperf" submitted' in out, err

    e2e.wait_for(lambda: (out_dir / "echo").exists(), "rank 1's echo from rank 0")
    assert (out_dir / "echo").read_bytes() == b"hello from rank 1"
    status = e2e.json_of(drover, "fleet", "status", "iperf-fleet")
    assert [i["Busy"] for i in status["Instances"]] == ["2/2 busy", "2/2 busy"]
    assert status["Busy"] == "4/4 busy"
    run = e2e.json_of(drover, "run", "status", "iperf")
    assert sorted(r["Instance"] for r in run["Ranks"]) == ["iperf-fleet-0000", "iperf-fleet-0001"]
    assert all(r["Blocks"] == "2/2" for r in run["Ranks"])

    envs = [
        dict(line.split("=", 1) for line in (out_dir / f"rank-{rank}.env").read_text().split())
        for rank in (0, 1)
    ]
    for rank, env in enumerate(envs):
        assert env["DSTACK_NODE_RANK"] == env["DROVER_NODE_RANK"] == str(rank)
        assert env["DSTACK_NODES_NUM"] == "2"
        assert env["DSTACK_MASTER_NODE_IP"] == "127.0.0.1"
        assert env["DSTACK_GPUS_PER_NODE"] == "0" and env["DSTACK_GPUS_NUM"] == "0"
    assert (out_dir / "hostfile-1").read_text() == "127.0.0.1\n127.0.0.1\n"

    (out_dir / "go").touch()
    e2e.wait_for(lambda: e2e.json_of(drover, "run", "status", "iperf")["Status"] == "done", "done")
    code, out, _ = drover("ps")
    assert code == 0 and "iperf" in out and "done" in out
    status = e2e.json_of(drover, "fleet", "status", "iperf-fleet")
    assert status["Busy"] == "0/4 busy"


def test_a_gang_waits_for_a_busy_block_and_then_runs(drover, e2e, tmp_path: Path) -> None:
    """The negative variant of #2650: one instance has a busy block, so the 2-node run
    waits (nothing committed) and starts as soon as the block is free."""
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET_2650.replace("iperf-fleet", "waiting-fleet"))
    assert drover("apply", "-f", str(fleet))[0] == 0
    small = tmp_path / "small.yaml"
    small.write_text(
        "type: task\nname: small\nfleets: [waiting-fleet]\n"
        "resources: {cpu: 1, memory: 1GB.., disk: 1GB..}\nmock: {run_for: 3s}\n"
    )
    assert drover("apply", "-f", str(small))[0] == 0
    e2e.wait_for(
        lambda: e2e.json_of(drover, "run", "status", "small")["Status"] == "running", "small"
    )
    gang = tmp_path / "gang.yaml"
    gang.write_text(
        "type: task\nname: gang\nnodes: 2\nfleets: [waiting-fleet]\n"
        "resources: {cpu: 1.., memory: 1GB.., disk: 1GB..}\nmock: {run_for: 1s}\n"
    )
    assert drover("apply", "-f", str(gang))[0] == 0
    waiting = e2e.wait_for(
        lambda: (r := e2e.json_of(drover, "run", "status", "gang"))["Waiting"] and r,
        "a blocked gang",
    )
    assert waiting["Status"] == "submitted" and waiting["Ranks"] == []
    code, out, _ = drover("run", "status", "gang")
    assert code == 0 and "Waiting for capacity" in out
    e2e.wait_for(
        lambda: e2e.json_of(drover, "run", "status", "gang")["Status"] == "done", "the gang"
    )
    ranks = e2e.json_of(drover, "run", "status", "gang")["Ranks"]
    assert sorted(r["Blocks"] for r in ranks) == ["2/2", "2/2"]


def test_a_failed_rank_fails_the_run_and_stops_the_others(drover, e2e, tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET_2650.replace("iperf-fleet", "fail-fleet"))
    assert drover("apply", "-f", str(fleet))[0] == 0
    task = tmp_path / "task.yaml"
    task.write_text(
        "type: task\nname: failing\nnodes: 2\nfleets: [fail-fleet]\n"
        "resources: {cpu: 1.., memory: 1GB.., disk: 1GB..}\n"
        "commands: ['if [ \"$DSTACK_NODE_RANK\" = 1 ]; then exit 3; fi; sleep 60']\n"
    )
    assert drover("apply", "-f", str(task))[0] == 0
    run = e2e.wait_for(
        lambda: (r := e2e.json_of(drover, "run", "status", "failing"))["Status"] == "failed" and r,
        "the run to fail",
    )
    # Rank 0 (sleeping 60 s) is stopped with the run, not left running.
    e2e.wait_for(
        lambda: all(
            r["ClientStatus"] != "running"
            for r in e2e.json_of(drover, "run", "status", "failing")["Ranks"]
        ),
        "rank 0 to stop",
    )
    assert {r["Rank"] for r in run["Ranks"]} == {0, 1}


def test_fleets_are_data_and_can_be_deleted(
    drover, e2e, system: DroverSystem, tmp_path: Path
) -> None:
    """Many declared fleets share one hosting agent; a deleted fleet's instances leave."""
    agents_before = set(system.agents)
    for i in range(5):
        path = tmp_path / f"f{i}.yaml"
        path.write_text(f"type: fleet\nname: many-{i}\nnodes: 2\nresources: {{cpu: 2}}\n")
        assert drover("fleet", "apply", str(path))[0] == 0
    assert set(system.agents) - agents_before <= {"sim"}
    names = {f["Name"] for f in e2e.json_of(drover, "fleet", "status")}
    assert {f"many-{i}" for i in range(5)} <= names
    code, out, _ = drover("fleet", "delete", "many-0")
    assert code == 0 and out.endswith('Fleet "many-0" deleted\n'), out
    assert "many-0" not in {f["Name"] for f in e2e.json_of(drover, "fleet", "status")}
    e2e.wait_for(
        lambda: (
            not any(n["Name"].startswith("many-0-") for n in e2e.json_of(drover, "node", "status"))
        ),
        "the deleted fleet's instances to leave",
    )
    code, _, err = drover("fleet", "delete", "many-0")
    assert code == 1 and "not found" in err


def test_a_deleted_fleet_drains_its_runs_first_and_a_run_waits_only_so_long(
    drover, e2e, tmp_path: Path
) -> None:
    """`fleet delete` drains: a running run finishes (nothing new is placed there), then
    the instances leave. A run with `retry.duration` fails once it has waited that long."""
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET_2650.replace("iperf-fleet", "retiring-fleet"))
    assert drover("apply", "-f", str(fleet))[0] == 0
    task = tmp_path / "task.yaml"
    task.write_text(
        "type: task\nname: last\nnodes: 2\nfleets: [retiring-fleet]\n"
        "resources: {cpu: 1.., memory: 1GB.., disk: 1GB..}\nmock: {run_for: 4s}\n"
    )
    assert drover("apply", "-f", str(task))[0] == 0
    e2e.wait_for(
        lambda: e2e.json_of(drover, "run", "status", "last")["Status"] == "running", "the run"
    )
    code, out, _ = drover("fleet", "delete", "-detach", "retiring-fleet")
    assert (code, out) == (0, 'Fleet "retiring-fleet" deleting: 2 instances draining\n')
    status = e2e.json_of(drover, "fleet", "status", "retiring-fleet")
    assert status["Status"] == "deleting"
    late = tmp_path / "late.yaml"
    late.write_text(
        "type: task\nname: late\nfleets: [retiring-fleet]\nretry: {duration: 2s}\n"
        "resources: {cpu: 1, memory: 1GB.., disk: 1GB..}\nmock: {run_for: 1s}\n"
    )
    assert drover("apply", "-f", str(late))[0] == 0
    e2e.wait_for(
        lambda: e2e.json_of(drover, "run", "status", "last")["Status"] == "done",
        "the run to finish on the draining fleet",
    )
    failed = e2e.wait_for(
        lambda: (r := e2e.json_of(drover, "run", "status", "late"))["Status"] == "failed" and r,
        "the late run to give up",
    )
    assert failed["Ranks"] == [] and failed["TerminationReason"] == "no-capacity"
    e2e.wait_for(
        lambda: "retiring-fleet" not in {f["Name"] for f in e2e.json_of(drover, "fleet", "status")},
        "the drained fleet to go",
    )
