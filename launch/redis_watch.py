"""The embedded Redis, started again if it dies.

A thread checks the server every `interval_s`; one found dead (killed, crashed) is started
again on its data directory, where it replays its AOF, with the same socket, TCP port and
password (`EmbeddedRedis.restart`), so every actor's URL stays valid. Meanwhile the actors
ride out the outage with backoff (actors/runtime/reconnect.py) and the API answers 503.
"""

from __future__ import annotations

import logging
import threading

from launch.redis_server import EmbeddedRedis

log = logging.getLogger(__name__)

WATCH_INTERVAL_S = 0.5
RESTART_TIMEOUT_S = 120.0  # a large AOF takes a while to load


class RedisWatchdog:
    def __init__(self, server: EmbeddedRedis, interval_s: float = WATCH_INTERVAL_S) -> None:
        self.server = server
        self.interval_s = interval_s
        self.restarts = 0  # times the server died and was started again
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> RedisWatchdog:
        self._thread = threading.Thread(target=self._watch, name="drover-redis-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching (before the server is stopped on purpose); waits for a restart in
        progress."""
        self._stop.set()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout=self.interval_s + RESTART_TIMEOUT_S + 10)
        self._thread = None

    def _watch(self) -> None:
        server = self.server
        while not self._stop.wait(self.interval_s):
            if not server.owned or server.running or self._stop.is_set():
                continue
            log.warning("the embedded redis-server died; starting it again on its AOF")
            try:
                server.restart(RESTART_TIMEOUT_S)
                self.restarts += 1
                log.warning("the embedded redis-server is back (pid %s)", server.pid)
            except Exception:  # tried again on the next turn
                log.exception("restarting the embedded redis-server failed")
