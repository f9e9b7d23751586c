"""`traces:` of an experiment file: each a name and one source, `file` (a series: NAB,
per-minute counts, Azure Functions), `requests` (a per-request CSV with a `preset` or its
`columns`) or `synthetic` (a shape and its parameters), then an optional `window`,
`time_scale` and `value_scale`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from contracts.experiments.fields import (
    Node,
    choice,
    duration,
    integer,
    mapping,
    number,
    optional,
    show,
    text,
)
from contracts.experiments.policies import resolve_path
from contracts.experiments.spec import (
    NAME,
    NAME_HINT,
    SYNTHETIC_SHAPES,
    RequestLog,
    SeriesFile,
    Synthetic,
    TraceSource,
    TraceSpec,
)
from contracts.traces.requests import PRESETS, RequestLayout
from contracts.traces.series import MAX_POINTS

SOURCES = ("file", "requests", "synthetic")
_TIME_FORMATS = ("iso", "s", "ms", "us", "ns")
_COMMON = ("name", "window", "time_scale", "value_scale")
_SERIES_KEYS = ("values",)
_REQUEST_KEYS = ("preset", "columns", "where", "demand", "bucket_s", "limit")
_SYNTHETIC_KEYS = ("duration_s", "step_s", "noise", "seed")


def parse_trace(data: Any, index: int, base_dir: str, problems: list[str]) -> TraceSpec | None:
    node = Node(data, f"traces[{index}]", problems)
    if not node.ok:
        return None
    before = len(problems)
    name = node.get("name", text(pattern=NAME.fullmatch, hint=NAME_HINT), required=True)
    given = [key for key in SOURCES if node.has(key)]
    if len(given) != 1:
        got = " and ".join(given) if given else "none"
        node.problems.append(f"{node.path}: exactly one of file, requests, synthetic (got {got})")
        node.finish([*_COMMON, *SOURCES, *_SERIES_KEYS, *_REQUEST_KEYS, *_SYNTHETIC_KEYS])
        return None
    source: TraceSource | None
    if given[0] == "file":
        source = _series(node, base_dir)
        extra: tuple[str, ...] = _SERIES_KEYS
    elif given[0] == "requests":
        source = _requests(node, base_dir)
        extra = _REQUEST_KEYS
    else:
        source = _synthetic(node)
        extra = _SYNTHETIC_KEYS
    if isinstance(source, Synthetic):
        extra = (*extra, *_shape_keys(source.shape))
    time_scale = node.get("time_scale", number(positive=True), 1.0)
    value_scale = node.get("value_scale", number(minimum=0), 1.0)
    start_s, duration_s = _window(node)
    node.finish([*_COMMON, given[0], *extra])
    if len(problems) > before or source is None or name is None:
        return None
    return TraceSpec(
        name=name,
        source=source,
        time_scale=time_scale,
        value_scale=value_scale,
        start_s=start_s,
        duration_s=duration_s,
    )


def _window(node: Node) -> tuple[float, float | None]:
    raw = node.raw("window")
    if raw is None:
        return 0.0, None
    window = Node(raw, node.at("window"), node.problems)
    start = window.get("start_s", duration(), 0.0)
    length = window.get("duration_s", optional(duration(positive=True)), None)
    window.finish()
    return start, length


def _series(node: Node, base_dir: str) -> SeriesFile | None:
    path = node.get("file", lambda v: resolve_path(base_dir, v))
    values = node.get("values", choice(("rate", "count")), "rate")
    return None if path is None else SeriesFile(path=path, values=values)


def _requests(node: Node, base_dir: str) -> RequestLog | None:
    path = node.get("requests", lambda v: resolve_path(base_dir, v))
    layout: RequestLayout | None = None
    if node.has("preset") == node.has("columns"):
        node.problems.append(f"{node.path}: exactly one of preset, columns is required")
        node.raw("preset")
        node.raw("columns")
    elif node.has("preset"):
        preset = node.get("preset", choice(tuple(PRESETS)))
        layout = None if preset is None else PRESETS[preset]
    else:
        layout = _columns(Node(node.raw("columns"), node.at("columns"), node.problems))
    where = node.get("where", mapping, {})
    if where and layout is not None:
        bad = [k for k, v in where.items() if not isinstance(v, str)]
        if bad:
            node.error("where", f"values must be strings, got {show(where[bad[0]])}")
        layout = replace(layout, where={**layout.where, **where})
    timed = layout is not None and (layout.duration is not None or layout.end is not None)
    demand = node.get(
        "demand", choice(("arrivals", "concurrency")), "concurrency" if timed else "arrivals"
    )
    if demand == "concurrency" and layout is not None and not timed:
        node.error("demand", "concurrency needs execution times (a duration or end column)")
    bucket_s = node.get("bucket_s", duration(positive=True), 60.0)
    limit = node.get("limit", optional(integer(minimum=1, maximum=MAX_POINTS)), None)
    if path is None or layout is None:
        return None
    return RequestLog(path=path, layout=layout, demand=demand, bucket_s=bucket_s, limit=limit)


def _columns(node: Node) -> RequestLayout | None:
    if not node.ok:
        return None
    before = len(node.problems)
    timestamp = node.get("timestamp", text(), required=True)
    time_format = node.get("time_format", choice(_TIME_FORMATS), "iso")
    duration_col = node.get("duration", optional(text()), None)
    scale = node.get("duration_scale", number(positive=True), 1.0)
    end = node.get("end", optional(text()), None)
    node.finish()
    if duration_col is not None and end is not None:
        node.problems.append(f"{node.path}: give duration or end, not both")
    if len(node.problems) > before:
        return None
    return RequestLayout(
        timestamp=timestamp,
        time_format=time_format,
        duration=duration_col,
        duration_scale=scale,
        end=end,
    )


def _shape_keys(shape: str) -> tuple[str, ...]:
    required, optional_keys = SYNTHETIC_SHAPES.get(shape, ((), ()))
    return (*required, *optional_keys)


def _synthetic(node: Node) -> Synthetic | None:
    shape = node.get("synthetic", choice(tuple(SYNTHETIC_SHAPES)), required=True)
    duration_s = node.get("duration_s", duration(positive=True), required=True)
    step_s = node.get("step_s", optional(duration(positive=True)), None)
    noise = node.get("noise", number(minimum=0), 0.0)
    if noise >= 1:
        node.error("noise", f"expected a fraction in [0, 1), got {show(noise)}")
    seed = node.get("seed", optional(integer(minimum=0, maximum=2**32 - 1)), None)
    if shape is None or duration_s is None:
        return None
    required, optional_keys = SYNTHETIC_SHAPES[shape]
    params: list[tuple[str, float]] = []
    for key in (*required, *optional_keys):
        if key == "amplitude":
            check = number()
        elif key.endswith("_s"):
            check = duration(positive=key in ("period_s",))
        else:
            check = number(minimum=0)
        value = node.get(key, check, None, required=key in required)
        if value is not None:
            params.append((key, value))
    step = step_s if step_s is not None else (1.0 if shape == "poisson" else 60.0)
    if duration_s / step > MAX_POINTS:
        node.error("duration_s", f"{duration_s / step:.0f} points, more than {MAX_POINTS}")
    return Synthetic(
        shape=shape,
        params=tuple(params),
        duration_s=duration_s,
        step_s=step_s,
        noise=noise,
        seed=seed,
    )
