"""`drover job dispatch` and `drover job periodic force`, as Nomad's CLI has them."""

from __future__ import annotations

import argparse
import base64
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from launch.cli.client import ApiClient, segment
from launch.cli.job import follow
from launch.cli.output import error


def dispatch(args: argparse.Namespace, client: ApiClient) -> int:
    """Dispatch a parameterized job: -meta key=value (repeatable), an optional payload from
    a file or `-` (stdin), -id-prefix-template and -idempotency-token."""
    meta: dict[str, str] = {}
    for item in args.meta or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            error(f"-meta {item!r}: expected key=value")
            return 1
        meta[key] = value
    payload = b""
    if args.input:
        payload = sys.stdin.buffer.read() if args.input == "-" else Path(args.input).read_bytes()
    body = {
        "Meta": meta,
        "Payload": base64.b64encode(payload).decode(),
        "IdPrefixTemplate": args.id_prefix_template,
        "IdempotencyToken": args.idempotency_token,
    }
    reply = client.post(f"/v1/job/{segment(args.job)}/dispatch", body, namespace=args.namespace)
    print(f"Dispatched Job ID = {reply['DispatchedJobID']}")
    print(f"Evaluation ID     = {reply.get('EvalID') or '<none>'}")
    return follow(args, client, reply)


def periodic_force(args: argparse.Namespace, client: ApiClient) -> int:
    reply = client.post(f"/v1/job/{segment(args.job)}/periodic/force", {}, namespace=args.namespace)
    return follow(args, client, reply)


def add_parsers(cmd: Callable[..., Any], flag: Callable[..., Any]) -> None:
    p = cmd("dispatch", dispatch, "dispatch a parameterized job (payload from a file or -)")
    flag(p, "-meta", action="append", help="key=value, repeatable")
    flag(p, "-id-prefix-template", default="", help="put this in the child's ID")
    flag(p, "-idempotency-token", default="", help="dispatch at most once for this token")
    flag(p, "-detach", action="store_true", help="do not wait for the evaluation")
    p.add_argument("job")
    p.add_argument("input", nargs="?", default="")
    p = cmd("periodic", periodic_force, "force a periodic job's launch: periodic force JOB")
    flag(p, "-detach", action="store_true", help="do not wait for the evaluation")
    p.add_argument("action", choices=["force"])
    p.add_argument("job")
