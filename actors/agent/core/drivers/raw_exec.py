"""Nomad's raw_exec driver: the task's command as a plain child process, no isolation.

Nomad ships raw_exec disabled because the task runs with the agent's own privileges; an
operator must enable it per agent, and so must drover's (`enabled=True`). Each task runs
in its own session (process group) so stopping it reaches its children too: SIGTERM
first, SIGKILL once the task's `kill_timeout` has passed (Nomad's kill sequence), the
escalation happening in `poll` so that nothing here ever sleeps.

Usage: the task's process and its descendants, read from the OS (core/usage.py): CPU time
used between two samples over the wall time between them, in MHz at the node's
`mhz_per_cpu` per core, and their resident memory.

Layout under the data dir, after Nomad's alloc dir: `<alloc_id>/<task>/` is the working
directory, `<alloc_id>/<task>/local/` the task's own folder (a dispatched job's payload is
written there, core/payload.py) and `<alloc_id>/alloc/logs/<task>.stdout|.stderr` hold the
output. `collect` removes `<alloc_id>/` once the allocation is finished (client GC).

Signals go to the task's process, as Nomad's executor sends them (not to its group: a stop
is what reaches the children too).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from actors.agent.core.drivers.base import (
    RUNNING,
    DriverError,
    TaskHandle,
    TaskStatus,
    exit_status,
    send_signal,
)
from actors.agent.core.usage import ProcessTreeSampler
from contracts import Task

DISABLED_ERROR = "raw_exec driver is disabled on this agent"
_KEYS = frozenset({"command", "args"})
# A minimal, predictable environment: the agent's own variables (tokens, credentials) do
# not leak into tasks. The task's env and the DROVER_* variables are merged over it.
BASE_ENV: Mapping[str, str] = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
}


@dataclass(slots=True)
class RawExecHandle(TaskHandle):
    process: subprocess.Popen[bytes] | None = None
    kill_timeout_s: float = 5.0
    term_sent_at: float | None = None
    killed: bool = False
    sampler: ProcessTreeSampler | None = None


class RawExecDriver:
    """Runs `command` with `args` as a real subprocess of the agent."""

    def __init__(
        self, *, enabled: bool, data_dir: str | os.PathLike[str], mhz_per_cpu: float = 1000
    ) -> None:
        self.enabled = enabled
        self.data_dir = Path(data_dir)
        self.mhz_per_cpu = mhz_per_cpu  # what one busy core counts for in `usage`

    @property
    def name(self) -> str:
        return "raw_exec"

    def validate(self, task: Task) -> list[str]:
        config = task.config
        errors = [f'raw_exec: unknown config key "{k}"' for k in sorted(config) if k not in _KEYS]
        command = config.get("command")
        if command is None:
            errors.append('raw_exec: missing required config "command"')
        elif not isinstance(command, str) or not command:
            errors.append(f"raw_exec: command must be a non-empty string, got {command!r}")
        args = config.get("args", [])
        if not isinstance(args, list | tuple) or not all(isinstance(a, str) for a in args):
            errors.append(f"raw_exec: args must be a list of strings, got {args!r}")
        return errors

    def local_dir(self, alloc_id: str, task_name: str) -> Path | None:
        """The task's `local/` folder (Nomad's NOMAD_TASK_DIR), made if needed."""
        local = self._alloc_dir(alloc_id) / task_name / "local"
        local.mkdir(parents=True, exist_ok=True)
        return local

    def start(self, alloc_id: str, task: Task, env: Mapping[str, str], now: float) -> RawExecHandle:
        if not self.enabled:
            raise DriverError(DISABLED_ERROR)
        alloc_dir = self._alloc_dir(alloc_id)
        task_dir = alloc_dir / task.name
        logs = alloc_dir / "alloc" / "logs"
        task_dir.mkdir(parents=True, exist_ok=True)
        logs.mkdir(parents=True, exist_ok=True)
        full_env = {
            **BASE_ENV,
            "DROVER_ALLOC_DIR": str(alloc_dir / "alloc"),
            "DROVER_TASK_DIR": str(task_dir),
            **env,
        }
        argv = [str(task.config["command"]), *map(str, task.config.get("args", []))]
        with (
            open(logs / f"{task.name}.stdout", "ab") as out,
            open(logs / f"{task.name}.stderr", "ab") as err,
        ):
            try:
                process = subprocess.Popen(
                    argv,
                    cwd=task_dir,
                    env=full_env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                )
            except OSError as exc:
                raise DriverError(f"failed to launch {argv[0]!r}: {exc.strerror or exc}") from None
        return RawExecHandle(
            alloc_id=alloc_id,
            task_name=task.name,
            driver=self.name,
            started_at=now,
            process=process,
            kill_timeout_s=task.kill_timeout_s,
            # The process is new: its CPU counts from now, the first sample needs no baseline.
            sampler=ProcessTreeSampler(process.pid, now),
        )

    def poll(self, handle: TaskHandle, now: float) -> TaskStatus:
        assert isinstance(handle, RawExecHandle) and handle.process is not None
        code = handle.process.poll()
        if code is not None:
            return exit_status(code)
        sent = handle.term_sent_at
        if sent is not None and not handle.killed and now - sent >= handle.kill_timeout_s:
            handle.killed = True
            _signal_group(handle.process, signal.SIGKILL)
        return RUNNING

    def stop(self, handle: TaskHandle, now: float) -> None:
        assert isinstance(handle, RawExecHandle) and handle.process is not None
        if handle.term_sent_at is not None or handle.process.poll() is not None:
            return
        handle.term_sent_at = now
        _signal_group(handle.process, signal.SIGTERM)

    def usage(self, handle: TaskHandle, now: float) -> tuple[float, float] | None:
        """(CPU MHz, resident MB) of the task's process tree since the last sample; None
        once the task has exited."""
        assert isinstance(handle, RawExecHandle) and handle.process is not None
        if handle.sampler is None or handle.process.poll() is not None:
            return None  # reaped here, so that its pid is never read after it is reused
        used = handle.sampler.sample(now)
        if used is None:
            return None
        cores, memory_mb = used
        return cores * self.mhz_per_cpu, memory_mb

    def signal(self, handle: TaskHandle, signal_name: str) -> None:
        """os.kill of the task's process; DriverError once it has exited."""
        assert isinstance(handle, RawExecHandle) and handle.process is not None
        if handle.process.poll() is not None:
            raise DriverError("Task not running")
        send_signal(handle.process.pid, signal_name)

    def collect(self, alloc_id: str) -> None:
        """Remove the allocation's folder (its tasks' folders and logs)."""
        shutil.rmtree(self._alloc_dir(alloc_id), ignore_errors=True)

    def _alloc_dir(self, alloc_id: str) -> Path:
        if not alloc_id or alloc_id in (".", "..") or "/" in alloc_id or "\\" in alloc_id:
            raise DriverError(f"allocation ID {alloc_id!r} cannot name a folder")
        return self.data_dir / alloc_id


def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    """Signal the task's whole process group; it may already be gone."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)
