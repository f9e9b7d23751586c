"""Generated fast decoders for records: the codec's hot path.

The validating decoder in codec.py tracks a JSON path for every field so that an error can
name it; on a 1,000-allocation log entry that bookkeeping cost ten times the JSON parsing.
Here each record class gets a function generated once, with no path tracking, that checks
types inline and fills the instance's slots directly. Any surprise (a wrong type, a missing
required field, an unknown field, a bad enum value) raises `Slow`, and the caller re-runs the
validating decoder, which produces the error with its path. Valid input decodes identically
either way (tests/contracts/test_fast_decode.py checks this on every record type).

Bad input makes a generated decoder raise `Slow` and nothing else; a record with its own wire
form inside raises that form's `CodecError`. The caller falls back on those two only, so any
other exception is a bug here and surfaces instead of hiding as a slowdown.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, get_args, get_origin

from contracts.copying import writable_twin


class Slow(Exception):
    """The fast path declines: fall back to the validating decoder."""


def _bad(*_: object) -> Any:
    raise Slow


_cache: dict[tuple[Any, bool], Callable[[Any], Any]] = {}


def fast_decoder(tp: Any, strict: bool) -> Callable[[Any], Any]:
    """The generated decoder of a record class, or of an annotation over records (the
    log's `tuple[Evaluation, ...]`)."""
    key = (tp, strict)
    decoder = _cache.get(key)
    if decoder is None:
        compile_ = _compile if isinstance(tp, type) else _compile_annotation
        decoder = _cache[key] = compile_(tp, strict)
    return decoder


X = "\x00"  # placeholder for the value in converter templates (str.replace nests safely)


def _sub(template: str, value: str) -> str:
    return template.replace(X, value)


def _converter(tp: Any, strict: bool) -> tuple[str, dict[str, Any]]:
    """An expression template over the placeholder X converting one JSON value, and the
    globals it needs."""
    origin = get_origin(tp)
    if tp is Any:
        return X, {}
    if tp is str:
        return f"({X} if type({X}) is str else _bad())", {}
    if tp is bool:
        return f"({X} if type({X}) is bool else _bad())", {}
    if tp is int:
        return f"({X} if type({X}) is int else _bad())", {}
    if tp is float:
        return f"(float({X}) if type({X}) in (float, int) else _bad())", {}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        # A lookup, not `tp(X)`: a bad value must decline with Slow like every other check
        # (the enum's own ValueError is not one the caller catches), and an unhashable value
        # must not reach the dict. Members are keys too: in-process data may carry them.
        by_value: dict[Any, Any] = {m.value: m for m in tp} | {m: m for m in tp}
        name, kinds = f"_enum_{id(tp)}", f"_enum_types_{id(tp)}"
        return f"({name}[{X}] if type({X}) in {kinds} and {X} in {name} else _bad())", {
            name: by_value,
            kinds: frozenset({tp, *(type(m.value) for m in tp)}),
        }
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        from contracts.codec import custom_decoder

        custom = custom_decoder(tp)
        if custom is not None:  # its own wire form: called directly, no lazy hop per value
            name = f"_custom_{id(tp)}"
            return f"{name}({X}, '$')", {name: custom}
        name = f"_record_{id(tp)}_{int(strict)}"
        return f"{name}({X})", {name: _Lazy(tp, strict, name)}
    if origin in (types.UnionType, typing.Union):
        members = [a for a in get_args(tp) if a is not type(None)]
        if len(members) != 1:
            raise TypeError(f"unsupported union {tp}")
        inner, env = _converter(members[0], strict)
        return f"(None if {X} is None else {inner})", env
    if origin in (tuple, list, frozenset):
        (arg,) = get_args(tp)[:1] or (Any,)
        inner, env = _converter(arg, strict)
        build = {tuple: "tuple", list: "list", frozenset: "frozenset"}[origin]
        var = f"_e{len(inner)}"  # distinct names when comprehensions nest
        body = _sub(inner, var)
        # A list comprehension, not a generator: on 3.11 `tuple(<genexpr>)` costs ~0.5 us
        # more per list, and most lists here hold one or two records.
        items = f"[{body} for {var} in {X}]"
        return (
            f"({items if build == 'list' else f'{build}({items})'} if type({X}) is list "
            f"else ({build}() if {X} is None else _bad()))"
        ), env
    if origin in (dict, Mapping):
        args = get_args(tp)
        inner, env = _converter(args[1] if args else Any, strict)
        if inner == X:
            return f"(dict({X}) if type({X}) is dict else ({{}} if {X} is None else _bad()))", env
        var = f"_v{len(inner)}"
        body = _sub(inner, var)
        return (
            f"({{_k: {body} for _k, {var} in {X}.items()}} if type({X}) is dict "
            f"else ({{}} if {X} is None else _bad()))"
        ), env
    raise TypeError(f"no fast decoder for {tp!r}")


def _compile_annotation(tp: Any, strict: bool) -> Callable[[Any], Any]:
    expr, env = _converter(tp, strict)
    env["_bad"] = _bad
    return _define(f"def decode(v):\n    return {_sub(expr, 'v')}\n", env)


class _Lazy:
    """Defers compiling a nested record's decoder (records may refer to each other). Once
    compiled, the decoder replaces it in the globals of the functions that call it, so
    only the first value pays the extra call."""

    __slots__ = ("cls", "fn", "name", "strict", "users")

    def __init__(self, cls: type, strict: bool, name: str) -> None:
        self.cls = cls
        self.strict = strict
        self.name = name
        self.fn: Callable[[Any], Any] | None = None
        self.users: list[dict[str, Any]] = []  # the generated functions' globals

    def __call__(self, value: Any) -> Any:
        fn = self.fn
        if fn is None:
            fn = self.fn = fast_decoder(self.cls, self.strict)
            for env in self.users:
                env[self.name] = fn
            self.users.clear()
        return fn(value)


def _define(source: str, env: dict[str, Any]) -> Callable[[Any], Any]:
    """The function `decode` that `source` defines, with `env` as its globals."""
    exec(source, env)
    for value in env.values():
        if isinstance(value, _Lazy):
            value.users.append(env)
    fn: Callable[[Any], Any] = env["decode"]
    return fn


# Defaults built by these factories are immutable and equal every time: used as constants.
_CONSTANT_FACTORIES: dict[Any, str] = {tuple: "()", frozenset: "_EMPTY_SET"}
# And these are literals, cheaper than calling the type.
_LITERAL_FACTORIES: dict[Any, str] = {dict: "{}", list: "[]"}


def _compile(cls: type, strict: bool) -> Callable[[Any], Any]:
    from contracts.codec import custom_decoder, field_json_name

    custom = custom_decoder(cls)
    if custom is not None:
        return lambda value: custom(value, "$")

    hints = typing.get_type_hints(cls)
    fields = [f for f in dataclasses.fields(cls) if f.init and not f.metadata.get("internal")]
    twin = writable_twin(cls)
    env: dict[str, Any] = {
        "_bad": _bad,
        "_EMPTY_SET": frozenset(),
        "cls": cls,
        "twin": twin,
        "new": object.__new__,
    }
    known = frozenset(field_json_name(f) for f in fields)
    env["KNOWN"] = known
    lines = ["def decode(v):", "    if type(v) is not dict: _bad()"]
    if strict:
        lines.append("    if not KNOWN.issuperset(v): _bad()")
    lines.append("    obj = new(twin)" if twin is not None else "    kw = {}")
    for f in fields:
        key = field_json_name(f)
        expr, extra = _converter(hints[f.name], strict)
        env.update(extra)
        value = _sub(expr, "x")
        # Absent and null both take the default: `get`'s None stands for either.
        lines.append(f"    x = v.get({key!r})")
        factory = f.default_factory
        if f.default is not dataclasses.MISSING:
            env[f"d_{f.name}"] = f.default
            default = f"d_{f.name}"
        elif factory in _CONSTANT_FACTORIES:
            default = _CONSTANT_FACTORIES[factory]
        elif factory in _LITERAL_FACTORIES:
            default = _LITERAL_FACTORIES[factory]
        elif factory is not dataclasses.MISSING:
            env[f"f_{f.name}"] = factory
            default = f"f_{f.name}()"
        else:
            default = "_bad()"  # required and missing: let the slow path name it
        if twin is not None:
            lines.append(f"    obj.{f.name} = {default} if x is None else {value}")
        else:
            lines.append(f"    kw[{f.name!r}] = {default} if x is None else {value}")
    if twin is not None:
        lines += ["    obj.__class__ = cls", "    return obj"]
    else:
        lines.append("    return cls(**kw)")
    return _define("\n".join(lines), env)
