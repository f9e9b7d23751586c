"""Work in a forked child (actors/runtime/forked.py): its result comes back, what it raised
comes back as an error, a child that dies says how, it sees memory as it was at the fork,
and it stops by itself once its parent is gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import redis

from actors.runtime import forked


def test_the_childs_result_comes_back() -> None:
    child = forked.start(lambda: {"pid": os.getpid(), "sum": sum(range(10))})
    outcome = child.wait()
    assert outcome.ok and outcome.error == ""
    assert outcome.result["sum"] == 45
    assert outcome.result["pid"] == child.pid != os.getpid()


def test_what_the_child_raised_is_its_error() -> None:
    def work() -> dict[str, object]:
        raise ValueError("no such table: jobs")

    outcome = forked.start(work).wait()
    assert not outcome.ok
    assert outcome.error == "ValueError: no such table: jobs"


def test_a_child_that_dies_says_how() -> None:
    read_fd, write_fd = os.pipe()

    def work() -> dict[str, object]:
        os.read(read_fd, 1)  # held until the parent has killed it
        return {}

    child = forked.start(work)
    os.kill(child.pid, signal.SIGKILL)
    outcome = child.wait()
    os.close(read_fd)
    os.close(write_fd)
    assert not outcome.ok
    assert outcome.error == f"child {child.pid} exited (signal {signal.SIGKILL}) with no result"


def test_the_child_sees_memory_as_it_was_at_the_fork() -> None:
    table = {"jobs": 1}
    read_fd, write_fd = os.pipe()

    def work() -> dict[str, object]:
        os.read(read_fd, 1)  # the parent has changed the table by now
        return dict(table)

    child = forked.start(work)
    table["jobs"] = 2
    os.write(write_fd, b"x")
    outcome = child.wait()
    os.close(read_fd)
    os.close(write_fd)
    assert outcome.result == {"jobs": 1}
    assert table == {"jobs": 2}


def test_a_child_stops_once_its_parent_is_gone(tmp_path: Path) -> None:
    # The parent is a process of its own, which forks the child and exits at once.
    pid_file = tmp_path / "child.pid"
    script = textwrap.dedent(
        f"""
        import os, time
        from actors.runtime import forked

        def work():
            with open({str(pid_file)!r} + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.rename({str(pid_file)!r} + ".tmp", {str(pid_file)!r})
            while True:
                forked.ensure_parent()
                time.sleep(0.01)

        forked.start(work)
        os._exit(0)
        """
    )
    root = Path(__file__).resolve().parents[3]
    subprocess.run([sys.executable, "-c", script], cwd=root, check=True, timeout=60)
    deadline = time.monotonic() + 30
    while not pid_file.exists():
        assert time.monotonic() < deadline, "the child never started"
        time.sleep(0.01)
    child_pid = int(pid_file.read_text())
    while _running(child_pid):
        assert time.monotonic() < deadline, f"child {child_pid} outlived its parent"
        time.sleep(0.01)


def test_a_fork_that_fails_raises_and_leaves_no_pipe_open(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_fork() -> int:
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    fds = sorted(os.listdir("/proc/self/fd"))
    with pytest.raises(OSError, match="Resource temporarily unavailable"):
        forked.start(lambda: {})
    assert sorted(os.listdir("/proc/self/fd")) == fds


def test_a_fresh_client_has_its_own_pool(client: redis.Redis) -> None:
    fresh = forked.fresh_client(client)
    assert fresh.connection_pool is not client.connection_pool
    assert fresh.ping()
    fresh.set("forked:k", "v")
    assert client.get("forked:k") == b"v"
    fresh.close()


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's reaper may be slow to collect it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
