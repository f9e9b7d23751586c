"""What a declared fleet costs: `python -m bench.fleets`.

A simulated fleet is data (its instances are hosted by the one agent that hosts every
simulated fleet), not a process: this starts drover with no fleet, declares `--fleets` fleets
of `--instances` instances each through the HTTP API, as `drover fleet apply` does, and
measures the memory of drover's processes (every Ray worker and Redis, unique set size, so
shared pages count once) before, after the first (which starts the hosting agent), after all,
and after deleting them all. Prints one JSON line: `mb_before`, `mb_after_first`,
`mb_after`, `mb_per_more_fleet`, `mb_after_delete`, `processes_before/after`, `declare_s`
(all fleets) and `delete_s`.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import psutil

from launch.system import DroverSystem, SystemConfig

MB = 1024 * 1024
SETTLE_S = 3.0  # let registrations, log followers and GC come to rest before measuring


def drover_processes() -> list[psutil.Process]:
    """Ray's workers and daemons of this session, Redis, and this process."""
    me = psutil.Process()
    found = [me]
    for process in me.children(recursive=True):
        found.append(process)
    return found


def memory_mb() -> tuple[float, int]:
    total, count = 0, 0
    for process in drover_processes():
        try:
            total += process.memory_full_info().uss
            count += 1
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return total / MB, count


def call(base: str, method: str, path: str, body: Any = None) -> Any:
    data = orjson.dumps(body) if body is not None else None
    request = urllib.request.Request(base + path, data=data, method=method)
    with urllib.request.urlopen(request, timeout=120) as response:
        return orjson.loads(response.read())


def declare(base: str, i: int, instances: int) -> None:
    resources = {"cpu": 2, "memory": "4GB"}  # small fleets, as the issue counts them
    fleet = {"name": f"bench-{i}", "nodes": instances, "blocks": "auto", "resources": resources}
    call(base, "POST", "/v1/fleets", {"Fleet": fleet})


def run(fleets: int, instances: int, settle_s: float = SETTLE_S) -> dict[str, Any]:
    """`settle_s`: the rest before each measurement (shorter for a quick check: the count of
    processes is stable at once, the memory figures less so)."""

    def settle() -> None:
        time.sleep(settle_s)

    with tempfile.TemporaryDirectory() as data_dir:
        config = SystemConfig(
            data_dir=Path(data_dir), workers=1, num_cpus=2, http_addr="127.0.0.1:0"
        )
        with DroverSystem(config) as system:
            base = system.http_address
            settle()
            before, processes_before = memory_mb()
            started = time.perf_counter()
            declare(base, 0, instances)  # the first fleet starts the hosting agent
            settle()
            first, _ = memory_mb()
            for i in range(1, fleets):
                declare(base, i, instances)
            declare_s = time.perf_counter() - started
            declared = len(call(base, "GET", "/v1/fleets"))
            settle()
            after, processes_after = memory_mb()
            started = time.perf_counter()
            for i in range(fleets):
                call(base, "DELETE", f"/v1/fleet/bench-{i}")
            # Idle instances drain at once; each fleet goes once its last one has left.
            deadline = time.monotonic() + 60
            while (left := len(call(base, "GET", "/v1/fleets"))) and time.monotonic() < deadline:
                time.sleep(0.05)
            delete_s = time.perf_counter() - started
            settle()
            deleted, _ = memory_mb()
    return {
        "bench": "fleets",
        "fleets": fleets,
        "instances_per_fleet": instances,
        "fleets_declared": declared,
        "fleets_left_after_delete": left,
        "mb_before": round(before, 1),
        "mb_after_first": round(first, 1),
        "mb_after": round(after, 1),
        # The first fleet brings the agent that hosts them all; each one more costs:
        "mb_per_more_fleet": round((after - first) / max(1, fleets - 1), 3),
        "mb_after_delete": round(deleted, 1),
        "processes_before": processes_before,
        "processes_after": processes_after,
        "declare_s": round(declare_s, 2),
        "delete_s": round(delete_s, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fleets", type=int, default=100)
    parser.add_argument("--instances", type=int, default=1)
    args = parser.parse_args()
    print(orjson.dumps(run(args.fleets, args.instances)).decode())


if __name__ == "__main__":
    main()
