"""`drover node ...`, `drover alloc status|signal` and `drover eval ...`."""

from __future__ import annotations

import argparse
from typing import Any

from launch.cli.client import ApiClient, CliError, segment
from launch.cli.output import ago, date, go_date, key_values, print_json, short, table

# -- nodes ----------------------------------------------------------------------------------------


def node_status(args: argparse.Namespace, client: ApiClient) -> int:
    if not args.node:
        nodes = client.get("/v1/nodes", resources="true")
        if args.json:
            print_json(nodes)
            return 0
        print(
            table(
                ["ID", "Node Pool", "DC", "Name", "Class", "Drain", "Eligibility", "Status"],
                [
                    (
                        short(n["ID"]),
                        n["NodePool"],
                        n["Datacenter"],
                        n["Name"],
                        n["NodeClass"] or "<none>",
                        str(n["Drain"]).lower(),
                        n["SchedulingEligibility"],
                        n["Status"],
                    )
                    for n in nodes
                ],
            )
        )
        return 0
    node_id = client.resolve("node", args.node)
    node = client.get(f"/v1/node/{segment(node_id)}")
    allocs = client.get(f"/v1/node/{segment(node_id)}/allocations")
    if args.json:
        print_json({"Node": node, "Allocations": allocs})
        return 0
    resources = node["NodeResources"]
    print(
        key_values(
            [
                ("ID", node["ID"]),
                ("Name", node["Name"]),
                ("Node Pool", node["NodePool"]),
                ("Class", node["NodeClass"] or "<none>"),
                ("DC", node["Datacenter"]),
                ("Drain", str(node["Drain"]).lower()),
                ("Eligibility", node["SchedulingEligibility"]),
                ("Status", node["Status"]),
                ("CPU", f"{resources['Cpu']['CpuShares']} MHz"),
                ("Memory", f"{resources['Memory']['MemoryMB']} MiB"),
                ("Devices", sum(len(d["Instances"]) for d in resources["Devices"])),
            ]
        )
    )
    live = [a for a in allocs if a["DesiredStatus"] == "run"]
    print("\nAllocations")
    print(
        table(
            ["ID", "Job ID", "Task Group", "Version", "Desired", "Status", "Created"],
            [
                (
                    short(a["ID"]),
                    a["JobID"],
                    a["TaskGroup"],
                    a["JobVersion"],
                    a["DesiredStatus"],
                    a["ClientStatus"],
                    ago(a["CreateTime"]),
                )
                for a in live
            ],
        )
        if live
        else "No allocations placed"
    )
    return 0


def _enable_disable(args: argparse.Namespace) -> bool:
    if args.enable == args.disable:
        raise CliError("exactly one of -enable and -disable is required")
    return bool(args.enable)


def node_drain(args: argparse.Namespace, client: ApiClient) -> int:
    enable = _enable_disable(args)
    node_id = client.resolve("node", args.node)
    if args.force and args.no_deadline:
        raise CliError("-force and -no-deadline are mutually exclusive")
    # Nomad's DrainSpec.Deadline: < 0 forces everything off now, 0 never forces.
    deadline_ns = -1 if args.force else 0 if args.no_deadline else int(args.deadline * 1e9)
    spec = {"Deadline": deadline_ns, "IgnoreSystemJobs": args.ignore_system} if enable else None
    reply = client.post(
        f"/v1/node/{segment(node_id)}/drain",
        {"NodeID": node_id, "DrainSpec": spec, "MarkEligible": not enable},
    )
    verb = "enabled" if enable else "disabled"
    print(f'Node "{short(node_id)}" drain strategy {verb}')
    for eval_id in reply.get("EvalIDs") or ():
        print(f'    Evaluation "{short(eval_id)}" migrates its allocations')
    return 0


def node_eligibility(args: argparse.Namespace, client: ApiClient) -> int:
    enable = _enable_disable(args)
    node_id = client.resolve("node", args.node)
    value = "eligible" if enable else "ineligible"
    client.post(f"/v1/node/{segment(node_id)}/eligibility", {"Eligibility": value})
    print(f'Node "{short(node_id)}" scheduling eligibility set: {value} for scheduling')
    return 0


# -- allocations and evaluations -------------------------------------------------------------------


def alloc_status(args: argparse.Namespace, client: ApiClient) -> int:
    alloc_id = client.resolve("alloc", args.alloc)
    alloc = client.get(f"/v1/allocation/{segment(alloc_id)}")
    if args.json:
        print_json(alloc)
        return 0
    flat = alloc["AllocatedResources"]["Flattened"]
    print(
        key_values(
            [
                ("ID", alloc["ID"]),
                ("Eval ID", short(alloc["EvalID"])),
                ("Name", alloc["Name"]),
                ("Node ID", short(alloc["NodeID"])),
                ("Node Name", alloc["NodeName"]),
                ("Job ID", alloc["JobID"]),
                ("Job Version", alloc["JobVersion"]),
                ("Client Status", alloc["ClientStatus"]),
                ("Client Description", alloc["ClientDescription"] or "<none>"),
                ("Desired Status", alloc["DesiredStatus"]),
                ("Desired Description", alloc["DesiredDescription"] or "<none>"),
                ("Created", ago(alloc["CreateTime"])),
                ("Modified", ago(alloc["ModifyTime"])),
                ("CPU", f"{flat['Cpu']['CpuShares']} MHz"),
                ("Memory", f"{flat['Memory']['MemoryMB']} MiB"),
            ]
        )
    )
    tasks = alloc["AllocatedResources"].get("Tasks") or {}
    for name, state in sorted((alloc.get("TaskStates") or {}).items()):
        print()
        print(_task_block(name, state, tasks.get(name)))
    return 0


def alloc_signal(args: argparse.Namespace, client: ApiClient) -> int:
    """Nomad's `alloc signal [-s SIGNAL] [-task TASK] ALLOC [TASK]`: the signal (SIGKILL when
    none is given, as Nomad's) to the task named, or to every task; silent on success."""
    if args.task and args.task_name and args.task != args.task_name:
        raise CliError(f'-task "{args.task}" and the task argument "{args.task_name}" differ')
    alloc_id = client.resolve("alloc", args.alloc)
    body = {"Signal": args.s or "SIGKILL", "Task": args.task or args.task_name or None}
    client.post(f"/v1/client/allocation/{segment(alloc_id)}/signal", body)
    return 0


RECENT_EVENTS = 10  # as `nomad alloc status` shows without -verbose


def _task_block(name: str, state: dict[str, Any], resources: dict[str, Any] | None) -> str:
    """One task as `nomad alloc status` shows it: its state, resources, when it started and
    finished, and its recent events (newest first)."""
    lines = [f'Task "{name}" is "{state["State"]}"']
    if resources is not None:
        cpu = f"{resources['Cpu']['CpuShares']} MHz"
        memory = f"{resources['Memory']['MemoryMB']} MiB"
        lines += ["Task Resources:", table(["CPU", "Memory"], [(cpu, memory)])]
    lines += [
        "",
        "Task Events:",
        key_values(
            [
                ("Started At", go_date(state["StartedAt"])),
                ("Finished At", go_date(state["FinishedAt"])),
                ("Total Restarts", state["Restarts"]),
                ("Last Restart", go_date(state["LastRestart"])),
            ]
        ),
        "",
        "Recent Events:",
    ]
    events = sorted(state.get("Events") or (), key=lambda e: e["Time"], reverse=True)
    rows = [
        (date(e["Time"]), e["Type"], e.get("DisplayMessage") or e.get("Message") or "")
        for e in events[:RECENT_EVENTS]
    ]
    lines.append(table(["Time", "Type", "Description"], rows))
    return "\n".join(lines)


def eval_list(args: argparse.Namespace, client: ApiClient) -> int:
    evals = client.get("/v1/evaluations", namespace="*")
    if args.json:
        print_json(evals)
        return 0
    print(
        table(
            ["ID", "Priority", "Triggered By", "Job ID", "Node ID", "Status", "Placement Failures"],
            [
                (
                    short(e["ID"]),
                    e["Priority"],
                    e["TriggeredBy"],
                    e["JobID"],
                    short(e["NodeID"]) or "<none>",
                    e["Status"],
                    str(bool(e.get("FailedTGAllocs"))).lower(),
                )
                for e in evals
            ],
        )
        if evals
        else "No evals found"
    )
    return 0


def eval_status(args: argparse.Namespace, client: ApiClient) -> int:
    eval_id = client.resolve("eval", args.eval)
    ev = client.get(f"/v1/evaluation/{segment(eval_id)}")
    if args.json:
        print_json(ev)
        return 0
    print(
        key_values(
            [
                ("ID", ev["ID"]),
                ("Create Time", date(ev["CreateTime"])),
                ("Modify Time", date(ev["ModifyTime"])),
                ("Status", ev["Status"]),
                ("Status Description", ev["StatusDescription"] or "<none>"),
                ("Type", ev["Type"]),
                ("TriggeredBy", ev["TriggeredBy"]),
                ("Job ID", ev["JobID"]),
                ("Priority", ev["Priority"]),
                ("Placement Failures", str(bool(ev.get("FailedTGAllocs"))).lower()),
                ("Blocked Eval", short(ev["BlockedEval"]) or "<none>"),
            ]
        )
    )
    return 0


def add_parsers(commands: Any, flag: Any) -> None:
    def group(name: str, help_text: str) -> Any:
        return commands.add_parser(name, help=help_text).add_subparsers(
            dest=f"{name}_command", required=True
        )

    def cmd(sub: Any, name: str, handler: Any, help_text: str, json: bool = False) -> Any:
        p = sub.add_parser(name, help=help_text)
        p.set_defaults(handler=handler, needs_client=True)
        if json:
            flag(p, "-json", action="store_true", help="print JSON")
        return p

    node = group("node", "client nodes")
    p = cmd(node, "status", node_status, "list nodes, or show one", json=True)
    p.add_argument("node", nargs="?")
    for name, handler in (("drain", node_drain), ("eligibility", node_eligibility)):
        p = cmd(node, name, handler, f"toggle a node's {name}")
        flag(p, "-enable", action="store_true")
        flag(p, "-disable", action="store_true")
        if name == "drain":
            flag(
                p,
                "-deadline",
                type=float,
                default=3600.0,
                help="seconds until what is left is forced off; batch work runs until then"
                " (default 1h)",
            )
            flag(p, "-force", action="store_true", help="force everything off at once")
            flag(p, "-no-deadline", action="store_true", help="never force batch work off")
            flag(p, "-ignore-system", action="store_true", help="leave system jobs running")
            flag(p, "-yes", action="store_true", help="accepted for Nomad compatibility")
        p.add_argument("node")

    alloc = group("alloc", "allocations")
    p = cmd(alloc, "status", alloc_status, "show an allocation", json=True)
    p.add_argument("alloc")
    p = cmd(alloc, "signal", alloc_signal, "send a signal to an allocation's tasks")
    flag(p, "-s", default="", help="the signal, e.g. SIGHUP (default SIGKILL)")
    flag(p, "-task", default="", help="the task to signal (default: every task)")
    p.add_argument("alloc")
    p.add_argument("task_name", nargs="?", default="", metavar="task")

    evals = group("eval", "evaluations")
    cmd(evals, "list", eval_list, "list evaluations", json=True)
    p = cmd(evals, "status", eval_status, "show an evaluation", json=True)
    p.add_argument("eval")
