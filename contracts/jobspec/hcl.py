"""Nomad HCL job files -> normalized dicts (see schema.py), with block-chain error paths.

python-hcl2 8.x parses the syntax without a schema. We ask it for explicit block markers
(`__is_block__`) so a block can be told apart from an attribute holding an object, which
Nomad treats differently (`meta { }` and `meta = { }` are both fine; `resources = { }` is not).
Expressions are not evaluated: `count = var.n` arrives as the string "${var.n}".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import hcl2
from hcl2 import SerializationOptions

from contracts.errors import ValidationError
from contracts.fast_init import install_fast_inits
from contracts.jobspec.schema import JOB, SCALARS, Field, Kind, Obj, is_unset
from contracts.jobspec.values import coerce_scalar, coerce_str_map, coerce_strings
from contracts.jobspec.where import HclWhere, Problems, bad_value

_OPTIONS = SerializationOptions(
    with_comments=False,
    explicit_blocks=True,
    preserve_heredocs=False,
    strip_string_quotes=True,
)
_MARK = "__is_block__"
_UNSUPPORTED_TOP = ("variable", "variables", "locals")


@dataclass(frozen=True, slots=True)
class Block:
    labels: tuple[str, ...]
    body: Body


@dataclass(frozen=True, slots=True)
class Body:
    attrs: dict[str, Any] = field(default_factory=dict)
    blocks: dict[str, list[Block]] = field(default_factory=dict)


def load(text: str) -> Body:
    """Parse HCL text; syntax errors become a ValidationError naming line and column."""
    try:
        raw = hcl2.loads(text, serialization_options=_OPTIONS)
    except Exception as exc:  # python-hcl2 raises lark errors and bare RuntimeErrors
        raise ValidationError(_syntax_message(text, exc)) from None
    return _body(raw)


def _syntax_message(text: str, exc: Exception) -> str:
    line, column = getattr(exc, "line", None), getattr(exc, "column", None)
    if not isinstance(line, int) or line < 1:
        return f"HCL syntax error: {exc}"
    token = getattr(exc, "token", None)
    char = getattr(exc, "char", None)
    found = str(token) if token is not None else str(char) if char is not None else ""
    lines = text.splitlines()
    source = lines[line - 1].strip() if line <= len(lines) else ""
    what = f": unexpected {found.strip()[:30]!r}" if found.strip() else ": unexpected end of input"
    near = f" in {source!r}" if source else ""
    return f"HCL syntax error at line {line}, column {column}{what}{near}"


def _is_block(item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    if item.get(_MARK) is True:
        return True
    return len(item) == 1 and _is_block(next(iter(item.values())))


def _block(item: dict[str, Any]) -> Block:
    labels: list[str] = []
    while item.get(_MARK) is not True:
        ((label, item),) = item.items()
        labels.append(str(label))
    return Block(tuple(labels), _body(item))


def _body(raw: dict[str, Any]) -> Body:
    body = Body()
    for name, value in raw.items():
        if name == _MARK:
            continue
        if isinstance(value, list) and value and all(_is_block(v) for v in value):
            body.blocks[name] = [_block(v) for v in value]
        else:
            body.attrs[name] = _clean(value)
    return body


def _clean(value: Any) -> Any:
    """Undo HCL template escapes python-hcl2 leaves in place (`$${` is a literal `${`)."""
    if isinstance(value, str):
        return value.replace("$${", "${").replace("%%{", "%{")
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if k != _MARK}
    return value


def to_plain(body: Body) -> dict[str, Any]:
    """A block as data (driver `config`, scaling `policy`): nested blocks become lists."""
    out: dict[str, Any] = dict(body.attrs)
    for name, blocks in body.blocks.items():
        items: list[Any] = []
        for b in blocks:
            value: Any = to_plain(b.body)
            for label in reversed(b.labels):
                value = {label: value}
            items.append(value)
        out[name] = items
    return out


def parse_job_body(root: Body, problems: Problems) -> dict[str, Any] | None:
    """The single `job "id" { }` block of a file, normalized."""
    top = HclWhere()
    for name in root.attrs:
        problems.errors.append(top.child(name).unknown())
    for name in root.blocks:
        if name in _UNSUPPORTED_TOP:
            problems.errors.append(
                top.at(f'"{name}" blocks are not supported: drover does not evaluate HCL variables')
            )
        elif name != "job":
            problems.errors.append(top.child(name).unknown())
    jobs = root.blocks.get("job", [])
    if len(jobs) != 1:
        problems.errors.append(top.at(f'expected exactly one job "<id>" block, found {len(jobs)}'))
        return None
    block = jobs[0]
    if len(block.labels) != 1:
        problems.errors.append(top.at('the job block needs one label: job "<id>" { ... }'))
        return None
    job_id = block.labels[0]
    _hoist_tasks(block.body)
    out = walk(block.body, JOB, top.labelled("job", job_id), problems)
    out.setdefault("id", job_id)
    return out


def _hoist_tasks(body: Body) -> None:
    """Nomad wraps a job-level `task "t" {}` in a group of the same name."""
    for task in body.blocks.pop("task", []):
        group = Body(blocks={"task": [task]})
        body.blocks.setdefault("group", []).append(Block(task.labels, group))


def walk(body: Body, obj: Obj, where: HclWhere, problems: Problems) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in body.attrs.items():
        here = where.child(name)
        spec = obj.hcl_fields.get(name)
        if spec is None:
            _not_modelled(obj, name, value, False, here, problems)
        elif value is not None:
            _store(out, spec, _attr(spec, value, here, problems))
    for name, blocks in body.blocks.items():
        here = where.child(name)
        spec = obj.hcl_fields.get(name)
        if spec is None:
            _not_modelled(obj, name, blocks, True, here, problems)
        else:
            _store(out, spec, _blocks(spec, blocks, where, here, problems))
    for key in sorted(obj.required):
        if key not in body.attrs and key not in body.blocks:
            problems.errors.append(where.child(key).missing())
    return out


def _store(out: dict[str, Any], spec: Field, value: Any) -> None:
    if value is not None:
        out[spec.key] = value


def _not_modelled(
    obj: Obj, name: str, value: Any, is_block: bool, here: HclWhere, problems: Problems
) -> None:
    ignored = obj.hcl_ignored.get(name)
    if ignored is None:
        problems.errors.append(here.unknown())
    elif is_block or not is_unset(value, ignored.default):
        problems.warnings.append(here.ignored())


def _attr(spec: Field, value: Any, here: HclWhere, problems: Problems) -> Any:
    if spec.kind in SCALARS:
        return coerce_scalar(spec.kind, value, here, problems, hcl=True, choices=spec.choices)
    if spec.kind is Kind.STRS:
        return coerce_strings(value, here, problems, hcl=True)
    if spec.kind is Kind.STR_MAP:
        return coerce_str_map(value, here, problems, hcl=True)
    if spec.kind is Kind.ANY_MAP:
        if isinstance(value, dict):
            return value
        problems.errors.append(bad_value(here, "an object", value))
        return None
    problems.errors.append(here.at(f"must be a block: {spec.key} {{ ... }}, not an attribute"))
    return None


def _blocks(
    spec: Field, blocks: list[Block], parent: HclWhere, here: HclWhere, problems: Problems
) -> Any:
    if spec.kind is Kind.OBJS and spec.obj is not None:
        return _repeated(spec, spec.obj, blocks, parent, here, problems)
    if spec.kind in SCALARS or spec.kind is Kind.STRS:
        problems.errors.append(here.at(f"must be an attribute ({spec.key} = ...), not a block"))
        return None
    if len(blocks) > 1:
        problems.errors.append(here.at(f"block may only appear once, found {len(blocks)}"))
        return None
    if blocks[0].labels:
        problems.errors.append(here.at(f"block takes no label, got {blocks[0].labels[0]!r}"))
        return None
    body = blocks[0].body
    if spec.kind is Kind.OBJ and spec.obj is not None:
        return walk(body, spec.obj, here, problems)
    plain = to_plain(body)
    if spec.kind is Kind.STR_MAP:
        return coerce_str_map(plain, here, problems, hcl=True)
    return plain


def _repeated(
    spec: Field,
    obj: Obj,
    blocks: list[Block],
    parent: HclWhere,
    here: HclWhere,
    problems: Problems,
) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for i, block in enumerate(blocks):
        if spec.label_key is None:
            if block.labels:
                problems.errors.append(here.index(i).at(f"takes no label, got {block.labels[0]!r}"))
                continue
            items.append(walk(block.body, obj, here.index(i), problems))
            continue
        if len(block.labels) != 1:
            problems.errors.append(
                here.at(f'needs exactly one label: {spec.key} "<name>" {{ ... }}')
            )
            continue
        label = block.labels[0]
        item = walk(block.body, obj, parent.labelled(spec.key, label), problems)
        item[spec.label_key] = label
        items.append(item)
    return items


install_fast_inits(__name__)
