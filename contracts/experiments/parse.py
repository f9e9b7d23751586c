"""An experiment file (YAML, `yaml.safe_load`) -> `ExperimentSpec`, every problem reported as
`<field path>: <what>` in one `ValidationError`; paths are relative to the file's folder.

Bounds keep a file's work bounded: at most 10,000 runs, 32 traces, 32 policies, 100 values
an axis, 1,000 seeds and a 1 MiB file."""

from __future__ import annotations

import os
from typing import Any

import yaml

from contracts.errors import ValidationError
from contracts.experiments.fields import (
    Bad,
    Node,
    choice,
    duration,
    integer,
    number,
    optional,
    plain,
    show,
    text,
)
from contracts.experiments.policies import parse_axis, parse_policy, resolve_path
from contracts.experiments.spec import (
    COST_METRICS,
    NAME,
    NAME_HINT,
    RUN_PARAMETERS,
    SLO_METRICS,
    Axis,
    ClusterSettings,
    DelaySamples,
    ExperimentSpec,
    LiveSettings,
    NodeShapeSpec,
    Pareto,
    PolicySpec,
    QueueSettings,
    TraceSpec,
)
from contracts.experiments.traces import parse_trace
from contracts.traces.samples import UNITS

MAX_RUNS = 10_000
MAX_TRACES = 32
MAX_POLICIES = 32
MAX_SEEDS = 1000
MAX_FILE_BYTES = 1024 * 1024
_SEED = integer(minimum=0, maximum=2**32 - 1)


def _start_count(value: Any) -> int | None:
    """A whole number, or "min": start at the policy's minimum (as a Nomad group does)."""
    if value == "min":
        return None
    try:
        result: int = integer(minimum=0, maximum=100_000)(value)
    except Bad:
        raise Bad(f'expected a whole number >= 0 or "min", got {show(value)}') from None
    return result


_RUN_CHECKS = {
    "start_delay_s": (duration(), 0.0),
    "per_alloc_rps": (number(positive=True), 1.0),
    "start_count": (_start_count, "min"),
}


def load_experiment(path: str) -> ExperimentSpec:
    """Read and parse the experiment file at `path`."""
    try:
        size = os.path.getsize(path)
        if size > MAX_FILE_BYTES:
            raise ValidationError(f"{size} bytes, more than the {MAX_FILE_BYTES} allowed")
        with open(path, encoding="utf-8") as file:
            content = file.read()
    except OSError as exc:
        raise ValidationError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ValidationError(f"not a UTF-8 text file: {exc}") from None
    try:
        document = yaml.safe_load(content)
    except yaml.YAMLError as exc:
        raise ValidationError(f"not YAML: {' '.join(str(exc).split())}") from None
    base_dir = os.path.dirname(os.path.abspath(path))
    default_name = os.path.splitext(os.path.basename(path))[0]
    return parse_experiment(document, base_dir=base_dir, path=path, default_name=default_name)


def parse_experiment(
    document: Any, *, base_dir: str = ".", path: str = "", default_name: str = "experiment"
) -> ExperimentSpec:
    problems: list[str] = []
    node = Node(document, "", problems)
    if not node.ok:
        raise ValidationError(problems)
    name_check = text(pattern=NAME.fullmatch, hint=NAME_HINT)
    name = node.get("name", name_check, default_name if NAME.fullmatch(default_name) else None)
    if name is None and not node.has("name"):
        node.error("name", "required (the file's name is not a valid name)")
    description = node.get("description", text(), "")
    traces = _traces(node, base_dir)
    policies = _policies(node, base_dir)
    start_delays = _start_delays(node, base_dir)
    parameters = _parameters(node, {d.name: d for d in start_delays})
    parameters = _capacity(node, parameters)
    seeds = _seeds(node)
    interval_s = node.get("interval_s", optional(duration(positive=True)), None)
    until_s = node.get("until_s", optional(duration(positive=True)), None)
    pareto = _pareto(node)
    live = _live(node)
    queue = _queue(node)
    cluster = _cluster(node)
    if pareto.cost == "node-hours" and cluster is None and not problems:
        node.error("cost", "node-hours needs a `cluster:` (the nodes to count)")
    node.finish()
    try:
        echo = plain(document)
    except Bad as exc:  # a value no field read (every field's own check ran above)
        problems.append(f"experiment: {exc}")
    if problems:
        raise ValidationError(problems)
    spec = ExperimentSpec(
        name=name,
        traces=traces,
        policies=policies,
        parameters=parameters,
        seeds=seeds,
        interval_s=interval_s,
        until_s=until_s,
        pareto=pareto,
        live=live,
        queue=queue,
        cluster=cluster,
        start_delays=start_delays,
        description=description,
        path=path,
        document=echo,
    )
    if spec.runs > MAX_RUNS:
        raise ValidationError(
            f"experiment: {spec.runs} runs (traces x policy variants x parameters x seeds),"
            f" more than the {MAX_RUNS} allowed"
        )
    return spec


def _unique(items: list[Any], what: str, problems: list[str]) -> None:
    seen: set[str] = set()
    for i, item in enumerate(items):
        if item.name in seen:
            problems.append(f"{what}[{i}].name: {item.name!r} is used twice")
        seen.add(item.name)


def _traces(node: Node, base_dir: str) -> tuple[TraceSpec, ...]:
    items = node.sequence("traces", MAX_TRACES, required=True)
    parsed = [parse_trace(item, i, base_dir, node.problems) for i, item in enumerate(items)]
    traces = [t for t in parsed if t is not None]
    _unique(traces, "traces", node.problems)
    return tuple(traces)


def _policies(node: Node, base_dir: str) -> tuple[PolicySpec, ...]:
    items = node.sequence("policies", MAX_POLICIES, required=True)
    parsed = [parse_policy(item, i, base_dir, node.problems) for i, item in enumerate(items)]
    policies = [p for p in parsed if p is not None]
    _unique(policies, "policies", node.problems)
    return tuple(policies)


def _start_delay(named: dict[str, DelaySamples]) -> Any:
    """Seconds (a number or a duration), or the name of a `start_delays:` distribution."""
    seconds = duration()

    def check(value: Any) -> float | DelaySamples:
        if isinstance(value, str) and value in named:
            return named[value]
        try:
            result: float = seconds(value)
        except Bad:
            names = ", ".join(sorted(named)) or "none defined"
            raise Bad(
                f"expected seconds, a duration or a start_delays name ({names}), got {show(value)}"
            ) from None
        return result

    return check


def _parameters(node: Node, delays: dict[str, DelaySamples]) -> tuple[Axis, ...]:
    raw = node.raw("parameters")
    here = Node({} if raw is None else raw, "parameters", node.problems)
    axes: list[Axis] = []
    for name in RUN_PARAMETERS:
        check, default = _RUN_CHECKS[name]
        if name == "start_delay_s":
            check = _start_delay(delays)
        here.seen.add(name)
        values = here.data.get(name, default)
        axis = parse_axis(name, values, check, here.at(name), node.problems)
        axes.append(axis or Axis(name, (check(default),), (str(default),)))
    for key in here.data:
        if key not in RUN_PARAMETERS:
            node.problems.append(
                f"parameters.{key}: unknown parameter {show(key)}; expected one of"
                f" {', '.join(RUN_PARAMETERS)} (a policy's own settings are swept under its"
                " `sweep`)"
            )
    return tuple(axes)


def _capacity(node: Node, parameters: tuple[Axis, ...]) -> tuple[Axis, ...]:
    """`capacity: {max_rps: 14, target_utilisation: [60, 70]}`: an allocation saturates at
    `max_rps` and meets its SLO up to the target utilisation, so it serves max_rps x target
    / 100 requests/s: the `per_alloc_rps` axis, one value per target."""
    raw = node.raw("capacity")
    if raw is None:
        return parameters
    here = Node(raw, "capacity", node.problems)
    if not here.ok:
        return parameters
    max_rps = here.get("max_rps", number(positive=True), None, required=True)
    here.seen.add("target_utilisation")
    targets = parse_axis(
        "target_utilisation",
        here.data.get("target_utilisation", 100),
        number(positive=True),
        here.at("target_utilisation"),
        node.problems,
    )
    here.finish()
    raw_parameters = node.data.get("parameters")
    if isinstance(raw_parameters, dict) and "per_alloc_rps" in raw_parameters:
        node.error("capacity", "give parameters.per_alloc_rps or capacity, not both")
        return parameters
    if max_rps is None or targets is None:
        return parameters
    axis = Axis(
        "per_alloc_rps",
        tuple(max_rps * t / 100.0 for t in targets.values),
        tuple(f"{max_rps:g} at {t:g}%" for t in targets.values),
    )
    return tuple(axis if a.name == "per_alloc_rps" else a for a in parameters)


def _start_delays(node: Node, base_dir: str) -> tuple[DelaySamples, ...]:
    raw = node.raw("start_delays")
    if raw is None:
        return ()
    here = Node(raw, "start_delays", node.problems)
    delays: list[DelaySamples] = []
    for key, value in list(here.data.items())[:MAX_TRACES]:
        here.seen.add(str(key))
        name = here.value(str(key), key, text(pattern=NAME.fullmatch, hint=NAME_HINT))
        item = Node(value, here.at(str(key)), node.problems)
        if not item.ok or name is None:
            continue
        path = item.get("file", lambda v: resolve_path(base_dir, v), required=True)
        column = item.get("column", text(), "value")
        unit = item.get("unit", choice(tuple(UNITS)), "s")
        item.finish()
        if path is not None:
            delays.append(DelaySamples(name=name, path=path, column=column, unit=unit))
    if len(here.data) > MAX_TRACES:
        node.error("start_delays", f"more than the {MAX_TRACES} distributions allowed")
    return tuple(delays)


def _queue(node: Node) -> QueueSettings | None:
    raw = node.raw("queue")
    if raw is None:
        return None
    here = Node(raw, "queue", node.problems)
    if not here.ok:
        return None
    wait = here.get("slo_wait_s", duration(), None, required=True)
    here.finish()
    return None if wait is None else QueueSettings(slo_wait_s=wait)


def _seeds(node: Node) -> tuple[int, ...]:
    raw = node.raw("seeds")
    if raw is None:
        return (0,)
    if isinstance(raw, list):
        if not raw:
            node.error("seeds", "expected at least one seed, got an empty list")
            return (0,)
        if len(raw) > MAX_SEEDS:
            node.error("seeds", f"{len(raw)} seeds, more than the {MAX_SEEDS} allowed")
            return (0,)
        seeds = [node.value(f"seeds[{i}]", s, _SEED, 0) for i, s in enumerate(raw)]
        if len(set(seeds)) != len(seeds):
            node.error("seeds", f"seeds repeat: {show(raw)}")
        return tuple(seeds)
    count: int = node.value("seeds", raw, integer(minimum=1, maximum=MAX_SEEDS), 1)
    return tuple(range(count))


def _pareto(node: Node) -> Pareto:
    cost_raw = node.raw("cost")
    cost: Any = "allocation-hours"
    memory_mb = 1024.0
    if isinstance(cost_raw, dict):
        here = Node(cost_raw, "cost", node.problems)
        cost = here.get("metric", choice(COST_METRICS), cost)
        memory_mb = here.get("memory_mb", number(positive=True), memory_mb)
        here.finish()
    elif cost_raw is not None:
        cost = node.value("cost", cost_raw, choice(COST_METRICS), cost)
    slo = node.get("slo", choice(SLO_METRICS), "violation-minutes")
    return Pareto(cost=cost, memory_mb=memory_mb, slo=slo)


def _live(node: Node) -> LiveSettings:
    raw = node.raw("live")
    if raw is None:
        return LiveSettings()
    here = Node(raw, "live", node.problems)
    if not here.ok:
        return LiveSettings()
    default = LiveSettings()
    settings = LiveSettings(
        time_factor=here.get("time_factor", number(positive=True), default.time_factor),
        until_s=here.get("until_s", optional(duration(positive=True)), default.until_s),
        alloc_mhz=here.get("alloc_mhz", integer(minimum=1, maximum=1_000_000), default.alloc_mhz),
        max_real_s=here.get("max_real_s", duration(positive=True), default.max_real_s),
    )
    here.finish()
    return settings


MAX_SHAPES = 32
_MHZ = integer(minimum=1, maximum=10_000_000)
_MB = integer(minimum=1, maximum=100_000_000)
_LOAD = integer(minimum=0, maximum=100_000_000)


def _cluster(node: Node) -> ClusterSettings | None:
    raw = node.raw("cluster")
    if raw is None:
        return None
    here = Node(raw, "cluster", node.problems)
    if not here.ok:
        return None
    d = ClusterSettings()
    count = integer(minimum=0, maximum=100_000)
    settings = ClusterSettings(
        placement=here.get("placement", choice(("slots", "core")), d.placement),
        allocs_per_node=here.get("allocs_per_node", integer(minimum=1, maximum=10_000), 1),
        ask_cpu=here.get("ask_cpu", _MHZ, d.ask_cpu),
        ask_memory_mb=here.get("ask_memory_mb", _MB, d.ask_memory_mb),
        shapes=_shapes(here) or d.shapes,
        initial_nodes=here.get("initial_nodes", count, d.initial_nodes),
        min_nodes=here.get("min_nodes", count, d.min_nodes),
        max_nodes=here.get("max_nodes", optional(integer(minimum=1, maximum=100_000)), None),
        node_delay_s=here.get("node_delay_s", duration(), d.node_delay_s),
        node_idle_s=here.get("node_idle_s", duration(), d.node_idle_s),
    )
    here.finish()
    top = settings.max_nodes if settings.max_nodes is not None else 100_000
    if not settings.min_nodes <= settings.initial_nodes <= top:
        node.error(
            "cluster",
            f"expected min_nodes <= initial_nodes <= max_nodes, got {settings.min_nodes},"
            f" {settings.initial_nodes}, {settings.max_nodes}",
        )
    if settings.placement == "slots" and (here.has("shapes") or here.has("ask_cpu")):
        node.error("cluster", "shapes and ask_* are for placement: core")
    for i, shape in enumerate(settings.shapes if settings.placement == "core" else ()):
        free_cpu = shape.cpu_mhz - shape.load_cpu
        free_mb = shape.memory_mb - shape.load_memory_mb
        if free_cpu < settings.ask_cpu or free_mb < settings.ask_memory_mb:
            node.error(
                f"cluster.shapes[{i}]",
                f"{free_cpu} MHz and {free_mb} MB free after its load hold no allocation of"
                f" {settings.ask_cpu} MHz and {settings.ask_memory_mb} MB",
            )
    return settings


def _shapes(here: Node) -> tuple[NodeShapeSpec, ...]:
    shapes: list[NodeShapeSpec] = []
    for i, item in enumerate(here.sequence("shapes", MAX_SHAPES)):
        shape = Node(item, here.at(f"shapes[{i}]"), here.problems)
        if not shape.ok:
            continue
        d = NodeShapeSpec()
        shapes.append(
            NodeShapeSpec(
                cpu_mhz=shape.get("cpu_mhz", _MHZ, d.cpu_mhz),
                memory_mb=shape.get("memory_mb", _MB, d.memory_mb),
                load_cpu=shape.get("load_cpu", _LOAD, 0),
                load_memory_mb=shape.get("load_memory_mb", _LOAD, 0),
            )
        )
        shape.finish()
    return tuple(shapes)
