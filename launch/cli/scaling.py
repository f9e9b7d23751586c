"""`drover scaling policy list | status | explain | apply | delete`: Nomad's `scaling policy
list / info`, and drover's `explain` (what the autoscaler decided and why), `apply` (a
cluster policy file, kept by the autoscaler) and `delete` (an applied file's policies)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import orjson

from launch.cli.client import ApiClient, CliError, segment
from launch.cli.output import date, key_values, print_json, short, table

DEFAULT_DECISIONS = 10


def format_target(target: dict[str, str]) -> str:
    """Nomad's `Namespace:default,Job:web,Group:api` (formatScalingPolicyTarget)."""
    known = ("namespace", "job", "group")
    first = [f"{k}:{v}" for name in known for k, v in target.items() if k.lower() == name]
    rest = [f"{k}:{v}" for k, v in sorted(target.items()) if k.lower() not in known]
    return ",".join(first + rest)


def _when(seconds: float | None) -> str:
    return date(int(seconds * 1e9)) if seconds else "-"


def _policy_table(stubs: list[dict[str, Any]], verbose: bool) -> str:
    if not stubs:
        return "No policies found"
    rows = sorted(stubs, key=lambda s: format_target(s["Target"]))
    return table(
        ["ID", "Enabled", "Type", "Target"],
        [
            (
                p["ID"] if verbose else short(p["ID"]),
                str(p["Enabled"]).lower(),
                p["Type"],
                format_target(p["Target"]),
            )
            for p in rows
        ],
    )


def policy_list(args: argparse.Namespace, client: ApiClient) -> int:
    stubs = client.get("/v1/scaling/policies", job=args.job or None, type=args.type or None)
    if args.json:
        print_json(stubs)
        return 0
    print(_policy_table(stubs, args.verbose))
    return 0


def _resolve(client: ApiClient, prefix: str) -> str:
    if len(prefix) == 1:
        raise CliError("Identifier must contain at least two characters.")
    matches = client.get("/v1/scaling/policies", prefix=prefix)
    if not matches:
        raise CliError(f'No scaling policies with prefix or id "{prefix}" found')
    if len(matches) > 1:
        raise CliError(
            f"Prefix matched multiple scaling policies\n\n{_policy_table(matches, True)}"
        )
    return str(matches[0]["ID"])


def _explained(client: ApiClient, policy_id: str, limit: int) -> dict[str, Any] | None:
    """The autoscaler's view, or None when no autoscaler answers (the policy is Nomad's
    either way)."""
    try:
        explained: dict[str, Any] = client.get(
            f"/v1/scaling/policy/{segment(policy_id)}/decisions", limit=limit
        )
    except CliError as exc:
        if ": 503 " in str(exc) or ": 404 " in str(exc):
            return None
        raise
    return explained


def policy_status(args: argparse.Namespace, client: ApiClient) -> int:
    policy_id = _resolve(client, args.policy)
    policy = client.get(f"/v1/scaling/policy/{segment(policy_id)}")
    explained = _explained(client, policy_id, 1)
    if args.json:
        print_json({**policy, "Autoscaler": explained})
        return 0
    print(
        key_values(
            [
                ("ID", policy["ID"] if args.verbose else short(policy["ID"])),
                ("Enabled", str(policy["Enabled"]).lower()),
                ("Target", format_target(policy["Target"])),
                ("Min", policy["Min"]),
                ("Max", policy["Max"]),
            ]
        )
    )
    print("\nPolicy:")
    print(_json_text(policy["Policy"]) if policy["Policy"] else "<empty>")
    print("\nAutoscaler")
    print(_autoscaler_block(explained))
    return 0


def _json_text(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()


def _autoscaler_block(explained: dict[str, Any] | None) -> str:
    if explained is None:
        return "not evaluated (no autoscaler runs, or it does not know this policy)"
    view = explained["Policy"]
    if not view["Evaluated"]:
        why = view["Error"] or view["Note"] or ("disabled" if not view["Enabled"] else "")
        return f"not evaluated: {why}"
    pairs: list[tuple[str, Any]] = [
        ("State", view["State"]),
        ("Evaluation Interval", f"{view['EvaluationInterval']:g}s"),
        ("Cooldown", f"{view['Cooldown']:g}s (after a scale-up: {view['CooldownOnScaleUp']:g}s)"),
        ("Cooldown Until", _when(view["CooldownUntil"])),
        ("Next Evaluation", _when(view["NextEvaluation"])),
    ]
    last = view["LastDecision"]
    if last is not None:
        pairs.append(
            ("Last Decision", f"{_when(last['Time'])} {last['Outcome']}: {last['Reason']}")
        )
    return key_values(pairs)


def _explained_stub(client: ApiClient, target: str, group: str | None) -> dict[str, Any]:
    """The stub `explain JOB GROUP` or `explain ID` (a file policy's, or any) names."""
    if group is None:
        policy_id = _resolve(client, target)
        stubs = client.get("/v1/scaling/policies", prefix=policy_id)
        return dict(stubs[0])
    stubs = client.get("/v1/scaling/policies", job=target)
    found = [s for s in stubs if s["Target"].get("Group") == group]
    if not found:
        raise CliError(f'no scaling policy for group "{group}" of job "{target}"')
    return dict(found[0])


def policy_explain(args: argparse.Namespace, client: ApiClient) -> int:
    stub = _explained_stub(client, args.job, args.group)
    policy_id = str(stub["ID"])
    try:
        explained = client.get(f"/v1/scaling/policy/{segment(policy_id)}/decisions", limit=args.n)
    except CliError as exc:
        raise CliError(f"{exc} (the autoscaler keeps the decisions)") from None
    if args.json:
        print_json(explained)
        return 0
    view = explained["Policy"]
    print(
        key_values(
            [
                ("Policy", f"{short(policy_id)} ({format_target(stub['Target'])})"),
                ("State", view["State"] or "not evaluated"),
                ("Cooldown Until", _when(view["CooldownUntil"])),
                ("Next Evaluation", _when(view["NextEvaluation"])),
            ]
        )
    )
    decisions = explained["Decisions"]
    if not decisions:
        why = view["Error"] or view["Note"]
        print("\nNo decisions yet" + (f": {why}" if why else ""))
        return 0
    for decision in decisions:
        print()
        print(explain_decision(decision))
    return 0


def policy_apply(args: argparse.Namespace, client: ApiClient) -> int:
    path = Path(args.file)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"{args.file}: {exc}") from None
    name = args.name or path.name
    answer = client.post("/v1/scaling/policies", {"Name": name, "Text": text})
    if args.json:
        print_json(answer)
        return 0
    print(f'Applied policy file "{answer["Name"]}"\n')
    print(_policy_table(answer["Policies"], args.verbose))
    return 0


def policy_delete(args: argparse.Namespace, client: ApiClient) -> int:
    policy_id = _resolve(client, args.policy)
    removed = client.delete(f"/v1/scaling/policy/{segment(policy_id)}")["Removed"]
    print(f"Removed {len(removed)} polic{'y' if len(removed) == 1 else 'ies'} (the applied file)")
    for removed_id in removed:
        print(f"  {removed_id if args.verbose else short(removed_id)}")
    return 0


def explain_decision(d: dict[str, Any]) -> str:
    """One decision as lines: when, outcome and count, why, each check, the call."""
    action = d["Action"]
    head = f"{_when(d['Time'])}  {d['Outcome']}"
    if d["CurrentCount"] is not None:
        head += f"  count {d['CurrentCount']}"
        if action is not None and d["Outcome"] in ("scale", "cooldown", "in-flight"):
            head += f" -> {action['Count']}"
    if d["Winner"]:
        head += f'  (winner: check "{d["Winner"]}")'
    lines = [head, f"  reason: {d['Reason']}"]
    for check in d["Checks"]:
        lines.append("  " + _check_line(check))
    if d["Capped"] and d["Proposed"] is not None:
        original = d["Proposed"]["Meta"].get("nomad_autoscaler.count.original")
        lines.append(f"  capped: {original} -> {d['Proposed']['Count']} (min/max)")
    for note in d["Adjustments"]:
        lines.append(f"  adjusted: {note}")
    if d["CooldownUntil"]:
        lines.append(f"  cooldown until {_when(d['CooldownUntil'])}")
    scale = d["Scale"]
    if scale is not None:
        detail = scale["Error"] or (
            f"evaluation {short(scale['EvalID'])}" if scale["EvalID"] else ""
        )
        lines.append(f"  scale call: {scale['Status']}" + (f", {detail}" if detail else ""))
    return "\n".join(lines)


def _check_line(check: dict[str, Any]) -> str:
    query = check["Query"]
    what = f'check "{check["Name"]}" ({check["Strategy"]})'
    if query is not None:
        value = "-" if check["Value"] is None else f"{check['Value']:g}"
        what += f": {query['Query']} = {value} ({check['PointsRead']} points)"
    action = check["Action"]
    if check["Error"]:
        what += f" -> error{' (ignored)' if check['Ignored'] else ''}: {check['Error']}"
    elif action is not None:
        what += f" -> {action['Count']} ({action['Direction']})"
        if action["Reason"]:
            what += f": {action['Reason']}"
    return what


def add_parser(commands: Any, flag: Any) -> None:
    scaling = commands.add_parser("scaling", help="scaling policies and the autoscaler")
    groups = scaling.add_subparsers(dest="scaling_command", required=True)
    policy = groups.add_parser("policy", help="scaling policies").add_subparsers(
        dest="policy_command", required=True
    )

    p = policy.add_parser("list", help="list the scaling policies")
    p.set_defaults(handler=policy_list, needs_client=True)
    flag(p, "-json", action="store_true", help="print JSON")
    flag(p, "-verbose", action="store_true", help="full IDs")
    flag(p, "-job", default="", help="only this job's policies")
    flag(p, "-type", default="", help="only policies of this type (horizontal)")

    for name in ("status", "info"):
        p = policy.add_parser(name, help="show a scaling policy (Nomad's `info`)")
        p.set_defaults(handler=policy_status, needs_client=True)
        flag(p, "-json", action="store_true", help="print JSON")
        flag(p, "-verbose", action="store_true", help="full IDs")
        p.add_argument("policy", help="policy ID or prefix")

    p = policy.add_parser(
        "explain", help="the autoscaler's last decisions for a job group (JOB GROUP) or a policy"
    )
    p.set_defaults(handler=policy_explain, needs_client=True)
    flag(p, "-json", action="store_true", help="print JSON")
    flag(p, "-n", type=int, default=DEFAULT_DECISIONS, help="how many decisions (newest first)")
    p.add_argument("job", help="the job, or a policy ID or prefix (a file policy's)")
    p.add_argument("group", nargs="?", default=None)

    p = policy.add_parser("apply", help="apply a cluster policy file (the autoscaler keeps it)")
    p.set_defaults(handler=policy_apply, needs_client=True)
    flag(p, "-json", action="store_true", help="print JSON")
    flag(p, "-verbose", action="store_true", help="full IDs")
    flag(p, "-name", default="", help="the name it is kept under (default: the file's name)")
    p.add_argument("file")

    p = policy.add_parser("delete", help="remove an applied policy file (by one of its IDs)")
    p.set_defaults(handler=policy_delete, needs_client=True)
    flag(p, "-verbose", action="store_true", help="full IDs")
    p.add_argument("policy", help="policy ID or prefix")
