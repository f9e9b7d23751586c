"""`drover job validate`: exit codes and one-line errors naming the file, path and value."""

from __future__ import annotations

from pathlib import Path

import orjson
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


def test_agent_dev_starts_and_stops_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    """`drover agent -dev` brings the system up on the embedded defaults, and Ctrl-C stops
    the actors, Ray and the Redis server it started."""
    import re
    import signal
    import subprocess
    import sys
    import time
    import urllib.request

    data_dir = tmp_path / "dev"
    root = Path(__file__).resolve().parents[2]
    process = subprocess.Popen(
        [
            sys.executable,
            *("-m", "launch.cli", "agent", "-dev", "-data-dir", str(data_dir)),
            *("-http-addr", "127.0.0.1:0"),
        ],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + 60
        lines = []
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            lines.append(line)
            if "started in" in line or process.poll() is not None:
                break
        assert any("drover agent -dev started in" in line for line in lines), "".join(lines)
        assert (data_dir / "redis" / "redis.sock").exists()
        started = next(line for line in lines if "started in" in line)
        api = re.search(r"API (http://[\d.]+:\d+)", started)
        assert api is not None, started
        with urllib.request.urlopen(api.group(1) + "/v1/status/leader", timeout=10) as reply:
            assert reply.status == 200
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
        assert not (data_dir / "redis" / "redis.sock").exists()
        assert (data_dir / "redis" / "appendonly.aof").exists()
    finally:
        if process.poll() is None:
            process.kill()
