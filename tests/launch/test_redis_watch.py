"""The watchdog starts a killed embedded Redis again on its AOF, at the same address, with
what it had acknowledged; a stopped watchdog leaves a stopped server alone."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from actors.streams.client import connect
from launch.redis_server import EmbeddedRedis
from launch.redis_watch import RedisWatchdog


def test_a_killed_server_comes_back_with_its_data_at_the_same_url(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path / "redis").start()
    watchdog = RedisWatchdog(server, interval_s=0.05).start()
    try:
        client = connect(server.url)
        client.set("acknowledged", b"yes")
        pid = server.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while watchdog.restarts < 1:
            assert time.monotonic() < deadline, "not restarted"
            time.sleep(0.05)
        assert server.pid != pid and server.running
        assert connect(server.url).get("acknowledged") == b"yes"
    finally:
        watchdog.stop()
        server.stop()
    assert not server.running and watchdog.restarts == 1
