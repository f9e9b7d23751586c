"""`drover job ...`: run, plan, status (job_status.py), inspect, history, stop, revert, scale,
scaling-events, validate — following `nomad job ...`, against the HTTP API."""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from actors.api.core.shapes import job_to_nomad
from contracts import Job, ValidationError, to_wire
from contracts.jobspec import parse_job_file_with_warnings
from launch.cli.client import ApiClient, CliError, segment
from launch.cli.job_status import status
from launch.cli.output import date, error, key_values, print_json, short, table

TERMINAL_EVAL = ("complete", "failed", "canceled")


def _parse(path: str) -> tuple[Job, list[str]]:
    """A job file parsed and validated here; every problem names the file."""
    try:
        return parse_job_file_with_warnings(path)
    except ValidationError as exc:
        raise CliError("; ".join(f"{path}: {p}" for p in exc.problems)) from None
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror or exc}") from None


def _load(path: str) -> tuple[dict[str, Any], list[str]]:
    """The job file as Nomad API JSON; its `ray` tasks' code is the file's directory unless
    they say otherwise (`runtime_env.working_dir`, as `ray job submit` takes it)."""
    job, warnings = _parse(path)
    return job_to_nomad(with_working_dir(job, Path(path).resolve().parent)), warnings


def with_working_dir(job: Job, directory: Path) -> Job:
    """`working_dir` set on every `ray` task that has none (the API uploads it to Ray)."""
    groups = []
    for group in job.task_groups:
        tasks = []
        for task in group.tasks:
            runtime_env = task.config.get("runtime_env")
            if task.driver == "ray" and (runtime_env is None or isinstance(runtime_env, dict)):
                runtime_env = {"working_dir": str(directory), **(runtime_env or {})}
                task = dataclasses.replace(task, config={**task.config, "runtime_env": runtime_env})
            tasks.append(task)
        groups.append(dataclasses.replace(group, tasks=tuple(tasks)))
    return dataclasses.replace(job, task_groups=tuple(groups))


def follow(args: argparse.Namespace, client: ApiClient, reply: dict[str, Any]) -> int:
    """Monitor the write's evaluation, unless -detach (or it created none)."""
    if args.detach or not reply.get("EvalID"):
        print(f"Evaluation ID: {reply.get('EvalID', '')}")
        return 0
    return monitor(client, reply["EvalID"])


def _job_path(job_id: str, suffix: str = "") -> str:
    return f"/v1/job/{segment(job_id)}{suffix}"


# -- monitoring ---------------------------------------------------------------------------------


def monitor(client: ApiClient, eval_id: str, timeout_s: float = 300.0) -> int:
    """Follow an evaluation to its end, as `nomad job run` does; then follow the allocations
    it placed until none is pending. 0: all placed; 2: placement failures."""
    print(f'==> Monitoring evaluation "{short(eval_id)}"')
    deadline = time.monotonic() + timeout_s
    index, status, seen = 0, "", set()
    ev: dict[str, Any] = {}
    while time.monotonic() < deadline:
        ev, index = client.request(
            "GET", f"/v1/evaluation/{segment(eval_id)}", query={"index": index, "wait": "2s"}
        )
        if not status:
            print(f'    Evaluation triggered by job "{ev["JobID"]}"')
        allocs = client.get(f"/v1/evaluation/{segment(eval_id)}/allocations")
        for alloc in allocs:
            if alloc["ID"] not in seen and alloc["DesiredStatus"] == "run":
                seen.add(alloc["ID"])
                print(
                    f'    Allocation "{short(alloc["ID"])}" created: node '
                    f'"{short(alloc["NodeID"])}", group "{alloc["TaskGroup"]}"'
                )
        if ev["Status"] != status:
            if status:
                print(f'    Evaluation status changed: "{status}" -> "{ev["Status"]}"')
            status = ev["Status"]
        if status in TERMINAL_EVAL:
            break
    else:
        raise CliError(f'evaluation "{short(eval_id)}" still {status} after {timeout_s:.0f}s')
    failed = ev.get("FailedTGAllocs") or {}
    if not failed:
        print(f'==> Evaluation "{short(eval_id)}" finished with status "{status}"')
    else:
        print(
            f'==> Evaluation "{short(eval_id)}" finished with status "{status}" but failed to '
            "place all allocations:"
        )
        for group, metric in failed.items():
            print(f'    Task Group "{group}" (failed to place allocations):')
            for line in _metric_lines(metric):
                print(f"      * {line}")
        if ev.get("BlockedEval"):
            print(
                f'    Evaluation "{short(ev["BlockedEval"])}" waiting for additional capacity '
                "to place remainder"
            )
    if seen:
        _follow_allocations(client, eval_id, deadline)
    return 2 if failed or status != "complete" else 0


def _metric_lines(metric: dict[str, Any]) -> list[str]:
    lines = []
    if metric.get("NodesEvaluated") == 0:
        lines.append("No nodes were eligible for evaluation")
    for constraint, count in (metric.get("ConstraintFiltered") or {}).items():
        lines.append(f'Constraint "{constraint}": {count} nodes excluded by filter')
    for cls, count in (metric.get("ClassFiltered") or {}).items():
        lines.append(f'Class "{cls}": {count} nodes excluded by filter')
    if metric.get("NodesExhausted"):
        lines.append(f"Resources exhausted on {metric['NodesExhausted']} nodes")
    for dimension, count in (metric.get("DimensionExhausted") or {}).items():
        lines.append(f'Dimension "{dimension}" exhausted on {count} nodes')
    return lines or ["No node fits"]


def _follow_allocations(client: ApiClient, eval_id: str, deadline: float) -> None:
    last = ""
    while True:
        allocs = [
            a
            for a in client.get(f"/v1/evaluation/{segment(eval_id)}/allocations")
            if a["DesiredStatus"] == "run"
        ]
        counts: dict[str, int] = {}
        for alloc in allocs:
            counts[alloc["ClientStatus"]] = counts.get(alloc["ClientStatus"], 0) + 1
        line = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        if line != last:
            print(f"    Allocations: {line}")
            last = line
        if not counts.get("pending") or time.monotonic() > deadline:
            return
        time.sleep(0.2)


# -- commands -------------------------------------------------------------------------------------


def run(args: argparse.Namespace, client: ApiClient) -> int:
    job, warnings = _load(args.file)
    for warning in warnings:
        error(f"warning: {args.file}: {warning}")
    body: dict[str, Any] = {"Job": job, "PreserveCounts": args.preserve_counts}
    if args.check_index is not None:
        body |= {"EnforceIndex": True, "JobModifyIndex": args.check_index}
    reply = client.post("/v1/jobs", body)
    if reply.get("Warnings"):
        error(f"warning: {reply['Warnings']}")
    if not reply.get("EvalID"):
        # A periodic or parameterized job is a template: registered, never evaluated itself.
        print("Job registration successful")
        return 0
    if args.detach:
        print("Job registration successful")
        print(f"Evaluation ID: {reply['EvalID']}")
        return 0
    return monitor(client, reply["EvalID"])


def plan(args: argparse.Namespace, client: ApiClient) -> int:
    job, _ = _load(args.file)
    reply = client.post(_job_path(job["ID"], "/plan"), {"Job": job, "Diff": True})
    updates = (reply.get("Annotations") or {}).get("DesiredTGUpdates") or {}
    diff = (reply.get("Diff") or {}).get("Type", "None")
    sign = {"Added": "+", "Edited": "+/-", "Deleted": "-"}.get(diff, "")
    print(f'{sign} Job: "{job["ID"]}"'.strip())
    changes = False
    for group, u in updates.items():
        parts = [
            f"{u.get(key, 0)} {label}"
            for key, label in (
                ("Place", "create"),
                ("DestructiveUpdate", "create/destroy update"),
                ("InPlaceUpdate", "in-place update"),
                ("Migrate", "migrate"),
                ("Stop", "destroy"),
                ("Ignore", "ignore"),
            )
            if u.get(key)
        ]
        changes |= any(u.get(k) for k in ("Place", "DestructiveUpdate", "Stop", "Migrate"))
        print(f'    Task Group: "{group}" ({", ".join(parts) or "no changes"})')
    print("\nScheduler dry-run:")
    failed = reply.get("FailedTGAllocs") or {}
    if not failed:
        print("- All tasks successfully allocated.")
    else:
        print("- WARNING: Failed to place all allocations.")
        for group, metric in failed.items():
            print(f'  Task Group "{group}" (failed to place allocations):')
            for line in _metric_lines(metric):
                print(f"    * {line}")
    _print_preemptions((reply.get("Annotations") or {}).get("PreemptedAllocs") or [])
    index = reply["JobModifyIndex"]
    print(f"\nJob Modify Index: {index}")
    print(
        "To submit the job with version verification run:\n\n"
        f"drover job run -check-index {index} {args.file}"
    )
    # Nomad's exit codes: 0 no allocations created or destroyed, 1 some would be.
    return 1 if changes else 0


def _print_preemptions(preempted: list[dict[str, Any]]) -> None:
    """Nomad's plan output: each allocation the job would evict, or per job past ten."""
    if not preempted:
        return
    print("\nPreemptions:\n")
    if len(preempted) <= 10:
        rows = [[a["ID"], a["JobID"], a["TaskGroup"]] for a in preempted]
        print(table(["Alloc ID", "Job ID", "Task Group"], rows))
        return
    per_job = Counter((a["JobID"], a.get("Namespace", "default")) for a in preempted)
    rows = [[job_id, namespace, str(n)] for (job_id, namespace), n in sorted(per_job.items())]
    print(table(["Job ID", "Namespace", "Preemptions"], rows))


def inspect(args: argparse.Namespace, client: ApiClient) -> int:
    if args.version is None:
        job = client.get(_job_path(args.job), namespace=args.namespace)
    else:
        versions = client.get(_job_path(args.job, "/versions"), namespace=args.namespace)
        job = next((v for v in versions["Versions"] if v["Version"] == args.version), None)
        if job is None:
            raise CliError(f'job "{args.job}" has no version {args.version}')
    print_json({"Job": job})
    return 0


def history(args: argparse.Namespace, client: ApiClient) -> int:
    reply = client.get(_job_path(args.job, "/versions"), namespace=args.namespace)
    versions = reply["Versions"]  # newest first, as Nomad lists them
    if args.json:
        print_json(versions)
        return 0
    blocks = [
        key_values(
            [
                ("Version", v["Version"]),
                ("Stable", str(v["Stable"]).lower()),
                ("Status", v["Status"]),
                ("Submit Date", date(v["SubmitTime"])),
            ]
        )
        for v in versions
    ]
    print("\n\n".join(blocks))
    return 0


def stop(args: argparse.Namespace, client: ApiClient) -> int:
    reply = client.delete(
        _job_path(args.job), purge=str(args.purge).lower(), namespace=args.namespace
    )
    return follow(args, client, reply)


def revert(args: argparse.Namespace, client: ApiClient) -> int:
    reply = client.post(
        _job_path(args.job, "/revert"),
        {"JobID": args.job, "JobVersion": args.version},
        namespace=args.namespace,
    )
    return follow(args, client, reply)


def scale(args: argparse.Namespace, client: ApiClient) -> int:
    body = {
        "Count": args.count,
        "Target": {"Group": args.group, "Job": args.job},
        "Message": "submitted using the drover CLI",
    }
    reply = client.post(_job_path(args.job, "/scale"), body, namespace=args.namespace)
    return follow(args, client, reply)


def scaling_events(args: argparse.Namespace, client: ApiClient) -> int:
    reply = client.get(_job_path(args.job, "/scale"), namespace=args.namespace)
    rows = [
        (group, e.get("Count"), e.get("PreviousCount"), date(e.get("Time", 0)), e.get("Message"))
        for group, info in reply["TaskGroups"].items()
        for e in info["Events"]
    ]
    if args.json:
        print_json(reply)
    elif not rows:
        print(f'No scaling events found for job "{args.job}"')
    else:
        print(table(["Task Group", "Count", "PrevCount", "Date", "Message"], rows))
    return 0


def validate(args: argparse.Namespace, client: ApiClient | None = None) -> int:
    job, warnings = _parse(args.file)
    for warning in warnings:
        error(f"warning: {args.file}: {warning}")
    if args.json:
        print(orjson.dumps({"Job": to_wire(job)}, option=orjson.OPT_INDENT_2).decode())
    else:
        groups = ", ".join(f"{tg.name} x{tg.count}" for tg in job.task_groups)
        print(f'Job "{job.id}" ({job.type}, priority {job.priority}) is valid: {groups}')
    return 0


def add_parser(commands: Any, flag: Any) -> Any:
    """The `job` subcommands; returns the factory that adds one (for job_launch.py's)."""
    job = commands.add_parser("job", help="run and manage jobs")
    sub = job.add_subparsers(dest="job_command", required=True)

    def cmd(name: str, handler: Any, help_text: str, *, json: bool = False) -> Any:
        p = sub.add_parser(name, help=help_text)
        p.set_defaults(handler=handler, needs_client=handler is not validate)
        flag(p, "-namespace", default="default", help="namespace (default: default)")
        if json:
            flag(p, "-json", action="store_true", help="print JSON")
        return p

    p = cmd("run", run, "register a job file and follow its evaluation")
    flag(p, "-preserve-counts", action="store_true", help="keep the counts of existing groups")
    flag(p, "-detach", action="store_true", help="do not wait for the evaluation")
    flag(p, "-check-index", type=int, default=None, help="register only at this modify index")
    p.add_argument("file")
    p = cmd("plan", plan, "dry-run a job file: what would be placed, what would fail")
    p.add_argument("file")
    p = cmd("status", status, "list jobs, or show one", json=True)
    p.add_argument("job", nargs="?")
    p = cmd("inspect", inspect, "print a job (or one version) as JSON")
    flag(p, "-version", type=int, default=None)
    p.add_argument("job")
    p = cmd("history", history, "list a job's versions, newest first", json=True)
    p.add_argument("job")
    p = cmd("stop", stop, "stop a job")
    flag(p, "-purge", action="store_true", help="remove the job and its history")
    flag(p, "-detach", action="store_true")
    p.add_argument("job")
    p = cmd("revert", revert, "revert a job to an earlier version")
    flag(p, "-detach", action="store_true")
    p.add_argument("job")
    p.add_argument("version", type=int)
    p = cmd("scale", scale, "set a task group's count")
    flag(p, "-detach", action="store_true")
    p.add_argument("job")
    p.add_argument("group")
    p.add_argument("count", type=int)
    p = cmd("scaling-events", scaling_events, "list a job's scaling events", json=True)
    p.add_argument("job")
    p = cmd("validate", validate, "parse and validate a job file (no agent needed)", json=True)
    p.add_argument("file")
    return cmd
