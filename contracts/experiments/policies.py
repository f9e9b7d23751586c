"""`policies:` of an experiment file: each a name, a kind, the kind's settings and an optional
`sweep` of them (the policy's own grid axes).

Nomad policy bodies and policy files go through the autoscaler's own parsers here, so that
their problems show before any run starts; a Python class is imported only when a run builds
it (actors/experiments/core/catalog.py)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import MISSING, fields, replace
from typing import Any

from contracts.autoscaling import Policy, parse_cluster_policy_file, parse_group_policy
from contracts.errors import ValidationError
from contracts.experiments.fields import Bad, Check, Node, choice, join, plain, show, text
from contracts.experiments.spec import (
    NAME,
    NAME_HINT,
    POLICY_KINDS,
    RUN_PARAMETERS,
    SETTINGS,
    Axis,
    NomadSettings,
    PolicyFileSettings,
    PolicySettings,
    PolicySpec,
    PythonSettings,
    ThresholdSettings,
)

MAX_AXIS_VALUES = 100
_NOT_SWEPT = ("policy", "file")  # what a policy is, not how it is tuned
MAX_POLICY_FILE_BYTES = 1024 * 1024
_PYTHON_TARGET = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_]\w*$")


def label(value: Any) -> str:
    """A value as a table shows it: 25 not 25.0, true not True, "10m" as written."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if value is None:
        return "null"
    if isinstance(value, str | int | float):
        return str(value)
    return json.dumps(value, sort_keys=True, default=str)


def _keys(cls: type[Any]) -> dict[str, tuple[str, Check, bool]]:
    """YAML key -> (field name, check, required) of a settings class."""
    out: dict[str, tuple[str, Check, bool]] = {}
    for f in fields(cls):
        check = f.metadata.get("check")
        if check is None:
            continue
        required = f.default is MISSING and f.default_factory is MISSING
        out[f.metadata.get("key") or f.name] = (f.name, check, required)
    return out


def parse_policy(data: Any, index: int, base_dir: str, problems: list[str]) -> PolicySpec | None:
    where = join("policies", index)
    node = Node(data, where, problems)
    if not node.ok:
        return None
    before = len(problems)
    name = node.get("name", text(pattern=NAME.fullmatch, hint=NAME_HINT), required=True)
    kind = node.get("kind", choice(POLICY_KINDS), required=True)
    if kind is None:
        node.raw("sweep")
        for key in node.data:
            node.seen.add(str(key))
        return None
    cls = SETTINGS[kind]
    keys = _keys(cls)
    sweep = _sweep(node, kind, keys)
    swept = {axis.field: axis.values[0] for axis in sweep}
    values: dict[str, Any] = {}
    for key, (field_name, check, required) in keys.items():
        # A required setting may be given by its sweep alone (its first value is the base).
        missing_ok = field_name in swept and kind != "python"
        value = node.get(key, check, MISSING, required=required and not missing_ok)
        if value is not MISSING:
            values[field_name] = value
        elif required and missing_ok:
            values[field_name] = swept[field_name]
    node.finish({"name", "kind", "sweep", *keys})
    if len(problems) > before or name is None:
        return None
    settings: PolicySettings = cls(**values)
    settings = _resolve(settings, node, base_dir)
    if len(problems) > before:
        return None
    spec = PolicySpec(name=name, kind=kind, settings=settings, sweep=sweep, where=where)
    for variant, labels in spec.variants():
        for problem in settings_problems(variant):
            at = ", ".join(f"{k}={v}" for k, v in labels)
            problems.append(f"{where}: {problem}" + (f" (sweep {at})" if at else ""))
    return spec if len(problems) == before else None


def _resolve(settings: PolicySettings, node: Node, base_dir: str) -> PolicySettings:
    """Parse what the kind points at: a Nomad body, a policy file, a Python class name."""
    if isinstance(settings, NomadSettings):
        try:
            parse_group_policy(
                settings.policy, min=settings.min, max=settings.max, where=node.at("policy")
            )
        except ValidationError as exc:
            node.problems.extend(exc.problems)
        return settings
    if isinstance(settings, PolicyFileSettings):
        return _policy_file(settings, node, base_dir)
    if isinstance(settings, PythonSettings):
        try:
            text(pattern=_PYTHON_TARGET.fullmatch, hint="module:Class")(settings.target)
        except Bad as exc:
            node.error("class", str(exc))
        return replace(settings, search_path=base_dir)
    return settings


def resolve_path(base_dir: str, value: Any) -> str:
    """A file path relative to the experiment file's folder, which must exist."""
    path = text()(value)
    full = os.path.normpath(os.path.join(base_dir, os.path.expanduser(path)))
    if not os.path.isfile(full):
        raise Bad(f"no such file {show(path)} (looked for {full})")
    return full


def _policy_file(settings: PolicyFileSettings, node: Node, base_dir: str) -> PolicySettings:
    path = node.value("file", settings.file, lambda v: resolve_path(base_dir, v))
    wanted = node.value("policy", settings.policy, lambda v: None if v is None else text()(v))
    if path is None:
        return settings
    try:
        if os.path.getsize(path) > MAX_POLICY_FILE_BYTES:
            raise ValidationError(f"{path}: more than {MAX_POLICY_FILE_BYTES} bytes")
        with open(path, encoding="utf-8") as file:
            content = file.read()
        policy = _file_policy(content, path, wanted)
    except (OSError, UnicodeDecodeError) as exc:
        node.error("file", f"cannot read {path}: {exc}")
        return settings
    except ValidationError as exc:
        node.problems.extend(f"{node.at('file')}: {p}" for p in exc.problems)
        return settings
    # A file policy is disabled unless it says otherwise; the experiment runs it regardless.
    policy = replace(
        policy,
        enabled=True,
        min=policy.min if settings.min is None else settings.min,
        max=policy.max if settings.max is None else settings.max,
    )
    return replace(settings, file=path, policy=wanted, parsed=policy)


def _file_policy(content: str, path: str, wanted: str | None) -> Policy:
    if path.endswith(".json"):
        return _json_policy(content, path)
    policies = parse_cluster_policy_file(content, path)
    names = [p.name for p in policies]
    if wanted is None:
        if len(policies) > 1:
            raise ValidationError(
                f"{len(policies)} scaling blocks ({', '.join(names)}); pick one with `policy`"
            )
        return policies[0].policy
    for cluster_policy in policies:
        if cluster_policy.name == wanted:
            return cluster_policy.policy
    raise ValidationError(f"no scaling block {wanted!r} (the file has {', '.join(names)})")


def _json_policy(content: str, path: str) -> Policy:
    """A job group's `Scaling` object as Nomad's API writes it (`Min`, `Max`, `Policy`), or
    the same in lower case."""
    try:
        doc = json.loads(content)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"{path}: not JSON: {exc}") from None
    if not isinstance(doc, Mapping):
        raise ValidationError(f"{path}: expected a JSON object, got {show(doc)}")
    lower = {str(k).lower(): v for k, v in doc.items()}
    body, low, high = lower.get("policy"), lower.get("min", 0), lower.get("max")
    if not isinstance(body, Mapping):
        raise ValidationError(f"{path}: expected a Policy object, got {show(body)}")
    for key, value in (("Min", low), ("Max", high)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValidationError(f"{path}: {key} must be a whole number >= 0, got {show(value)}")
    return parse_group_policy(body, min=int(low or 0), max=int(high or 0), where=path)


def _sweep(node: Node, kind: str, keys: dict[str, tuple[str, Check, bool]]) -> tuple[Axis, ...]:
    raw = node.raw("sweep")
    if raw is None:
        return ()
    here = Node(raw, node.at("sweep"), node.problems)
    axes: list[Axis] = []
    for key, values in here.data.items():
        here.seen.add(str(key))
        where = here.at(str(key))
        if not isinstance(key, str):
            node.problems.append(f"{here.path}: keys must be strings, got {show(key)}")
            continue
        if key in RUN_PARAMETERS:
            node.problems.append(f"{where}: a run parameter; sweep it under `parameters`")
            continue
        check: Check
        if kind == "python":
            field_name, check = key, plain
        elif key in keys and key not in _NOT_SWEPT:
            field_name, check = keys[key][0], keys[key][1]
        else:
            options = ", ".join(k for k in keys if k not in _NOT_SWEPT)
            node.problems.append(
                f"{where}: {show(key)} is not a setting of kind {kind} (its settings: {options})"
            )
            continue
        axis = parse_axis(key, values, check, where, node.problems)
        if axis is not None:
            axes.append(replace(axis, field=field_name))
    return tuple(axes)


def parse_axis(
    name: str, values: Any, check: Check, where: str, problems: list[str]
) -> Axis | None:
    """A list of values (or one value) for axis `name`, each through `check`."""
    items = values if isinstance(values, list) else [values]
    if not items:
        problems.append(f"{where}: expected at least one value, got an empty list")
        return None
    if len(items) > MAX_AXIS_VALUES:
        problems.append(f"{where}: {len(items)} values, more than the {MAX_AXIS_VALUES} allowed")
        return None
    checked: list[Any] = []
    before = len(problems)
    for i, item in enumerate(items):
        try:
            checked.append(check(item))
        except Bad as exc:
            problems.append(f"{join(where, i) if isinstance(values, list) else where}: {exc}")
    if len(problems) > before:
        return None
    return Axis(name=name, values=tuple(checked), labels=tuple(label(v) for v in items))


def settings_problems(settings: PolicySettings) -> list[str]:
    """Checks across fields (min <= max, bounds in order), for the base and every variant."""
    problems: list[str] = []
    low, high = getattr(settings, "min", None), getattr(settings, "max", None)
    if isinstance(settings, PolicyFileSettings) and settings.parsed is not None:
        low, high = settings.parsed.min, settings.parsed.max
        low = low if settings.min is None else settings.min
        high = high if settings.max is None else settings.max
    if isinstance(low, int) and isinstance(high, int) and low > high:
        problems.append(f"min {low} is above max {high}")
    if isinstance(high, int) and high < 1:
        problems.append(f"max {high} allows no allocation; expected at least 1")
    if isinstance(settings, ThresholdSettings):
        if settings.upper is None and settings.lower is None:
            problems.append("threshold: at least one of upper, lower is required")
        elif (
            settings.upper is not None
            and settings.lower is not None
            and settings.lower >= settings.upper
        ):
            problems.append(
                f"threshold: lower {label(settings.lower)} must be below upper"
                f" {label(settings.upper)}"
            )
    return problems
