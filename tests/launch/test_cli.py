"""`drover job validate`: exit codes and one-line errors naming the file, path and value."""

from __future__ import annotations

import contextlib
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import orjson
import psutil
import pytest

from launch.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_validate_example(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["job", "validate", str(EXAMPLES / "web.nomad")]) == 0
    assert 'Job "web"' in capsys.readouterr().out


def test_validate_json_prints_nomad_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["job", "validate", "-json", str(EXAMPLES / "batch.nomad")]) == 0
    job = orjson.loads(capsys.readouterr().out)["Job"]
    assert job["Type"] == "batch" and job["TaskGroups"][0]["Tasks"][0]["Driver"] == "mock"


def test_validate_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.nomad"
    bad.write_text(
        'job "x" {\n  group "web" {\n    count = "lots"\n    task "t" { driver = "mock" }\n  }\n}\n'
    )
    assert main(["job", "validate", str(bad)]) == 1
    err = capsys.readouterr().err
    assert str(bad) in err and "count" in err and "lots" in err


def test_validate_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["job", "validate", str(tmp_path / "nope.nomad")]) == 1
    assert "nope.nomad" in capsys.readouterr().err


def test_agent_job_limits_must_be_positive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["agent", "-dev", "-data-dir", str(tmp_path), "-job-max-tasks", "0"])
    assert code == 2
    assert capsys.readouterr().err == "drover: -job-max-tasks: expected a number >= 1, got 0\n"


@pytest.mark.parametrize(
    ("flag", "value", "want"),
    [("-snapshot-every", "0", ">= 1"), ("-snapshot-tail", "-1", ">= 0")],
)
def test_agent_snapshot_flags_are_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str, want: str
) -> None:
    code = main(["agent", "-dev", "-data-dir", str(tmp_path), flag, value])
    assert code == 2
    assert capsys.readouterr().err == f"drover: {flag}: expected a number {want}, got {value}\n"


def test_agent_dev_starts_and_stops_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    """`drover agent -dev` brings the system up on the embedded defaults, and Ctrl-C stops
    the actors, Ray and the Redis server it started: every process it started is gone."""
    data_dir = tmp_path / "dev"
    root = Path(__file__).resolve().parents[2]
    process = subprocess.Popen(
        [
            sys.executable,
            *("-m", "launch.cli", "agent", "-dev", "-data-dir", str(data_dir)),
            *("-http-addr", "127.0.0.1:0", "-node", "pynomad1"),
        ],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    # Lines are read on a thread, so that an agent that hangs without printing cannot hang
    # the test past its deadline.
    lines: queue.Queue[str] = queue.Queue()
    assert process.stdout is not None
    reader = threading.Thread(target=lambda: [lines.put(x) for x in process.stdout], daemon=True)
    reader.start()
    try:
        seen: list[str] = []
        deadline = time.monotonic() + 120
        while not any("started in" in line for line in seen) and process.poll() is None:
            remaining = deadline - time.monotonic()
            assert remaining > 0, "".join(seen)
            with contextlib.suppress(queue.Empty):
                seen.append(lines.get(timeout=min(remaining, 1.0)))
        started = next((line for line in seen if "drover agent -dev started in" in line), None)
        assert started is not None, "".join(seen)
        assert (data_dir / "redis" / "redis.sock").exists()
        children = psutil.Process(process.pid).children(recursive=True)
        names = {child.name() for child in children}
        assert "redis-server" in names and "raylet" in names, names
        api = re.search(r"API (http://[\d.]+:\d+)", started)
        assert api is not None, started
        with urllib.request.urlopen(api.group(1) + "/v1/status/leader", timeout=10) as reply:
            assert reply.status == 200
        # -node names the agent's own node (Nomad's `nomad agent -dev -node pynomad1`).
        with urllib.request.urlopen(api.group(1) + "/v1/nodes", timeout=10) as reply:
            assert "pynomad1" in {n["Name"] for n in orjson.loads(reply.read())}
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=120) == 0
        assert not (data_dir / "redis" / "redis.sock").exists()
        assert (data_dir / "redis" / "appendonly.aof").exists()
        deadline = time.monotonic() + 60
        left = [c for c in children if _alive(c)]
        while left and time.monotonic() < deadline:
            time.sleep(0.1)  # poll: Ray's worker processes exit once their raylet has gone
            left = [c for c in left if _alive(c)]
        assert not left, [(c.pid, c.name()) for c in left]
    finally:
        if process.poll() is None:
            process.kill()


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_agent_tls_flags_go_together_and_name_a_bad_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["agent", "-dev", "-data-dir", str(tmp_path)]
    assert main([*base, "-tls-cert", "c.pem"]) == 2
    assert capsys.readouterr().err == "drover: -tls-cert and -tls-key go together\n"
    missing = str(tmp_path / "nope.pem")
    assert main([*base, "-tls-cert", missing, "-tls-key", missing]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"drover: -tls-cert {missing}") and err.count("\n") == 1


@pytest.mark.parametrize("name", ["", "  "])
def test_agent_node_name_must_not_be_blank(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    assert main(["agent", "-dev", "-data-dir", str(tmp_path), "-node", name]) == 2
    assert capsys.readouterr().err == f"drover: -node: expected a node name, got {name!r}\n"
