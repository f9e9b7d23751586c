"""`drover trace conflicts` and `drover trace show`: read the spans the actors exported as
JSON lines (`<data-dir>/telemetry/`, the default when no OTLP endpoint is set) and print the
plan-conflict report or one evaluation's trace as a terminal waterfall. With OTLP export,
use your collector's UI instead: the spans carry the same names, attributes and events."""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path
from typing import Any

from launch.cli.client import CliError
from observability.conflicts import conflict_report, render_json, render_text
from observability.jsonl import load_spans, telemetry_dir
from observability.records import SpanRecord
from observability.text import parse_duration
from observability.waterfall import find_trace_for_eval, linked_spans, render_waterfall


def _spans(data_dir: str) -> list[SpanRecord]:
    directory = telemetry_dir(Path(data_dir))
    if not directory.is_dir():
        raise CliError(
            f"no telemetry in {directory}: start the agent with this -data-dir and without an "
            "OTEL_EXPORTER_OTLP_ENDPOINT (spans then go to JSON lines there)"
        )
    return load_spans(directory)


def conflicts(args: argparse.Namespace) -> int:
    since_ns = None
    if args.since:
        try:
            since_ns = time.time_ns() - parse_duration(args.since)
        except ValueError:
            raise CliError(
                f"-since: expected a duration such as 10m or 1h, got {args.since!r}"
            ) from None
    report = conflict_report(_spans(args.data_dir), since_ns=since_ns)
    print(render_json(report) if args.json else render_text(report), end="")
    return 0


def show(args: argparse.Namespace) -> int:
    spans = _spans(args.data_dir)
    trace = find_trace_for_eval(spans, args.eval_id)
    if not trace:
        matches = {
            str(s.attributes.get("drover.eval.id"))
            for s in spans
            if str(s.attributes.get("drover.eval.id", "")).startswith(args.eval_id)
        }
        if len(matches) == 1:
            trace = find_trace_for_eval(spans, matches.pop())
        elif matches:
            raise CliError(f'eval prefix "{args.eval_id}" is ambiguous: {len(matches)} matches')
    if not trace:
        raise CliError(f'no spans for evaluation "{args.eval_id}" in {args.data_dir}')
    width = args.width or shutil.get_terminal_size((120, 40)).columns
    print(render_waterfall(trace, width=width, linked=linked_spans(spans, trace)), end="")
    return 0


def add_parser(commands: Any, flag: Any) -> None:
    sub = commands.add_parser("trace", help="plan conflicts and evaluation traces").add_subparsers(
        dest="trace_command", required=True
    )
    p = sub.add_parser("conflicts", help="plan conflicts by node, job pair and reason")
    flag(p, "-json", action="store_true", help="print JSON")
    flag(p, "-since", default=None, help="only conflicts this recent, e.g. 10m")
    flag(p, "-data-dir", default=".drover-data", help="the agent's data directory")
    p.set_defaults(handler=conflicts, needs_client=False)
    p = sub.add_parser("show", help="one evaluation's trace as a waterfall")
    flag(p, "-data-dir", default=".drover-data", help="the agent's data directory")
    flag(p, "-width", type=int, default=0, help="columns (default: the terminal's)")
    p.add_argument("eval_id")
    p.set_defaults(handler=show, needs_client=False)
