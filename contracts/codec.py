"""JSON codec for every record in `contracts`.

Records are frozen dataclasses with snake_case attributes; on the wire they use Nomad's
PascalCase names (`job_id` -> `JobID`, `memory_mb` -> `MemoryMB`) so the HTTP API speaks
Nomad's JSON and stream messages share one format with it.

Encoders and decoders are compiled once per type from the type hints and cached. Decoding
validates as it goes and raises `CodecError` naming the JSON path and the offending value,
e.g. `$.TaskGroups[0].Count: expected an integer, got "lots"`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar, get_args, get_origin

import orjson

from contracts.fast_decode import Slow, fast_decoder

T = TypeVar("T")

Unknown = Literal["error", "ignore"]

# Words that Nomad spells in capitals inside PascalCase names.
_ACRONYMS = {
    "id": "ID",
    "ids": "IDs",
    "cpu": "CPU",
    "mb": "MB",
    "mhz": "MHz",
    "tg": "TG",
    "dc": "DC",
    "ttl": "TTL",
    "gpu": "GPU",
    "ip": "IP",
    "url": "URL",
    "acl": "ACL",
}


class CodecError(ValueError):
    """A value could not be decoded; `path` is the JSON path of the offending field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


def json_name(attribute: str) -> str:
    """`failed_tg_allocs` -> `FailedTGAllocs`; `l_target` -> `LTarget`."""
    return "".join(
        _ACRONYMS.get(part, part[:1].upper() + part[1:]) for part in attribute.split("_")
    )


def field_json_name(field: dataclasses.Field[Any]) -> str:
    return str(field.metadata.get("json", json_name(field.name)))


def describe(value: Any) -> str:
    """A short rendering of a bad value for error messages."""
    text = orjson.dumps(value, default=repr).decode() if _jsonable(value) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _jsonable(value: Any) -> bool:
    return isinstance(value, str | int | float | bool | list | dict) or value is None


# ---------------------------------------------------------------------------------------------
# Custom wire forms: a record may register its own encoder and decoder (e.g. Plan sends its
# allocations in the compact batch form); everything else about the codec applies around it.

WireEncoder = Callable[[Any], Any]
WireDecoder = Callable[[Any, str], Any]
_custom: dict[type, tuple[WireEncoder, WireDecoder]] = {}


def register_wire_form(cls: type, encode: WireEncoder, decode: WireDecoder) -> None:
    """`decode(data, path)` must raise CodecError naming the path of anything bad."""
    _custom[cls] = (encode, decode)
    _encoders.pop(cls, None)
    _lean_encoders.pop(cls, None)


def custom_decoder(cls: type) -> WireDecoder | None:
    entry = _custom.get(cls)
    return entry[1] if entry else None


# ---------------------------------------------------------------------------------------------
# Encoding


Encoder = Callable[[Any], Any]
_encoders: dict[Any, Encoder] = {}
_lean_encoders: dict[Any, Encoder] = {}


def to_wire(value: Any) -> Any:
    """Convert a record (or a container of records) into JSON-ready Python values."""
    return _converted(value, False)


def to_lean_wire(value: Any) -> Any:
    """`to_wire` leaving out every field that holds its default (at any depth), for what
    only our own decoders read (the state log, stream messages): they fill a missing field
    with its default, exactly as if it had been sent. A one-allocation job's registration
    is half the size this way, and each of the log's followers decodes it a third faster.
    Records with a wire form of their own keep it (the compact allocation groups of
    contracts/alloc_batch.py leave defaults out of their shared part in either form)."""
    return _converted(value, True)


def _converted(value: Any, lean: bool) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _encoder_for_class(type(value), lean)(value)
    if isinstance(value, dict):
        return {str(k): _converted(v, lean) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_converted(v, lean) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    return value


def _encoder_for_class(cls: type, lean: bool) -> Encoder:
    custom = _custom.get(cls)
    if custom is not None:
        return custom[0]
    return generic_encoder(cls, lean)


def generic_encoder(cls: type, lean: bool = False) -> Encoder:
    """A generated function building the record's dict in one literal: plain fields are
    copied as they are (orjson serialises str-valued enums itself), others go through their
    compiled encoders. `lean`: fields holding their default are left out (to_lean_wire)."""
    cache = _lean_encoders if lean else _encoders
    encoder = cache.get(cls)
    if encoder is None:
        hints = typing.get_type_hints(cls)
        env: dict[str, Any] = {}
        items, optional = [], []
        for f in dataclasses.fields(cls):
            if f.metadata.get("internal"):
                continue
            enc = _encoder_for_type(hints[f.name], lean)
            if enc is not _identity:
                env[f"e_{f.name}"] = enc
            key = field_json_name(f)
            is_default = _default_test(f, env) if lean else None
            if is_default is None:
                value = f"o.{f.name}" if enc is _identity else f"e_{f.name}(o.{f.name})"
                items.append(f"{key!r}: {value}")
            else:
                value = "x" if enc is _identity else f"e_{f.name}(x)"
                optional.append(
                    f"    x = o.{f.name}\n    if not ({is_default}): d[{key!r}] = {value}\n"
                )
        literal = "{" + ", ".join(items) + "}"
        if optional:
            source = f"def encode(o):\n    d = {literal}\n{''.join(optional)}    return d\n"
        else:
            source = f"def encode(o):\n    return {literal}\n"
        exec(source, env)
        encoder = cache[cls] = env["encode"]
    return encoder


_EMPTY_FACTORIES = (tuple, list, dict, frozenset, set)


def _default_test(f: dataclasses.Field[Any], env: dict[str, Any]) -> str | None:
    """An expression over `x` true when `x` is the field's default, or None where no cheap
    test is sure (a record-valued default is always sent)."""
    if f.default_factory is not dataclasses.MISSING:
        return "not x" if f.default_factory in _EMPTY_FACTORIES else None
    default = f.default
    if default is dataclasses.MISSING:
        return None
    if default is None or isinstance(default, bool):
        return f"x is {default}"
    if isinstance(default, enum.Enum):
        env[f"d_{f.name}"] = default
        return f"x is d_{f.name}"
    if type(default) in (int, float, str):
        # `type(x) is` too: a bool is never taken for 0, nor 0 for a 0.0 that must stay a
        # float on the wire.
        env[f"d_{f.name}"], env[f"t_{f.name}"] = default, type(default)
        return f"x == d_{f.name} and type(x) is t_{f.name}"
    if default == () or default == frozenset():
        return "not x"
    return None


def _identity(value: Any) -> Any:
    return value


def _encoder_for_type(tp: Any, lean: bool = False) -> Encoder:
    origin = get_origin(tp)
    if tp in (int, float, str, bool, Any) or tp is type(None):
        return _identity
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _identity  # str-valued enums serialise as their value via orjson
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _LazyClassEncoder(tp, lean)
    fallback = to_lean_wire if lean else to_wire
    if origin in (types.UnionType, typing.Union):
        members = [a for a in get_args(tp) if a is not type(None)]
        if len(members) == 1:
            inner = _encoder_for_type(members[0], lean)
            if inner is _identity:
                return _identity
            return lambda v: None if v is None else inner(v)
        return fallback
    if origin in (tuple, list, frozenset, set):
        args = get_args(tp)
        inner = _encoder_for_type(args[0], lean) if args else fallback
        if inner is _identity:
            return list
        return lambda v: [inner(x) for x in v]
    if origin in (dict, Mapping):
        args = get_args(tp)
        inner = _encoder_for_type(args[1], lean) if args else fallback
        if inner is _identity:
            return _identity
        return lambda v: {k: inner(x) for k, x in v.items()}
    return fallback


class _LazyClassEncoder:
    """Defers compiling a nested record's encoder (records may refer to each other)."""

    __slots__ = ("cls", "encoder", "lean")

    def __init__(self, cls: type, lean: bool) -> None:
        self.cls = cls
        self.lean = lean
        self.encoder: Encoder | None = None

    def __call__(self, value: Any) -> Any:
        if value is None:
            return None
        if self.encoder is None:
            self.encoder = _encoder_for_class(self.cls, self.lean)
        return self.encoder(value)


def dumps(value: Any) -> bytes:
    return orjson.dumps(to_wire(value))


def lean_dumps(value: Any) -> bytes:
    """`dumps` with defaults left out (to_lean_wire): for our own decoders only."""
    return orjson.dumps(to_lean_wire(value))


# ---------------------------------------------------------------------------------------------
# Decoding


Decoder = Callable[[Any, str, Unknown], Any]
_decoders: dict[Any, Decoder] = {}


def from_wire(tp: type[T], data: Any, path: str = "$", unknown: Unknown = "error") -> T:
    """Build a `tp` from JSON-shaped data, validating types; raises CodecError with the path.

    Records, and tuples of records, take the generated fast path first
    (contracts/fast_decode.py); anything it does not like is decoded again here, slowly, so
    that the error names its path."""
    try:
        record = _fast_records[tp]
    except (KeyError, TypeError):  # not seen yet, or an unhashable annotation
        record = _fast_record(tp)
    if record is not None:
        custom = _custom.get(tp) if record is tp else None
        if custom is not None:
            decoded_custom: T = custom[1](data, path)
            return decoded_custom
        try:
            fast: T = fast_decoder(tp, unknown == "error")(data)
            return fast
        except (Slow, CodecError):
            # Declined (bad or unusual input, or a nested wire form's error named with the
            # wrong path): the validating path decodes it or explains it. Anything else the
            # generated code raises is a bug in it and propagates.
            _fallbacks[record] = _fallbacks.get(record, 0) + 1
    decoded: T = _decoder_for_type(tp)(data, path, unknown)
    return decoded


# The types from_wire decodes on the fast path first, each with the record its fallbacks
# are counted under: a record, and `tuple[R, ...]` of a record R (the log's lists of
# evaluations); None for the validating decoder alone. Worked out once per type.
_fast_records: dict[Any, type | None] = {}


def _fast_record(tp: Any) -> type | None:
    args = get_args(tp) if get_origin(tp) is tuple else ()
    inner = args[0] if len(args) == 2 and args[1] is Ellipsis else tp
    record = inner if isinstance(inner, type) and dataclasses.is_dataclass(inner) else None
    with contextlib.suppress(TypeError):  # an unhashable annotation: not cached
        _fast_records[tp] = record
    return record


# Records the fast path handed to the validating one, per type. Valid JSON from our own
# encoders never falls back, so a count that grows outside bad input is a slowdown to find.
# (Counted without a lock: under concurrent threads it may undercount, never overcount.)
_fallbacks: dict[type, int] = {}


def fast_path_fallbacks() -> dict[str, int]:
    """How many decodes fell back from the fast path to the validating one, per record type
    (qualified name), since the process started."""
    return {f"{t.__module__}.{t.__qualname__}": n for t, n in _fallbacks.items()}


def loads(tp: type[T], raw: bytes | str, unknown: Unknown = "error") -> T:
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise CodecError("$", f"not valid JSON: {exc}") from None
    return from_wire(tp, data, "$", unknown)


def _decoder_for_type(tp: Any) -> Decoder:
    cached = _decoders.get(tp)
    if cached is not None:
        return cached
    decoder = _build_decoder(tp)
    _decoders[tp] = decoder
    return decoder


def _type_name(tp: Any) -> str:
    return {int: "an integer", float: "a number", str: "a string", bool: "a boolean"}.get(
        tp, getattr(tp, "__name__", str(tp))
    )


def _build_decoder(tp: Any) -> Decoder:
    origin = get_origin(tp)
    if tp is Any:
        return lambda v, p, u: v
    if tp is int:

        def dec_int(v: Any, p: str, u: Unknown) -> int:
            if isinstance(v, bool) or not isinstance(v, int):
                if isinstance(v, float) and v.is_integer():
                    return int(v)
                raise CodecError(p, f"expected an integer, got {describe(v)}")
            return v

        return dec_int
    if tp is float:

        def dec_float(v: Any, p: str, u: Unknown) -> float:
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise CodecError(p, f"expected a number, got {describe(v)}")
            return float(v)

        return dec_float
    if tp is str:

        def dec_str(v: Any, p: str, u: Unknown) -> str:
            if not isinstance(v, str):
                raise CodecError(p, f"expected a string, got {describe(v)}")
            return v

        return dec_str
    if tp is bool:

        def dec_bool(v: Any, p: str, u: Unknown) -> bool:
            if not isinstance(v, bool):
                raise CodecError(p, f"expected a boolean, got {describe(v)}")
            return v

        return dec_bool
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        allowed = ", ".join(str(m.value) for m in tp)

        def dec_enum(v: Any, p: str, u: Unknown) -> Any:
            try:
                return tp(v)
            except ValueError:
                raise CodecError(p, f"expected one of {allowed}, got {describe(v)}") from None

        return dec_enum
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _LazyClassDecoder(tp)
    if origin in (types.UnionType, typing.Union):
        members = [a for a in get_args(tp) if a is not type(None)]
        if len(members) != 1:
            raise TypeError(f"unsupported union {tp}")
        inner = _decoder_for_type(members[0])
        return lambda v, p, u: None if v is None else inner(v, p, u)
    if origin in (tuple, list, frozenset):
        args = get_args(tp)
        inner = _decoder_for_type(args[0]) if args else _decoder_for_type(Any)
        build: Callable[[Any], Any] = {tuple: tuple, list: list, frozenset: frozenset}[origin]

        def dec_seq(v: Any, p: str, u: Unknown) -> Any:
            if v is None:
                return build(())
            if not isinstance(v, list | tuple):
                raise CodecError(p, f"expected a list, got {describe(v)}")
            return build(inner(x, f"{p}[{i}]", u) for i, x in enumerate(v))

        return dec_seq
    if origin in (dict, Mapping):
        args = get_args(tp)
        inner = _decoder_for_type(args[1]) if args else _decoder_for_type(Any)

        def dec_map(v: Any, p: str, u: Unknown) -> Any:
            if v is None:
                return {}
            if not isinstance(v, dict):
                raise CodecError(p, f"expected an object, got {describe(v)}")
            return {str(k): inner(x, f"{p}.{k}", u) for k, x in v.items()}

        return dec_map
    raise TypeError(f"no decoder for {tp!r}")


class _LazyClassDecoder:
    __slots__ = ("cls", "compiled")

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.compiled: Decoder | None = None

    def __call__(self, value: Any, path: str, unknown: Unknown) -> Any:
        custom = _custom.get(self.cls)
        if custom is not None:
            return custom[1](value, path)
        if self.compiled is None:
            self.compiled = _compile_class_decoder(self.cls)
        return self.compiled(value, path, unknown)


def generic_decoder(cls: type) -> Decoder:
    """The validating decoder of a record's own fields, ignoring any custom wire form.
    Compiled once per class: a custom wire form calls it for every message it decodes."""
    decoder = _generic_decoders.get(cls)
    if decoder is None:
        decoder = _generic_decoders[cls] = _compile_class_decoder(cls)
    return decoder


_generic_decoders: dict[type, Decoder] = {}


def _compile_class_decoder(cls: type) -> Decoder:
    hints = typing.get_type_hints(cls)
    plan: list[tuple[str, str, Decoder]] = []
    for f in dataclasses.fields(cls):
        if f.metadata.get("internal") or not f.init:
            continue
        plan.append((f.name, field_json_name(f), _decoder_for_type(hints[f.name])))
    known = {key for _, key, _ in plan}
    required = {
        field_json_name(f)
        for f in dataclasses.fields(cls)
        if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }

    def decode(value: Any, path: str, unknown: Unknown) -> Any:
        if isinstance(value, cls):
            return value
        if not isinstance(value, dict):
            raise CodecError(path, f"expected an object, got {describe(value)}")
        if unknown == "error":
            extra = [k for k in value if k not in known]
            if extra:
                raise CodecError(f"{path}.{extra[0]}", "unknown field")
        missing = [k for k in required if k not in value]
        if missing:
            raise CodecError(f"{path}.{missing[0]}", "required field is missing")
        kwargs = {}
        for name, key, dec in plan:
            if key in value:
                raw = value[key]
                if raw is None and key not in required:
                    continue  # null means "use the default", as in Nomad's JSON
                kwargs[name] = dec(raw, f"{path}.{key}", unknown)
        return cls(**kwargs)

    return decode
