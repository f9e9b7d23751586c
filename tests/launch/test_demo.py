"""`drover demo` (the README's first command): the real system, driven through its API."""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import psutil
import pytest

from launch import demo as demo_module
from launch.cli.client import ApiClient
from launch.demo import run_demo
from launch.system import DroverSystem


@dataclass
class DemoRun:
    output: str = ""
    started: list[psutil.Process] = field(default_factory=list)
    """Every process below this one, not there before the demo, while its system ran."""
    names: set[str] = field(default_factory=set)
    redis_pid: int | None = None
    socket: Path | None = None


# What the demo waits on in the examples, shortened for the test (the rest as they are):
# the autoscaled service's demand spike (20 s from t = 5 s) and web's min_healthy_time.
SHORTER = {
    "autoscale.nomad": [
        ('at       = "5s"', 'at       = "2s"'),
        ('duration = "20s"', 'duration = "6s"'),
    ],
    "web.nomad": [('min_healthy_time = "2s"', 'min_healthy_time = "1s"')],
}


def shorter_examples(folder: Path) -> Path:
    """The examples the demo reads (its jobs and fleets), with SHORTER's waits, in `folder`."""
    shutil.copytree(demo_module.EXAMPLES / "fleets", folder / "fleets")
    for path in demo_module.EXAMPLES.glob("*.nomad"):
        text = path.read_text()
        for long, short in SHORTER.get(path.name, []):
            assert text.count(long) == 1, (path.name, long)
            text = text.replace(long, short)
        (folder / path.name).write_text(text)
    return folder


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """One demo run shared by the module's tests, on the examples with shorter waits: its
    autoscaler step's service spikes for 6 s from t = 2 s (the README's for 20 s from
    t = 5 s; the policy is the example's), and web's deployments wait 1 s for each
    allocation to be healthy instead of 2 s. The same scalings, cooldown, deployments and
    promotions, without waiting out the README's timings."""
    examples = shorter_examples(tmp_path_factory.mktemp("examples"))
    run = DemoRun()
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}

    def record(system: DroverSystem) -> None:
        run.started = [p for p in me.children(recursive=True) if p.pid not in before]
        run.names = {name(p) for p in run.started}
        assert system.redis is not None
        run.redis_pid, run.socket = system.redis.pid, system.redis.socket_path

    buffer = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(buffer):
        patch.setattr(demo_module, "EXAMPLES", examples)
        patch.setattr(demo_module, "AUTOSCALED", examples / demo_module.AUTOSCALED.name)
        assert run_demo(nodes=40, workers=4, on_started=record) == 0
    run.output = buffer.getvalue()
    return run


@pytest.fixture(scope="module")
def output(demo: DemoRun) -> str:
    return demo.output


def alive(process: psutil.Process) -> bool:
    """Still running (a zombie waiting for its parent to reap it has stopped)."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def name(process: psutil.Process) -> str:
    try:
        return process.name()
    except psutil.Error:
        return "?"


def test_fleets_are_declared(output: str) -> None:
    assert re.findall(r'fleet "([\w-]+)": (\d+) nodes', output) == [
        ("std-dc1", "18"),
        ("std-dc2", "18"),
        ("gpu", "4"),
    ]


def test_plans_are_counted_and_every_rejection_retried(output: str) -> None:
    match = re.search(
        r"(\d+) allocations placed by (\d+) plans; (\d+) plans partially rejected at the leader "
        r"\((\d+) node conflicts\) -> refreshed and retried (\d+) times; (\d+) moved off nodes "
        r"filled meanwhile before submission; every evaluation finished",
        output,
    )
    assert match is not None, output
    placed, plans, partial, conflicts, retries, rebased = map(int, match.groups())
    assert placed > 0 and plans >= 10
    assert conflicts >= partial and retries >= partial
    assert 0 <= rebased <= plans


def test_preserve_counts_keeps_the_autoscaled_count(output: str) -> None:
    steps = dict(re.findall(r"after (.+?): frontend=\d+, api=(\d+)", output))
    assert steps["job run (changed file)"] == "2"  # reset to the file's count
    assert steps["job run -preserve-counts"] == steps["scale api to 10"] == "10"


def test_stop_then_revert_reads_v1_dead_and_v2_running(output: str) -> None:
    assert "web-1 versions: v2 running, v1 dead" in output


def test_every_job_is_placed(output: str) -> None:
    for job in ("web", "web-1", "web-6", "node-exporter", "nightly-report", "train"):
        row = re.search(rf"^{re.escape(job)}\s+\w+\s+(\w+)\s+(\d+)", output, re.MULTILINE)
        assert row is not None, job
        # The batch job (30 s of work) may have finished by the time the demo's deployments
        # have rolled out: dead after running to completion is placed too.
        done = ("running", "dead") if job == "nightly-report" else ("running",)
        assert row.group(1) in done and int(row.group(2)) > 0, row.group(0)


def test_everything_the_demo_started_is_stopped(demo: DemoRun) -> None:
    """Not the line it prints: the processes it started (the redis-server, Ray's and its
    actors' processes) are gone, and so is the Redis socket."""
    assert {"redis-server", "raylet", "gcs_server", "ray::LeaderActor"} <= demo.names, demo.names
    assert demo.redis_pid in {p.pid for p in demo.started}
    deadline = time.monotonic() + 60
    left = [p for p in demo.started if alive(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.1)  # Ray's worker processes exit once their raylet has gone
        left = [p for p in left if alive(p)]
    assert not left, [(p.pid, name(p)) for p in left]
    assert demo.socket is not None and not demo.socket.exists()


def test_the_autoscaler_scales_the_spiking_service_up_then_back_down(output: str) -> None:
    counts = [int(n) for n in re.findall(r"t=\s*\d+s  api: (\d+) running", output)]
    assert counts[0] == 2 and max(counts) > 2 and counts[-1] == 2, counts
    events = re.findall(r"scaling event: (\d+) -> (\d+): scaling (up|down)", output)
    assert [e[2] for e in events[-2:]] == ["up", "down"], events
    assert re.search(r"scale  count \d+ -> 2 .*\n  +reason: scaling down because factor", output)
    assert 'check "cpu" (target-value): avg_cpu-allocated = ' in output


def test_the_status_table_reads_a_periodic_jobs_child(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A run that spans a quarter hour has examples/periodic.nomad's child in the job list
    (report/periodic-<launch time>): its allocations are read with the ID escaped, as the
    API wants it (the demo stopped on a 404 there)."""
    child = "report/periodic-1795784400"

    class Api:
        def get(self, path: str) -> Any:
            if path == "/v1/jobs":
                return [{"ID": child, "Type": "batch", "Status": "running", "Version": 0}]
            assert path == "/v1/job/report%2Fperiodic-1795784400/allocations", path
            return [{"DesiredStatus": "run", "ClientStatus": "running"}]

    demo_module._print_status(cast(ApiClient, Api()))
    assert re.search(
        rf"^{re.escape(child)}\s+batch\s+running\s+1\s+1\s+0$", capsys.readouterr().out, re.M
    )
