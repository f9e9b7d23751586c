"""Work done in a forked child process, its result sent back to the parent over a pipe.

Why a fork: the leader's snapshot encodes its whole state. On a thread of the leader's own
process that encoding held the interpreter lock from the leader's loop for seconds (a
snapshot of ~45,000 jobs took 10.6 s to write in bench.stream's 2,000/s phase, and doubled
the leader's CPU per evaluation). A child made by fork() sees the parent's memory as it
stood at the fork, with no copy made up front (the kernel copies a page only once either
process writes to it: Redis's BGSAVE), and runs on an interpreter lock of its own.

The parent is a multi-threaded process (a Ray worker, the leader's loop, its readers), and
only the forking thread lives on in the child. So the child:
- takes no lock another thread may have held at the fork: it logs nothing, writes nothing
  to stdout or stderr, touches nothing of Ray and none of the parent's Redis connections or
  pools (`fresh_client` makes its own);
- runs with the cyclic collector off: a collection writes to the header of every object it
  walks, which would copy the parent's heap page by page;
- leaves by `os._exit`: no atexit handlers, no finalizers of objects that are the parent's;
- stops if the parent goes away (`ensure_parent` between steps of its work).
"""

from __future__ import annotations

import gc
import os
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
import redis

_parent_pid = 0  # in a child: the pid of the process that forked it


class ParentGone(RuntimeError):
    """The process that forked this child exited: its work is no longer wanted."""


def supported() -> bool:
    return hasattr(os, "fork")


def ensure_parent() -> None:
    """In a child: raise ParentGone if its parent exited (it was re-parented)."""
    if _parent_pid and os.getppid() != _parent_pid:
        raise ParentGone(f"parent {_parent_pid} exited")


def fresh_client(client: redis.Redis) -> redis.Redis:
    """A client with a pool of its own to the server `client` talks to (in a child: the
    parent's connections carry the parent's conversations)."""
    pool = client.connection_pool
    return redis.Redis(
        connection_pool=redis.ConnectionPool(
            connection_class=pool.connection_class, **pool.connection_kwargs
        )
    )


@dataclass(frozen=True, slots=True)
class ChildOutcome:
    ok: bool
    result: Mapping[str, Any] = field(default_factory=dict)
    error: str = ""


class ForkedChild:
    """A child running `work`; `wait()` (any one thread) gives its outcome."""

    def __init__(self, pid: int, read_fd: int) -> None:
        self.pid = pid
        self._read_fd = read_fd

    def wait(self) -> ChildOutcome:
        """Block until the child exits; its result, or why there is none."""
        chunks: list[bytes] = []
        try:
            while chunk := os.read(self._read_fd, 1 << 16):
                chunks.append(chunk)
        finally:
            os.close(self._read_fd)
        status = _reap(self.pid)
        if not chunks:
            return ChildOutcome(False, error=f"child {self.pid} exited ({status}) with no result")
        report = orjson.loads(b"".join(chunks))
        return ChildOutcome(bool(report["ok"]), report.get("result") or {}, report.get("error", ""))


def start(work: Callable[[], Mapping[str, Any]]) -> ForkedChild:
    """Fork a child that runs `work` and sends back what it returns (JSON-encodable). Call
    this where the state `work` reads stands as it should be seen: the child sees memory as
    it is at this call. Costs the parent the fork itself (copying its page tables). Raises
    OSError if no child could be made."""
    parent = os.getpid()
    read_fd, write_fd = os.pipe()
    try:
        with warnings.catch_warnings():
            # Python 3.12+ warns of fork() in a threaded process; the child's rules (above)
            # are what makes it safe.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except OSError:  # no memory or no process left for a child
        os.close(read_fd)
        os.close(write_fd)
        raise
    if pid == 0:  # the child: never returns
        os.close(read_fd)
        _run_child(work, write_fd, parent)
    os.close(write_fd)
    return ForkedChild(pid, read_fd)


def _run_child(work: Callable[[], Mapping[str, Any]], write_fd: int, parent: int) -> None:
    global _parent_pid
    status = 1
    try:
        gc.disable()
        _parent_pid = parent
        report: dict[str, Any] = {"ok": True, "result": dict(work())}
        status = 0
    except BaseException as exc:
        report = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    try:
        payload = orjson.dumps(report)
        while payload:
            payload = payload[os.write(write_fd, payload) :]
    finally:
        os._exit(status)


def _reap(pid: int) -> str:
    """Collect the exited child; a description of how it ended."""
    try:
        _pid, status = os.waitpid(pid, 0)
    except ChildProcessError:  # reaped already (SIGCHLD ignored by the process)
        return "status unknown"
    code = os.waitstatus_to_exitcode(status)
    return f"exit code {code}" if code >= 0 else f"signal {-code}"
