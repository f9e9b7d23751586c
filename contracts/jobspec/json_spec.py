"""Nomad JSON jobs (`nomad job run -output`, `POST /v1/jobs`) -> normalized dicts.

The drover wire codec cannot read these directly: Nomad's JSON nests what our records flatten
(`EphemeralDisk.SizeMB`, `Scaling`), carries durations in nanoseconds and has many fields
drover does not model. Known-but-unmodelled fields are accepted with a warning when set,
server-owned ones are skipped, and anything Nomad does not have is an error at its JSON path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from contracts.errors import ValidationError
from contracts.jobspec.schema import JOB, SCALARS, Field, Kind, Obj, is_unset
from contracts.jobspec.values import (
    AS_IS,
    INT_FLOOR,
    NS_PER_S,
    coerce_scalar,
    coerce_str_map,
    coerce_strings,
)
from contracts.jobspec.where import JsonWhere, Problems, bad_value

# JobRegisterRequest fields around the job; the HTTP layer, not the job spec, owns them.
_REQUEST_FIELDS = frozenset(
    {
        "job",
        "enforceindex",
        "jobmodifyindex",
        "policyoverride",
        "preservecounts",
        "preserveresources",
        "evalpriority",
        "submission",
        "region",
        "namespace",
        "secretid",
    }
)


def load(raw: str | bytes | dict[str, Any]) -> Any:
    if isinstance(raw, dict):
        return raw
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ValidationError(f"$: not valid JSON: {exc}") from None


def parse_job_data(data: Any, problems: Problems) -> dict[str, Any] | None:
    """Accept `{"Job": {...}, ...request fields}` or a bare job object."""
    root = JsonWhere()
    if not isinstance(data, dict):
        problems.errors.append(bad_value(root, "a JSON object", data))
        return None
    job_key = next((k for k in data if k.lower() == "job"), None)
    if job_key is None:
        return walk(data, JOB, root, problems)
    for key in data:
        if key.lower() not in _REQUEST_FIELDS:
            problems.errors.append(root.child(key).unknown())
    return walk(data[job_key], JOB, root.child(job_key), problems)


def walk(data: Any, obj: Obj, where: JsonWhere, problems: Problems) -> dict[str, Any] | None:
    """`data` read as `obj`. A registration walks every field of a job (the API's hottest
    parse): well-typed scalars are taken as they are, and a field's JSON path is made only
    for the values that need more than that (nested objects, conversions, problems)."""
    if not isinstance(data, dict):
        problems.errors.append(bad_value(where, "an object", data))
        return None
    out: dict[str, Any] = {}
    given: set[str] = set()
    exact, folded = obj.json_exact, obj.json_fields
    for name, value in data.items():
        spec = exact.get(name) or folded.get(name.lower())
        if spec is None:
            _not_modelled(obj, name, value, where, problems)
            continue
        if value is None:
            continue  # null means "use the default", as in Nomad
        key = spec.key
        given.add(key)
        if AS_IS.get(spec.kind) is type(value):
            out[key] = value
            continue
        quick = _QUICK.get(spec.kind)
        if quick is not None and (read := quick(spec, value)) is not _DECLINED:
            out[key] = read
            continue
        converted = _value(spec, value, where.child(name), problems)
        if converted is not None:
            out[key] = converted
    for spec in obj.required_fields:
        if spec.key not in given:
            problems.errors.append(where.child(spec.json or spec.key).missing())
    return out


# Quick reads of the values `_value` would take without a problem, by kind: what `_value`
# makes of them, without a JSON path or its calls. A job's JSON is full of them (empty
# lists and maps, counts, nanosecond durations). `_DECLINED`: anything else, which `_value`
# reads (and words the problem of). Objects are always walked.
_DECLINED: Any = object()
Quick = Callable[[Field, Any], Any]


def _strings(spec: Field, value: Any) -> Any:
    if type(value) is list and all(type(item) is str for item in value):
        return tuple(value)
    return _DECLINED


def _string_map(spec: Field, value: Any) -> Any:
    if type(value) is dict and all(type(k) is str and type(v) is str for k, v in value.items()):
        return dict(value)
    return _DECLINED


def _no_blocks(spec: Field, value: Any) -> Any:
    return [] if type(value) is list and not value else _DECLINED


def _any_map(spec: Field, value: Any) -> Any:
    return value if type(value) is dict else _DECLINED


def _at_least(floor: int) -> Quick:
    def read(spec: Field, value: Any) -> Any:
        return value if type(value) is int and value >= floor else _DECLINED

    return read


def _choice(spec: Field, value: Any) -> Any:
    return value if type(value) is str and value in spec.choices else _DECLINED


def _nanoseconds(spec: Field, value: Any) -> Any:
    return float(value) / NS_PER_S if type(value) is int else _DECLINED


_QUICK: dict[Kind, Quick] = {
    Kind.STRS: _strings,
    Kind.STR_MAP: _string_map,
    Kind.OBJS: _no_blocks,
    Kind.ANY_MAP: _any_map,
    **{kind: _at_least(floor) for kind, floor in INT_FLOOR.items() if floor is not None},
    Kind.CHOICE: _choice,
    Kind.DURATION: _nanoseconds,
}


def _not_modelled(obj: Obj, name: str, value: Any, where: JsonWhere, problems: Problems) -> None:
    lowered = name.lower()
    ignored = obj.json_ignored.get(lowered)
    if ignored is not None:
        if not is_unset(value, ignored.default):
            problems.warnings.append(where.child(name).ignored())
    elif lowered not in obj.silent_json:
        problems.errors.append(where.child(name).unknown())


def _value(spec: Field, value: Any, here: JsonWhere, problems: Problems) -> Any:
    kind = spec.kind
    if kind in SCALARS:
        return coerce_scalar(kind, value, here, problems, hcl=False, choices=spec.choices)
    if kind is Kind.STRS:
        return coerce_strings(value, here, problems, hcl=False)
    if kind is Kind.STR_MAP:
        return coerce_str_map(value, here, problems, hcl=False)
    if kind is Kind.ANY_MAP:
        if isinstance(value, dict):
            return value
        problems.errors.append(bad_value(here, "an object", value))
        return None
    assert spec.obj is not None
    if kind is Kind.OBJ:
        return walk(value, spec.obj, here, problems)
    if not isinstance(value, list):
        problems.errors.append(bad_value(here, "a list", value))
        return None
    items = (walk(item, spec.obj, here.index(i), problems) for i, item in enumerate(value))
    return [item for item in items if item is not None]
