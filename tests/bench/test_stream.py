"""bench.stream: the log follower reads the leader's own wire form, percentiles count the jobs
that never got there, the minimal HTTP client keeps its connection, and a tiny run through
the real system prints every figure of every phase with the counts adding up. No timings."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
import pytest

from actors.leader.snapshots import SnapshotPolicy
from bench import stream
from bench.stream import Clients, job_body, parse_args, percentile_ms, scan_entry
from contracts import (
    AllocatedResources,
    Allocation,
    ClientStatus,
    DesiredStatus,
    Job,
    TaskGroup,
)
from contracts.jobspec import parse_json_with_warnings
from contracts.state_log import (
    AllocClientUpdate,
    LogEntry,
    UpdateAllocsClientStatus,
    UpsertAllocs,
    UpsertJob,
    encode_entry,
)

LATENCIES = ("register", "answer", "commit", "running")
EVERY_PHASE = (
    "bench",
    "phase",
    "nodes",
    "workers",
    "clients",
    "jobs",
    "register_errors",
    "committed",
    "uncommitted",
    "not_running",
    "phase_s",
    "machine_ms",
    "cpu_pct",
    "system",
    "redis_calls_per_eval",
    *(f"{name}_{p}_ms" for name in LATENCIES for p in ("p50", "p99", "max")),
)
STREAMED = (
    "rate",
    "offered_per_s",
    "evals_per_s",
    "sent",
    "unsent",
    "backlog_start",
    "backlog_end",
    "pending_requests_end",
    "drained",
    "drain_s",
)


def _alloc(alloc_id: str, job_id: str, desired: DesiredStatus) -> Allocation:
    return Allocation(
        id=alloc_id,
        name=f"{job_id}.app[0]",
        node_id="node-1",
        job_id=job_id,
        task_group="app",
        allocated_resources=AllocatedResources(cpu=10, memory_mb=16),
        desired_status=desired,
    )


def test_the_follower_reads_what_the_leader_writes() -> None:
    job = Job(id="j-1", name="j-1", task_groups=(TaskGroup(name="app"),))
    placed = _alloc("a-1", "j-1", DesiredStatus.RUN)
    stopped = _alloc("a-0", "j-0", DesiredStatus.STOP)
    running = AllocClientUpdate("a-1", ClientStatus.RUNNING, "", 1, "node-1")
    failed = AllocClientUpdate("a-0", ClientStatus.FAILED, "", 1, "node-1")
    entries = [
        UpsertJob(job),
        UpsertAllocs((placed, stopped)),
        UpdateAllocsClientStatus((running, failed)),
    ]
    seen = [
        scan_entry(encode_entry(LogEntry(i + 1, 1, change, committed_ns=1_000 + i)))
        for i, change in enumerate(entries)
    ]
    assert seen == [
        (1_000, [("job", "j-1", "")]),
        (1_001, [("alloc", "j-1", "a-1")]),
        (1_002, [("running", "a-1", "")]),
    ]
    assert scan_entry(encode_entry(LogEntry(1, 1, entries[0])))[0] == 0  # not recorded


def test_the_request_body_is_a_valid_single_allocation_job() -> None:
    job, _ = parse_json_with_warnings(orjson.loads(job_body("s-7")))
    assert job.id == "s-7" and [g.count for g in job.task_groups] == [1]
    assert job.task_groups[0].tasks[0].driver == "mock"


def test_percentiles_count_the_jobs_that_never_got_there() -> None:
    assert percentile_ms([], 50) is None
    values = [i / 1000 for i in range(1, 101)]  # 1..100 ms
    assert (percentile_ms(values, 50), percentile_ms(values, 99)) == (50.0, 99.0)
    assert percentile_ms(values, 100) == 100.0
    missing = [*values[:98], math.inf, math.inf]  # 2% never committed
    assert percentile_ms(missing, 50) == 50.0
    assert percentile_ms(missing, 99) is None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[tuple[str, int]] = []

    def log_message(self, *_: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.seen.append((self.path, self.client_address[1]))
        status = 200 if b"good" in body else 400
        payload = b'{"EvalID": "e"}'
        self.send_response(status)
        self.send_header("Content-Length", str(len(payload)))
        if b"close" in body:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def http_server() -> Iterator[ThreadingHTTPServer]:
    _Handler.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_clients_keep_their_connection_and_replace_a_closed_one(
    http_server: ThreadingHTTPServer,
) -> None:
    clients = Clients(f"http://127.0.0.1:{http_server.server_address[1]}", 1)
    assert clients.register(0, "good-1") and clients.register(0, "good-2")
    assert not clients.register(0, "bad-3")  # a refusal is not a success
    assert clients.register(0, "good-close-4")  # the server closes: the next one reconnects
    assert clients.register(0, "good-5")
    ports = [port for _, port in _Handler.seen]
    assert {path for path, _ in _Handler.seen} == {"/v1/jobs"}
    assert len(set(ports[:4])) == 1 and ports[4] != ports[0]


def test_open_loop_sends_each_request_once_and_none_after_the_window(
    http_server: ThreadingHTTPServer,
) -> None:
    clients = Clients(f"http://127.0.0.1:{http_server.server_address[1]}", 3)
    ids = [f"good-{i}" for i in range(30)]
    now = time.monotonic()
    due = [now + i * 0.001 for i in range(20)] + [now + 3600.0] * 10  # 10 after the window
    sent = clients.send(ids, due, stop_at=now + 600.0)
    assert sent.ok == [True] * 20 + [False] * 10
    assert all(math.isnan(t) for t in sent.sent[20:])
    assert len(_Handler.seen) == 20
    times = zip(sent.answered[:20], sent.sent[:20], sent.due[:20], strict=True)
    assert all(answered >= sent_at >= due_at for answered, sent_at, due_at in times)


def test_a_workload_the_nodes_cannot_hold_is_refused() -> None:
    assert stream.holds(2) == 800
    with pytest.raises(SystemExit) as exited:
        parse_args(["--nodes", "2", "--rates", "100", "--seconds", "10", "--burst", "0"])
    assert exited.value.code == 2


def test_the_default_worker_count_is_left_to_the_system() -> None:
    assert parse_args([]).workers is None
    assert parse_args(["--workers", "3"]).workers == 3


def test_snapshots_come_as_often_as_the_systems_unless_told() -> None:
    assert parse_args([]).snapshot_every == SnapshotPolicy().every_entries
    assert parse_args(["--snapshot-every", "500"]).snapshot_every == 500


def test_a_tiny_run_prints_every_figure_and_every_job_commits() -> None:
    tiny = {"nodes": 50, "rates": 20, "seconds": 2, "burst": 20, "idle": 3, "clients": 2}
    # A snapshot every 40 entries: some phase has one, and says so.
    tiny |= {"workers": 1, "snapshot-every": 40}
    args = parse_args([a for k, v in tiny.items() for a in (f"--{k}", str(v))])
    lines = list(stream.run(args))
    assert [line["phase"] for line in lines] == ["idle", "rate", "burst"]
    idle, rate, burst = lines
    for line in lines:
        assert line["bench"] == "stream" and line["workers"] == 1  # the count started
        assert [f for f in EVERY_PHASE if f not in line] == []
        assert line["register_errors"] == line["uncommitted"] == line["not_running"] == 0
        assert line["machine_ms"] > 0
        for name in LATENCIES:
            p50, p99, top = (line[f"{name}_{p}_ms"] for p in ("p50", "p99", "max"))
            assert 0 <= p50 <= p99 <= top
        # The API's own time is the registration's less any wait for a free client.
        for p in ("p50", "p99", "max"):
            assert line[f"answer_{p}_ms"] <= line[f"register_{p}_ms"]
        assert set(line["cpu_pct"]) == {
            "api",
            "load",
            "leader",
            "workers",
            "agent",
            "autoscaler",
            "redis",
        }
        per_eval = line["cpu_ms_per_eval"]
        assert set(per_eval) == set(line["cpu_pct"]) | {"drover"}
        assert per_eval["leader"] > 0 and per_eval["api"] > 0
        spent = sum(v for k, v in per_eval.items() if k not in ("load", "drover"))
        assert abs(per_eval["drover"] - spent) <= 0.01 * len(per_eval)  # rounded terms
        # A tiny phase may show the load process no CPU tick: no yardstick, no ratios (the
        # arithmetic is tested in test_stream_accounting.py).
        over_load = line["cpu_over_load"]
        if over_load is not None:
            assert set(over_load) == set(per_eval) - {"load"}
            assert over_load["drover"] >= over_load["api"] > 0
        # Every evaluation costs at least its request (an XADD) and its log entries (XADDs in
        # the commit's script, whose commands Redis counts too); the registrations and plans
        # of one leader turn share a commit (EVALSHA), so a busy turn has fewer than one each.
        calls = line["redis_calls_per_eval"]
        assert calls["xadd"] >= 2 and calls["evalsha"] > 0
        assert calls["all"] >= sum(v for k, v in calls.items() if k != "all") - 0.1 * len(calls)
    for line in (rate, burst):
        assert [f for f in STREAMED if f not in line] == []
        assert line["drained"] is True and line["drain_s"] >= 0
        assert line["sent"] + line["unsent"] == line["jobs"]
    assert idle["jobs"] == idle["committed"] == 3
    with_snapshot = [line["system"] for line in lines if "snapshots" in line["system"]]
    assert with_snapshot and all(
        system["snapshots"] >= 1 and system["snapshot_ms"] >= 0 for system in with_snapshot
    )
    assert rate["jobs"] == 40 and rate["offered_per_s"] == 20
    assert rate["committed"] == rate["sent"] and "achieved_offered_per_s" in rate
    assert burst["jobs"] == burst["sent"] == burst["committed"] == 20
    assert burst["rate"] is None and burst["all_committed_s"] is not None
    # Every job the bench registered took at least one evaluation and one plan.
    total = sum(line["committed"] for line in lines)
    assert sum(line["system"]["plans"] for line in lines) >= total
    # Scheduled by the workers, or by the leader itself while they were idle.
    scheduled = sum(
        line["system"]["worker_evals"] + line["system"]["leader_evals"] for line in lines
    )
    assert scheduled >= total
