"""The `drover` command line.

Subcommands grow with the system; today: `drover agent -dev` (the whole system on the
embedded defaults), `drover demo` (the scheduling core on a simulated fleet) and
`drover job validate FILE` (parse, canonicalise and validate a job file).
Errors go to stderr as one line naming what was wrong and where, with a non-zero exit.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import orjson

from contracts import ValidationError, to_wire


def _job_validate(args: argparse.Namespace) -> int:
    from contracts.jobspec import parse_job_file_with_warnings

    try:
        job, warnings = parse_job_file_with_warnings(args.file)
    except ValidationError as exc:
        for problem in exc.problems:
            print(f"drover: {args.file}: {problem}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"drover: {args.file}: {exc.strerror}", file=sys.stderr)
        return 1
    for warning in warnings:
        print(f"drover: warning: {args.file}: {warning}", file=sys.stderr)
    if args.json:
        print(orjson.dumps({"Job": to_wire(job)}, option=orjson.OPT_INDENT_2).decode())
    else:
        groups = ", ".join(f"{tg.name} x{tg.count}" for tg in job.task_groups)
        print(f'Job "{job.id}" ({job.type}, priority {job.priority}) is valid: {groups}')
    return 0


def _demo(args: argparse.Namespace) -> int:
    from launch.demo import run_demo

    return run_demo(nodes=args.nodes, workers=args.workers, seed=args.seed)


def _agent(args: argparse.Namespace) -> int:
    if not args.dev:
        print("drover: agent: only -dev mode is available so far", file=sys.stderr)
        return 2
    import signal
    import threading
    import time
    from pathlib import Path

    from actors.agent.core import FleetSpec
    from launch.system import DroverSystem, SystemConfig

    started = time.monotonic()
    config = SystemConfig(
        data_dir=Path(args.data_dir),
        redis_url=args.redis_url,
        ray_address=args.ray_address,
        workers=args.workers,
        fleets=[
            FleetSpec(
                name="dev",
                count=args.nodes,
                cpu_mhz=4000,
                memory_mb=8192,
                disk_mb=50_000,
                drivers=("mock", "raw_exec"),
            )
        ]
        if args.nodes
        else [],
        real_agents=True,
        raw_exec=True,  # as in Nomad's -dev mode
    )
    system = DroverSystem(config)
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        system.start()
        nodes = len(system.client()._read("nodes"))
        print(
            f"drover agent -dev started in {time.monotonic() - started:.1f}s: "
            f"redis {system.redis_url}, {len(system.workers)} scheduler workers, "
            f"{len(system.agents)} client agents, {nodes} nodes. Ctrl-C stops it.",
            flush=True,
        )
        stop.wait()
    finally:
        print("drover: shutting down", flush=True)
        system.stop()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="drover", description="A Nomad-style cluster scheduler.")
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser("demo", help="schedule the example jobs on a simulated fleet")
    demo.add_argument("-nodes", "--nodes", type=int, default=40)
    demo.add_argument("-workers", "--workers", type=int, default=4)
    demo.add_argument("-seed", "--seed", type=int, default=1)
    demo.set_defaults(handler=_demo)

    agent = commands.add_parser("agent", help="run drover (-dev: everything in one process tree)")
    agent.add_argument("-dev", "--dev", action="store_true", help="development mode")
    agent.add_argument("-data-dir", "--data-dir", default=".drover-data")
    agent.add_argument("-redis-url", "--redis-url", default=None, help="default: embedded")
    agent.add_argument("-ray-address", "--ray-address", default=None, help="default: local Ray")
    agent.add_argument("-workers", "--workers", type=int, default=None, help="default: CPUs")
    agent.add_argument("-nodes", "--nodes", type=int, default=3, help="simulated dev nodes")
    agent.set_defaults(handler=_agent)

    job = commands.add_parser("job", help="job commands")
    job_commands = job.add_subparsers(dest="job_command", required=True)
    validate = job_commands.add_parser("validate", help="parse and validate a job file")
    validate.add_argument("file")
    validate.add_argument(
        "-json", "--json", action="store_true", help="print the canonical job as JSON"
    )
    validate.set_defaults(handler=_job_validate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
