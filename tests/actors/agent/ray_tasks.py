"""Entrypoints for tests of the `ray` driver (`tests.actors.agent.ray_tasks:NAME`): each is
run by a Ray worker, which imports this module from the project root on its PYTHONPATH."""

from __future__ import annotations

import os
import time
from pathlib import Path

import ray


def record_node(directory: str, seconds: float = 0.0, name: str = "") -> None:
    """Write the Ray node this task runs on to `directory`/`name` (default: the allocation's
    ID from the task environment), then sleep `seconds`."""
    path = Path(directory) / (name or os.environ["DROVER_ALLOC_ID"])
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(ray.get_runtime_context().get_node_id())
    tmp.replace(path)  # readers never see a half-written file
    time.sleep(seconds)


def fail(message: str) -> None:
    raise ValueError(message)


def crash_once(marker: str) -> None:
    """Kill the worker process on the first run; return on any run after that."""
    if not Path(marker).exists():
        Path(marker).touch()
        os._exit(3)


def spin(seconds: float) -> None:
    """Keep one core busy for `seconds`."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def trap_usr1(path: str, seconds: float) -> None:
    """Write `path` when SIGUSR1 arrives (Ray runs a task on its worker's main thread, where a
    handler may be installed), for up to `seconds`."""
    import signal

    signal.signal(signal.SIGUSR1, lambda *_: Path(path).write_text("usr1"))
    Path(path + ".ready").touch()
    end = time.monotonic() + seconds
    while time.monotonic() < end and not Path(path).exists():
        time.sleep(0.02)
