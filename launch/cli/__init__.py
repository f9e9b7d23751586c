"""The `drover` command line, following Nomad's.

`drover agent -dev` runs the whole system and serves the HTTP API; every other command talks
to that API at `DROVER_ADDR` (default http://127.0.0.1:4646) with the token `DROVER_TOKEN`.
Flags take one dash as in Nomad (`-json`); two dashes work too. Errors go to stderr as one
line naming what was wrong and where, with a non-zero exit.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from launch.cli import (
    cluster,
    deployment,
    dstack,
    experiment,
    job,
    job_launch,
    scaling,
    trace,
)
from launch.cli.client import ApiClient, CliError
from launch.cli.output import error


def _flag(parser: argparse.ArgumentParser, name: str, **kwargs: Any) -> None:
    """A Nomad-style `-flag` that also answers to `--flag`."""
    parser.add_argument(name, "-" + name, **kwargs)


def _port(text: str) -> int:
    """A TCP port number, for argparse (its error names the value)."""
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port (1-65535)")
    return port


def _demo(args: argparse.Namespace) -> int:
    from launch.demo import run_demo

    return run_demo(nodes=args.nodes, workers=args.workers, seed=args.seed)


def _job_limits(args: argparse.Namespace) -> Any:
    from contracts.jobspec.limits import JobLimits

    values = {
        "count": args.job_max_count,
        "groups": args.job_max_groups,
        "tasks": args.job_max_tasks,
        "meta-bytes": args.job_max_meta_bytes,
        "bytes": args.job_max_bytes,
    }
    for name, value in values.items():
        if value < 1:
            raise CliError(f"-job-max-{name}: expected a number >= 1, got {value}", code=2)
    return JobLimits(
        max_count=values["count"],
        max_groups=values["groups"],
        max_tasks=values["tasks"],
        max_meta_bytes=values["meta-bytes"],
        max_job_bytes=values["bytes"],
    )


def _snapshot_policy(args: argparse.Namespace) -> Any:
    from actors.leader.snapshots import SnapshotPolicy

    if args.snapshot_every < 1:
        raise CliError(
            f"-snapshot-every: expected a number >= 1, got {args.snapshot_every}", code=2
        )
    if args.snapshot_tail < 0:
        raise CliError(f"-snapshot-tail: expected a number >= 0, got {args.snapshot_tail}", code=2)
    return SnapshotPolicy(every_entries=args.snapshot_every, keep_tail=args.snapshot_tail)


def _check_tls(args: argparse.Namespace) -> None:
    if bool(args.tls_cert) != bool(args.tls_key):
        raise CliError("-tls-cert and -tls-key go together", code=2)
    if args.tls_cert:
        from actors.api.server import tls_context

        try:
            tls_context(args.tls_cert, args.tls_key)
        except ValueError as exc:
            raise CliError(str(exc), code=2) from None


def _node_name(args: argparse.Namespace) -> str:
    """`-node NAME`: the agent's own node's name (default: the host name)."""
    if args.node is None:
        return ""
    if not args.node.strip():
        raise CliError(f"-node: expected a node name, got {args.node!r}", code=2)
    return str(args.node)


def _agent(args: argparse.Namespace) -> int:
    if not args.dev:
        raise CliError("agent: only -dev mode is available so far", code=2)
    _check_tls(args)
    node_name = _node_name(args)
    import signal
    import threading
    import time
    from pathlib import Path

    from actors.agent.core import FleetSpec
    from actors.streams.client import redacted
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
        node_name=node_name,
        raw_exec=True,  # as in Nomad's -dev mode
        http_addr=args.http_addr,
        rpc_port=args.rpc_port,
        tls_cert=Path(args.tls_cert) if args.tls_cert else None,
        tls_key=Path(args.tls_key) if args.tls_key else None,
        acl_enabled=args.acl_enabled,
        acl_bootstrap_token=args.acl_bootstrap_token,
        autoscaler_policy_dir=Path(args.autoscaler_policy_dir)
        if args.autoscaler_policy_dir
        else None,
        autoscaler_prometheus_address=args.autoscaler_prometheus_addr,
        load_time_factor=args.load_time_factor,
        job_limits=_job_limits(args),
        snapshot_policy=_snapshot_policy(args),
        pace_heap=True,  # this process serves the API from its replica
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
            f"API {system.http_address}, redis {redacted(system.redis_url)}, "
            f"{len(system.workers)} scheduler workers, {len(system.agents)} client agents, "
            f"{nodes} nodes. Ctrl-C stops it.",
            flush=True,
        )
        stop.wait()
    finally:
        print("drover: shutting down", flush=True)
        system.stop()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="drover", description="A Nomad-style cluster scheduler.")
    _flag(parser, "-address", default=None, help="API address (default: $DROVER_ADDR)")
    _flag(parser, "-token", default=None, help="ACL token (default: $DROVER_TOKEN)")
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser("demo", help="run the system on a simulated fleet and report")
    _flag(demo, "-nodes", type=int, default=40)
    _flag(demo, "-workers", type=int, default=4)
    _flag(demo, "-seed", type=int, default=1)
    demo.set_defaults(handler=_demo, needs_client=False)

    agent = commands.add_parser("agent", help="run drover (-dev: everything in one process tree)")
    _flag(agent, "-dev", action="store_true", help="development mode")
    _flag(agent, "-data-dir", default=".drover-data")
    _flag(agent, "-http-addr", default="127.0.0.1:4646", help="API address (loopback by default)")
    _flag(
        agent,
        "-rpc-port",
        type=_port,
        default=4647,
        help="the RPC port the server reports as its address (Nomad's ports { rpc }; nothing"
        " listens there: drover's servers talk through Redis)",
    )
    _flag(agent, "-redis-url", default=None, help="default: embedded")
    _flag(agent, "-ray-address", default=None, help="default: local Ray")
    _flag(agent, "-workers", type=int, default=None, help="default: CPUs less one")
    _flag(agent, "-nodes", type=int, default=3, help="simulated dev nodes")
    _flag(agent, "-node", default=None, help="the agent's own node's name (default: host name)")
    _flag(agent, "-acl-enabled", action="store_true", help="require X-Nomad-Token")
    _flag(agent, "-tls-cert", default=None, help="serve HTTPS with this PEM certificate")
    _flag(agent, "-tls-key", default=None, help="and this PEM key")
    _flag(agent, "-acl-bootstrap-token", default=None, help="issue this management token")
    _flag(
        agent,
        "-autoscaler-policy-dir",
        default=None,
        help="scaling policy files (*.hcl) the autoscaler loads",
    )
    _flag(
        agent,
        "-autoscaler-prometheus-addr",
        default=None,
        help='the Prometheus server (http://host:port) that source = "prometheus" checks query',
    )
    _flag(
        agent,
        "-load-time-factor",
        type=float,
        default=1.0,
        help="mock load models run this many times faster than real time (experiments)",
    )
    from actors.leader.snapshots import SnapshotPolicy

    policy = SnapshotPolicy()
    _flag(
        agent,
        "-snapshot-every",
        type=int,
        default=policy.every_entries,
        help="the leader snapshots the state after this many log entries (or 256 MB)",
    )
    _flag(
        agent,
        "-snapshot-tail",
        type=int,
        default=policy.keep_tail,
        help="log entries kept before a snapshot, for followers that lag",
    )
    from contracts.jobspec.limits import DEFAULT_LIMITS as LIMITS

    for name, default, what in (
        ("count", LIMITS.max_count, "allocations one group may ask for"),
        ("groups", LIMITS.max_groups, "task groups in a job"),
        ("tasks", LIMITS.max_tasks, "tasks in a group"),
        ("meta-bytes", LIMITS.max_meta_bytes, "bytes of a job's meta blocks"),
        ("bytes", LIMITS.max_job_bytes, "bytes of a submitted job"),
    ):
        _flag(agent, f"-job-max-{name}", type=int, default=default, help=f"most {what}")
    agent.set_defaults(handler=_agent, needs_client=False)

    job_launch.add_parsers(job.add_parser(commands, _flag), _flag)
    cluster.add_parsers(commands, _flag)
    deployment.add_parsers(commands, _flag)
    dstack.add_parsers(commands, _flag)
    scaling.add_parser(commands, _flag)
    trace.add_parser(commands, _flag)
    experiment.add_parser(commands, _flag)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.needs_client:
            code: int = args.handler(args, ApiClient(args.address, args.token))
        else:
            code = args.handler(args)
    except CliError as exc:
        error(str(exc))
        return exc.code
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
