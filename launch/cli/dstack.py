"""dstack's commands on drover: `drover apply -f FILE` (a fleet or a task file), `drover ps`,
`drover run status RUN`, `drover stop RUN`, and `drover fleet status|apply|delete`."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import yaml

from launch.cli.client import ApiClient, CliError, segment
from launch.cli.output import ago, key_values, print_json, table


def _load(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            declared: Any = yaml.safe_load(handle)
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise CliError(f"{path}: invalid YAML: {exc}".replace("\n", " ")) from None
    if not isinstance(declared, dict):
        raise CliError(f"{path}: expected a mapping with `type: fleet` or `type: task`")
    return declared


def _apply_fleet(path: str, declared: dict[str, Any], client: ApiClient) -> int:
    try:
        reply = client.post("/v1/fleets", {"Fleet": declared})
    except CliError as exc:
        raise CliError(f"{path}: {exc}") from None
    print(f'Fleet "{reply["Name"]}" applied: {reply["Nodes"]} instances')
    return 0


def _apply_task(path: str, declared: dict[str, Any], client: ApiClient) -> int:
    body = {
        "Run": {k: v for k, v in declared.items() if k != "type"},
        # Commands (and Ray's working_dir) run where the task file is, unless it says.
        "WorkingDir": str(Path(path).resolve().parent),
    }
    try:
        reply = client.post("/v1/runs", body)
    except CliError as exc:
        raise CliError(f"{path}: {exc}") from None
    print(f'Run "{reply["Name"]}" submitted (evaluation {reply["EvalID"][:8]})')
    print(f"  drover run status {reply['Name']}")
    return 0


def apply(args: argparse.Namespace, client: ApiClient) -> int:
    declared = _load(args.file)
    kind = declared.get("type")
    if kind == "fleet":
        return _apply_fleet(args.file, declared, client)
    if kind == "task":
        return _apply_task(args.file, declared, client)
    raise CliError(f"{args.file}: type: expected fleet or task, got {kind!r}")


def fleet_apply(args: argparse.Namespace, client: ApiClient) -> int:
    declared = _load(args.file)
    if declared.get("type", "fleet") != "fleet":
        raise CliError(f"{args.file}: type: expected fleet, got {declared.get('type')!r}")
    return _apply_fleet(args.file, declared, client)


def fleet_status(args: argparse.Namespace, client: ApiClient) -> int:
    if args.fleet:
        fleet = client.get(f"/v1/fleet/{segment(args.fleet)}")
        if args.json:
            print_json(fleet)
            return 0
        print(
            key_values(
                [
                    ("Name", fleet["Name"]),
                    ("Status", fleet.get("Status", "active")),
                    ("Backend", fleet["Backend"]),
                    ("Placement", fleet["Placement"]),
                    ("Blocks", fleet["Blocks"]),
                    ("Instances", f"{fleet['Ready']} ready, {fleet['Down']} down"),
                    ("Busy", fleet["Busy"]),
                ]
            )
        )
        print("\nInstances")
        print(
            table(
                ["Name", "Status", "Blocks", "Address"],
                [(i["Name"], i["Status"], i["Busy"], i["Address"]) for i in fleet["Instances"]],
            )
        )
        return 0
    fleets = client.get("/v1/fleets")
    if args.json:
        print_json(fleets)
        return 0
    if not fleets:
        print("No fleets declared")
        return 0
    print(
        table(
            [
                "Name",
                "Status",
                "Instances",
                "Ready",
                "Placement",
                "Blocks",
                "Busy",
                "CPU",
                "Memory",
                "GPUs",
                "DC",
                "Allocs",
            ],
            [
                (
                    f["Name"],
                    f.get("Status", "active"),
                    f["Nodes"],
                    f["Ready"],
                    f["Placement"],
                    f["Blocks"],
                    f["Busy"],
                    f"{f['CPU']} MHz",
                    f"{f['MemoryMB']} MiB",
                    f"{f['GPUs']} {f['GPUModel']}".strip(),
                    f["Datacenter"],
                    f["Allocs"],
                )
                for f in fleets
            ],
        )
    )
    return 0


def fleet_delete(args: argparse.Namespace, client: ApiClient) -> int:
    """Drain the fleet's instances and remove each once drained; wait for that unless
    -detach (Nomad's `node drain` deadline: runs and batch work finish, or are forced off at
    the deadline; -force at once)."""
    query = {"force": "true"} if args.force else {"deadline": f"{args.deadline:g}"}
    reply = client.delete(f"/v1/fleet/{segment(args.fleet)}", **query)
    print(f'Fleet "{reply["Name"]}" deleting: {reply["Draining"]} instances draining')
    while not args.detach:
        fleet = next((f for f in client.get("/v1/fleets") if f["Name"] == reply["Name"]), None)
        if fleet is None:
            print(f'Fleet "{reply["Name"]}" deleted')
            break
        left, allocs = len(fleet["Instances"]), fleet["Allocs"]
        print(f"    {left} instances left, {allocs} allocations on them")
        time.sleep(args.poll)
    return 0


def _ranks(run: dict[str, Any]) -> str:
    return ", ".join(f"{r['Instance']} ({r['Blocks']})" for r in run["Ranks"]) or "-"


def ps(args: argparse.Namespace, client: ApiClient) -> int:
    runs = client.get("/v1/runs")
    if args.json:
        print_json(runs)
        return 0
    if not runs:
        print("No runs")
        return 0
    print(
        table(
            ["Name", "Status", "Nodes", "Instances (blocks)", "Submitted"],
            [(r["Name"], r["Status"], r["Nodes"], _ranks(r), ago(r["SubmitTime"])) for r in runs],
        )
    )
    return 0


def run_status(args: argparse.Namespace, client: ApiClient) -> int:
    run = client.get(f"/v1/run/{segment(args.run)}")
    if args.json:
        print_json(run)
        return 0
    print(
        key_values(
            [
                ("Name", run["Name"]),
                ("Status", run["Status"]),
                ("Nodes", run["Nodes"]),
                ("Priority", run["Priority"]),
                ("Stop criteria", run["StopCriteria"]),
                ("Submitted", ago(run["SubmitTime"])),
            ]
        )
    )
    if run["Waiting"]:
        reasons = ", ".join(f"{k}: {v}" for k, v in sorted(run["Waiting"].items()))
        print(f"\nWaiting for capacity ({reasons})")
    if run["Ranks"]:
        print("\nRanks")
        print(
            table(
                ["Rank", "Alloc ID", "Instance", "Fleet", "Blocks", "GPUs", "Status"],
                [
                    (
                        r["Rank"],
                        r["AllocID"][:8],
                        r["Instance"],
                        r["Fleet"],
                        r["Blocks"],
                        r["GPUs"],
                        r["ClientStatus"],
                    )
                    for r in run["Ranks"]
                ],
            )
        )
    return 0


def stop(args: argparse.Namespace, client: ApiClient) -> int:
    reply = client.post(f"/v1/run/{segment(args.run)}/stop")
    print(f'Run "{reply["Name"]}" stopping (evaluation {reply["EvalID"][:8]})')
    return 0


def add_parsers(commands: Any, flag: Any) -> None:
    def cmd(sub: Any, name: str, handler: Any, help_text: str, json: bool = False) -> Any:
        p = sub.add_parser(name, help=help_text)
        p.set_defaults(handler=handler, needs_client=True)
        if json:
            flag(p, "-json", action="store_true", help="print JSON")
        return p

    p = cmd(commands, "apply", apply, "apply a dstack fleet or task file")
    p.add_argument("-f", "--file", dest="file", required=True, help="the YAML file")
    cmd(commands, "ps", ps, "list runs", json=True)
    p = cmd(commands, "stop", stop, "stop a run")
    p.add_argument("run")
    run = commands.add_parser("run", help="runs").add_subparsers(dest="run_command", required=True)
    p = cmd(run, "status", run_status, "show a run and its ranks", json=True)
    p.add_argument("run")

    fleet = commands.add_parser("fleet", help="fleets").add_subparsers(
        dest="fleet_command", required=True
    )
    p = cmd(fleet, "apply", fleet_apply, "declare a fleet from a YAML file")
    p.add_argument("file")
    p = cmd(fleet, "status", fleet_status, "list the fleets, or show one", json=True)
    p.add_argument("fleet", nargs="?")
    p = cmd(fleet, "delete", fleet_delete, "delete a fleet: its instances drain, then leave")
    flag(p, "-deadline", type=float, default=3600.0, help="seconds before runs are forced off")
    flag(p, "-force", action="store_true", help="force everything off at once")
    flag(p, "-detach", action="store_true", help="return at once; do not wait for the removal")
    flag(p, "-poll", type=float, default=2.0, help=argparse.SUPPRESS)
    p.add_argument("fleet")
