"""Measuring what allocations use: a task's processes read from the OS, and the samples the
agent publishes (contracts/usage.py).

Processes are read with psutil, which knows every OS's process tables (Linux's /proc,
macOS's sysctl...) better than a parser of our own would. CPU is the delta of a process
tree's CPU time between two samples over the wall time between them, as `top` computes it;
memory is the tree's resident set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import psutil

from contracts import Allocation, Node
from contracts.usage import AllocUsage

MIB = 1024 * 1024  # Nomad's MemoryMB is in MiB


class ProcessTreeSampler:
    """One process and its descendants (a task's command and what it spawned), sampled
    again and again: each sample gives the CPU used since the one before.

    CPU is counted per process, keyed by pid and start time so that a reused pid is a new
    process: one that exited between two samples loses only its last slice, one first seen
    counts its CPU from its start. Children that left the tree (daemonised, reparented to
    init) are not followed.
    """

    __slots__ = ("_cpu_seen", "_last_at", "_root")

    def __init__(self, pid: int, since: float) -> None:
        """`since`: when the CPU of processes first seen began to count (a task's start)."""
        self._root: Any = _process(pid)
        self._last_at = since
        self._cpu_seen: dict[tuple[int, float], float] = {}

    def sample(self, now: float) -> tuple[float, float] | None:
        """(CPU cores busy on average since the last sample, resident MB) at `now`, or None
        once the root process is gone."""
        root = self._root
        if root is None:
            return None
        try:
            if root.status() == psutil.STATUS_ZOMBIE:
                return None
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:  # gone, or no longer ours to read
            self._root = None
            return None
        cpu_seen: dict[tuple[int, float], float] = {}
        busy = resident = 0.0
        for process in tree:
            try:
                with process.oneshot():
                    times = process.cpu_times()
                    rss = process.memory_info().rss
                    key = (process.pid, process.create_time())
            except psutil.Error:
                continue  # exited since the tree was listed
            total = float(times.user + times.system)
            busy += max(0.0, total - self._cpu_seen.get(key, 0.0))
            cpu_seen[key] = total
            resident += rss
        elapsed = now - self._last_at
        self._cpu_seen, self._last_at = cpu_seen, now
        return (busy / elapsed if elapsed > 0 else 0.0), resident / MIB


def _process(pid: int) -> Any:
    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None


def node_mhz_per_core(node: Node, default: float) -> float:
    """The MHz of one of `node`'s cores: its `cpu.frequency`, else its total compute over its
    cores (Ray nodes), else `default`."""
    attributes = node.attributes
    frequency = _positive(attributes.get("cpu.frequency"))
    if frequency:
        return frequency
    cores = _positive(attributes.get("cpu.numcores"))
    total = _positive(attributes.get("cpu.totalcompute")) or float(node.node_resources.cpu)
    if cores and total > 0:
        return total / cores
    return default


def _positive(text: str | None) -> float:
    try:
        value = float(text or 0)
    except ValueError:
        return 0.0
    return value if value > 0 else 0.0


def alloc_usage(
    alloc: Allocation, cpu_mhz: float, memory_mb: float, time_ns: int, mhz_per_core: float
) -> AllocUsage:
    """The sample of one allocation; `cpu_percent` is of one core (Nomad's total_percent)."""
    held = alloc.allocated_resources
    return AllocUsage(
        alloc_id=alloc.id,
        namespace=alloc.namespace,
        job_id=alloc.job_id,
        task_group=alloc.task_group,
        node_id=alloc.node_id,
        time_ns=time_ns,
        cpu_mhz=cpu_mhz,
        cpu_percent=cpu_mhz / mhz_per_core * 100 if mhz_per_core > 0 else 0.0,
        memory_mb=memory_mb,
        allocated_cpu_mhz=held.cpu,
        allocated_memory_mb=held.memory_mb,
    )


def usage_samples(
    used: Sequence[tuple[Allocation, float, float]],
    now: float,
    mhz_per_core: Mapping[str, float],
    default_mhz_per_core: float,
) -> list[AllocUsage]:
    """The samples of (allocation, CPU MHz, memory MB) measured at `now` (unix seconds);
    `mhz_per_core` by node ID (node_mhz_per_core), the default for nodes it lacks."""
    time_ns = int(now * 1e9)
    return [
        alloc_usage(
            alloc, cpu, memory, time_ns, mhz_per_core.get(alloc.node_id, default_mhz_per_core)
        )
        for alloc, cpu, memory in used
    ]
