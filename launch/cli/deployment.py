"""`drover deployment list|status|promote|fail|pause|resume`, as Nomad's CLI has them."""

from __future__ import annotations

import argparse
from typing import Any

from launch.cli.client import ApiClient, segment
from launch.cli.output import key_values, print_json, short, table


def deployment_list(args: argparse.Namespace, client: ApiClient) -> int:
    deployments = client.get("/v1/deployments", namespace=args.namespace)
    if args.json:
        print_json(deployments)
    elif not deployments:
        print("No deployments found")
    else:
        rows = [
            (short(d["ID"]), d["JobID"], d["JobVersion"], d["Status"], d["StatusDescription"])
            for d in deployments
        ]
        print(table(["ID", "Job ID", "Job Version", "Status", "Description"], rows))
    return 0


def deployment_status(args: argparse.Namespace, client: ApiClient) -> int:
    deployment_id = client.resolve("deployment", args.deployment)
    deployment = client.get(f"/v1/deployment/{segment(deployment_id)}")
    if args.json:
        print_json(deployment)
        return 0
    print(render_status(deployment))
    return 0


def render_status(deployment: dict[str, Any]) -> str:
    """Nomad's `deployment status`: the header, then the Deployed table."""
    header = key_values(
        [
            ("ID", deployment["ID"]),
            ("Job ID", deployment["JobID"]),
            ("Job Version", deployment["JobVersion"]),
            ("Status", deployment["Status"]),
            ("Description", deployment["StatusDescription"]),
        ]
    )
    return f"{header}\n\nDeployed\n{deployed_table(deployment)}"


def deployed_table(deployment: dict[str, Any]) -> str:
    """Nomad's formatDeploymentGroups: a row per group (canary columns when any has some)."""
    groups = deployment["TaskGroups"]
    canaries = any(g["DesiredCanaries"] for g in groups.values())
    headers = ["Task Group", "Auto Revert"]
    headers += ["Promoted"] if canaries else []
    headers += ["Desired"] + (["Canaries"] if canaries else [])
    headers += ["Placed", "Healthy", "Unhealthy", "Progress Deadline"]
    rows = []
    for name, g in sorted(groups.items()):
        row: list[Any] = [name, _go_bool(g["AutoRevert"])]
        row += [_go_bool(g["Promoted"])] if canaries else []
        row += [g["DesiredTotal"]] + ([g["DesiredCanaries"]] if canaries else [])
        row += [g["PlacedAllocs"], g["HealthyAllocs"], g["UnhealthyAllocs"]]
        row.append(g["RequireProgressBy"] if deployment["Status"] == "running" else "-")
        rows.append(row)
    return table(headers, rows)


def _go_bool(value: Any) -> str:
    """As Go's %v prints a bool: true / false."""
    return str(value).lower()


def deployment_promote(args: argparse.Namespace, client: ApiClient) -> int:
    groups = list(args.group or ())
    body = {"All": not groups, "Groups": groups}
    return _write(args, client, "promote", body)


def deployment_fail(args: argparse.Namespace, client: ApiClient) -> int:
    return _write(args, client, "fail", {})


def deployment_pause(args: argparse.Namespace, client: ApiClient) -> int:
    return _write(args, client, "pause", {"Pause": True})


def deployment_resume(args: argparse.Namespace, client: ApiClient) -> int:
    return _write(args, client, "pause", {"Pause": False})


def _write(args: argparse.Namespace, client: ApiClient, action: str, body: dict[str, Any]) -> int:
    deployment_id = client.resolve("deployment", args.deployment)
    reply = client.post(
        f"/v1/deployment/{action}/{segment(deployment_id)}",
        {"DeploymentID": deployment_id, **body},
    )
    done = {"promote": "promoted", "fail": "failed", "pause": "updated"}[action]
    print(f'Deployment "{deployment_id}" {done}')
    if reply.get("EvalID"):
        print(f'Evaluation ID: "{reply["EvalID"]}"')
    return 0


def add_parsers(commands: Any, flag: Any) -> None:
    sub = commands.add_parser("deployment", help="job deployments").add_subparsers(
        dest="deployment_command", required=True
    )

    def cmd(name: str, handler: Any, help_text: str, *, json: bool = False) -> Any:
        p = sub.add_parser(name, help=help_text)
        p.set_defaults(handler=handler, needs_client=True)
        flag(p, "-namespace", default="default", help="namespace (default: default)")
        if json:
            flag(p, "-json", action="store_true", help="print JSON")
        return p

    cmd("list", deployment_list, "list deployments, newest first", json=True)
    p = cmd("status", deployment_status, "show a deployment's groups", json=True)
    p.add_argument("deployment")
    p = cmd("promote", deployment_promote, "promote canaries (all groups, or -group G...)")
    flag(p, "-group", action="append", help="a task group to promote, repeatable")
    p.add_argument("deployment")
    for name, handler, text in (
        ("fail", deployment_fail, "fail a deployment (auto_revert rolls the job back)"),
        ("pause", deployment_pause, "pause a deployment"),
        ("resume", deployment_resume, "resume a paused deployment"),
    ):
        p = cmd(name, handler, text)
        p.add_argument("deployment")
