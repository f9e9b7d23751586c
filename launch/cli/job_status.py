"""`drover job status [JOB]`, as Nomad's `job status` prints it (command/job_status.go).

Without a job: the jobs listed. With one, the header, then by kind of job:
- periodic: "Children Job Summary" and "Previously Launched Jobs" (its children's IDs and
  statuses), with the next launch in the header;
- parameterized: "Parameterized Job" (payload and metadata), "Parameterized Job Summary" and
  "Dispatched Jobs";
- any other: "Summary" (allocations per group and status), "Latest Deployment" (its ID,
  status, description and Deployed table) when the job has one, and "Allocations".
Children are read as Nomad's CLI reads them: `GET /v1/jobs?prefix=<id>/periodic-` (or
`/dispatch-`), keeping those whose ParentID is the job; the counts come from the job's
summary (`Children`).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from contracts.cron import CronSpecError, next_launch
from contracts.launch import DISPATCH_LAUNCH_SUFFIX, PERIODIC_LAUNCH_SUFFIX, PeriodicConfig
from launch.cli.client import ApiClient, segment
from launch.cli.deployment import deployed_table
from launch.cli.output import ago, date, key_values, print_json, short, table

SUMMARY_FIELDS = ["Queued", "Starting", "Running", "Failed", "Complete", "Lost", "Unknown"]


def _job_path(job_id: str, suffix: str = "") -> str:
    return f"/v1/job/{segment(job_id)}{suffix}"


def status(args: argparse.Namespace, client: ApiClient) -> int:
    if not args.job:
        return _list(args, client)
    job = client.get(_job_path(args.job), namespace=args.namespace)
    summary = client.get(_job_path(args.job, "/summary"), namespace=args.namespace)
    periodic, parameterized = bool(job.get("Periodic")), bool(job.get("ParameterizedJob"))
    parameterized = parameterized and not job.get("Dispatched")
    if periodic or parameterized:
        suffix = DISPATCH_LAUNCH_SUFFIX if parameterized else PERIODIC_LAUNCH_SUFFIX
        listed = client.get("/v1/jobs", namespace=args.namespace, prefix=job["ID"] + suffix)
        children = [c for c in listed if c.get("ParentID") == job["ID"]]
        if args.json:
            print_json({"Job": job, "Summary": summary, "Children": children})
            return 0
        print(_header(job, periodic and not parameterized, template=True))
        print(_template(job, summary, children, parameterized))
        return 0
    allocs = client.get(_job_path(args.job, "/allocations"), namespace=args.namespace)
    deployment = client.get(_job_path(args.job, "/deployment"), namespace=args.namespace)
    if args.json:
        out = {"Job": job, "Summary": summary, "Allocations": allocs}
        print_json({**out, "LatestDeployment": deployment} if deployment else out)
        return 0
    print(_header(job, False))
    print("\nSummary")
    print(
        table(
            ["Task Group", *SUMMARY_FIELDS],
            [(g, *(s[f] for f in SUMMARY_FIELDS)) for g, s in summary["Summary"].items()],
        )
    )
    if deployment:
        print("\nLatest Deployment")
        print(
            key_values(
                [
                    ("ID", short(deployment["ID"])),
                    ("Status", deployment["Status"]),
                    ("Description", deployment["StatusDescription"]),
                ]
            )
        )
        if deployment["TaskGroups"]:
            print(f"\nDeployed\n{deployed_table(deployment)}")
    print("\nAllocations")
    print(_allocations(allocs))
    return 0


def _list(args: argparse.Namespace, client: ApiClient) -> int:
    jobs = client.get("/v1/jobs", namespace=args.namespace)
    if args.json:
        print_json(jobs)
    elif not jobs:
        print("No running jobs")
    else:
        rows = [
            (j["ID"], _type(j), j["Priority"], j["Status"], date(j["SubmitTime"])) for j in jobs
        ]
        print(table(["ID", "Type", "Priority", "Status", "Submit Date"], rows))
    return 0


def _type(stub: dict[str, Any]) -> str:
    """Nomad's getTypeString: `batch/periodic`, `batch/parameterized`."""
    kind = str(stub["Type"])
    kind += "/periodic" if stub.get("Periodic") else ""
    return kind + ("/parameterized" if stub.get("ParameterizedJob") else "")


def _header(job: dict[str, Any], periodic: bool, template: bool = False) -> str:
    """Nomad's header; the Periodic and Parameterized rows only for a template (Nomad prints
    them `false` for every other job too)."""
    pairs: list[tuple[str, Any]] = [
        ("ID", job["ID"]),
        ("Name", job["Name"]),
        ("Submit Date", date(job["SubmitTime"])),
        ("Type", job["Type"]),
        ("Priority", job["Priority"]),
        ("Datacenters", ",".join(job["Datacenters"])),
        ("Namespace", job["Namespace"]),
        ("Node Pool", job["NodePool"]),
        ("Status", f"{job['Status']} (stopped)" if job.get("Stop") else job["Status"]),
        ("Version", job["Version"]),
    ]
    if template:
        pairs.insert(-1, ("Periodic", str(bool(job.get("Periodic"))).lower()))
        pairs.insert(-1, ("Parameterized", str(bool(job.get("ParameterizedJob"))).lower()))
    if periodic:
        pairs.append(("Next Periodic Launch", _next_launch(job)))
    return key_values(pairs)


def _next_launch(job: dict[str, Any]) -> str:
    if job.get("Stop"):
        return "none (job stopped)"
    block = job["Periodic"]
    specs = block.get("Specs") or ([block["Spec"]] if block.get("Spec") else [])
    config = PeriodicConfig(
        crons=tuple(specs), time_zone=block.get("TimeZone") or "UTC", enabled=block["Enabled"]
    )
    now = time.time_ns()
    try:
        at = next_launch(config, now) if config.enabled else None
    except CronSpecError:
        at = None
    if at is None:
        return "none"
    return f"{date(at)} ({(at - now) / 1e9:.0f}s from now)"


def _template(
    job: dict[str, Any], summary: dict[str, Any], children: list[dict[str, Any]], dispatch: bool
) -> str:
    """A periodic or parameterized job: its children, as Nomad's outputPeriodicInfo and
    outputParameterizedInfo print them."""
    out: list[str] = []
    if dispatch:
        block = job["ParameterizedJob"]
        pairs = [
            ("Payload", block.get("Payload") or "optional"),
            ("Required Metadata", ", ".join(block.get("MetaRequired") or ())),
            ("Optional Metadata", ", ".join(block.get("MetaOptional") or ())),
        ]
        out.append(f"\nParameterized Job\n{key_values(pairs)}")
    counts = summary.get("Children") or {}
    title = "Parameterized Job Summary" if dispatch else "Children Job Summary"
    row = [counts.get(k, 0) for k in ("Pending", "Running", "Dead")]
    out.append(f"\n{title}\n{table(['Pending', 'Running', 'Dead'], [row])}")
    if not children:
        out.append(
            "\nNo dispatched instances of parameterized job found"
            if dispatch
            else "\nNo instances of periodic job found"
        )
    else:
        title = "Dispatched Jobs" if dispatch else "Previously Launched Jobs"
        rows = [(c["ID"], c["Status"]) for c in children]
        out.append(f"\n{title}\n{table(['ID', 'Status'], rows)}")
    return "\n".join(out)


def _allocations(allocs: list[dict[str, Any]]) -> str:
    if not allocs:
        return "No allocations placed"
    return table(
        ["ID", "Node ID", "Task Group", "Version", "Desired", "Status", "Created"],
        [
            (
                short(a["ID"]),
                short(a["NodeID"]),
                a["TaskGroup"],
                a["JobVersion"],
                a["DesiredStatus"],
                a["ClientStatus"],
                ago(a["CreateTime"]),
            )
            for a in reversed(allocs)
        ],
    )
