from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
import redis

from actors.streams import StreamBus, connect
from launch.redis_server import EmbeddedRedis, RedisAlreadyRunning, RedisServerError

PROJECT_ROOT = str(Path(__file__).resolve().parents[2])


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "redis"


def test_start_serves_on_a_private_unix_socket(data_dir: Path) -> None:
    with EmbeddedRedis(data_dir) as server:
        assert server.url == f"unix://{data_dir / 'redis.sock'}"
        assert server.socket_path.is_socket()
        assert stat.S_IMODE(server.socket_path.stat().st_mode) == 0o700
        pid = server.pid
        assert pid is not None and server.running and server.owned
        client = connect(server.url)
        assert client.ping()
        assert int(client.info("server")["process_id"]) == pid
        config = client.config_get("*")
        assert (config["port"], config["appendonly"], config["save"]) == ("0", "yes", "")
        client.close()
    assert server.pid is None and not server.running


def test_restart_on_the_same_directory_recovers_the_aof(data_dir: Path) -> None:
    with EmbeddedRedis(data_dir) as server:
        bus = StreamBus(connect(server.url))
        bus.ensure_group("{drover}:s", "g")
        ids = bus.publish("{drover}:s", [("X", b"{}"), ("X", b"[]")])
        bus.client.set("{drover}:leader:index", 42)
        first_pid = server.pid
    assert (data_dir / "appendonly.aof").stat().st_size > 0
    with EmbeddedRedis(data_dir) as server:
        assert server.pid != first_pid
        client = connect(server.url)
        assert client.get("{drover}:leader:index") == b"42"
        assert [e.id for e in StreamBus(client).range("{drover}:s")] == ids
        assert client.xinfo_groups("{drover}:s")[0]["name"] == b"g"
        client.close()


def test_a_live_server_is_refused_or_reused(data_dir: Path) -> None:
    with EmbeddedRedis(data_dir) as server:
        with pytest.raises(RedisAlreadyRunning, match="still serving"):
            EmbeddedRedis(data_dir).start()
        attached = EmbeddedRedis(data_dir, reuse=True).start()
        assert attached.pid == server.pid and not attached.owned and attached.running
        attached.stop()  # not ours: left running
        assert connect(server.url).ping()


def test_a_stale_socket_from_a_killed_server_is_replaced(data_dir: Path) -> None:
    server = EmbeddedRedis(data_dir, appendonly=False).start()
    assert server.pid is not None
    os.kill(server.pid, signal.SIGKILL)
    assert server._process is not None
    server._process.wait(5)
    assert server.socket_path.exists()
    with EmbeddedRedis(data_dir) as again:
        assert connect(again.url).ping()
    server.stop()  # already dead: just cleans up


def test_missing_binary_is_a_clear_error(data_dir: Path) -> None:
    with pytest.raises(RedisServerError, match="missing or not executable"):
        EmbeddedRedis(data_dir, executable=data_dir / "nope" / "redis-server").start()


def test_a_server_that_cannot_start_reports_its_log(data_dir: Path) -> None:
    with pytest.raises(RedisServerError, match=r"exited with \d+ during start-up") as info:
        EmbeddedRedis(data_dir, extra_args=["--no-such-option", "1"]).start()
    assert "no-such-option" in str(info.value)


def test_too_long_socket_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RedisServerError, match="longer than"):
        EmbeddedRedis(tmp_path / ("d" * 120)).start()


def test_stop_terminates_a_server_that_refuses_shutdown(data_dir: Path) -> None:
    server = EmbeddedRedis(data_dir, extra_args=["--rename-command", "SHUTDOWN", ""]).start()
    client = connect(server.url)
    client.set("k", "v")
    server.stop(timeout=2)
    assert not server.running
    with pytest.raises(redis.ConnectionError):
        client.ping()
    with EmbeddedRedis(data_dir) as again:  # SIGTERM is a clean shutdown: AOF kept
        assert connect(again.url).get("k") == b"v"


# -- the server is tied to the process that started it --------------------------------------------

HOLDER = """
import sys
from pathlib import Path
from launch.redis_server import EmbeddedRedis

server = EmbeddedRedis(Path(sys.argv[1]), appendonly=False).start()
print(server.pid, flush=True)
sys.stdin.read()  # hold the server until killed
"""


def gone(pid: int) -> bool:
    """No such process, or only its zombie (whoever inherited it has not reaped it yet)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_until(condition: Callable[[], bool], timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def answers(socket_path: Path) -> bool:
    client = redis.Redis(
        unix_socket_path=str(socket_path), socket_connect_timeout=2, socket_timeout=2
    )
    try:
        return bool(client.ping())
    except (redis.RedisError, OSError):
        return False
    finally:
        client.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs prctl(PR_SET_PDEATHSIG)")
def test_the_server_dies_with_a_parent_killed_by_sigkill(data_dir: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(data_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=PROJECT_ROOT,
        env={**os.environ, "PYTHONPATH": PROJECT_ROOT},
    )
    assert holder.stdout is not None
    pid = int(holder.stdout.readline())
    try:
        assert answers(data_dir / "redis.sock")
        holder.kill()  # SIGKILL: no atexit, no finally, no stop()
        holder.wait(30)
        assert wait_until(lambda: gone(pid)), f"redis-server {pid} outlived its parent"
        assert not answers(data_dir / "redis.sock")
    finally:
        if not gone(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs prctl(PR_SET_PDEATHSIG)")
def test_a_server_started_by_a_short_lived_thread_outlives_the_thread(data_dir: Path) -> None:
    """The parent-death signal fires when the thread that forked exits: servers are forked by
    a thread that lives as long as the process, whichever thread asks."""
    started: list[EmbeddedRedis] = []
    native_ids: list[int] = []

    def start() -> None:
        native_ids.append(threading.get_native_id())
        started.append(EmbeddedRedis(data_dir, appendonly=False).start())

    thread = threading.Thread(target=start)
    thread.start()
    thread.join()
    (server,) = started
    try:
        # The OS thread is gone once its task leaves /proc: any signal its exit sends is sent.
        task = Path(f"/proc/self/task/{native_ids[0]}")
        assert wait_until(lambda: not task.exists())
        assert answers(server.socket_path)  # a pending SIGTERM runs its handler before this
        assert server.running
        assert "SIGTERM" not in server.log_path.read_text(errors="replace")
    finally:
        server.stop()


def test_tcp_with_a_password_kept_off_the_command_line(data_dir: Path) -> None:
    """For a Ray cluster's other hosts: TCP beside the socket, a password on both, given to
    redis-server in a file only we can read."""
    password = "pw-" + "x" * 20
    with EmbeddedRedis(data_dir, tcp_host="127.0.0.1", password=password) as server:
        assert server.tcp_url.startswith(f"redis://:{password}@127.0.0.1:")
        assert connect(server.tcp_url).ping()
        assert connect(server.url).ping()  # the socket too, with the password in its URL
        anonymous = server.tcp_url.replace(f":{password}@", "")
        with pytest.raises(redis.AuthenticationError):
            connect(anonymous).ping()
        assert server.pid is not None
        assert password not in " ".join(psutil.Process(server.pid).cmdline())
        conf = data_dir / "auth.conf"
        assert stat.S_IMODE(conf.stat().st_mode) == 0o600
    with pytest.raises(ValueError, match="password"):
        EmbeddedRedis(data_dir, password='a"b')
