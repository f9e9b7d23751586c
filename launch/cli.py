"""The `drover` command line.

Subcommands grow with the system; today: `drover demo` (the scheduling core on a simulated
fleet) and `drover job validate FILE` (parse, canonicalise and validate a job file).
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="drover", description="A Nomad-style cluster scheduler.")
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser("demo", help="schedule the example jobs on a simulated fleet")
    demo.add_argument("-nodes", "--nodes", type=int, default=40)
    demo.add_argument("-workers", "--workers", type=int, default=4)
    demo.add_argument("-seed", "--seed", type=int, default=1)
    demo.set_defaults(handler=_demo)

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
