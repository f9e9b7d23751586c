"""`drover experiment run -live EXP.yaml`: an experiment's traces and policies replayed through
a running drover (launch/live_replay.py), the simulator's count trajectory compared with the
live one, and the comparison written as live.csv, live.json and live_counts.png.

What is replayed: every (trace, policy variant) pair whose policy the autoscaler itself runs
(Nomad's target-value and threshold, the HPA-like behavior, a policy file or body) on a
utilisation metric, at the grid's first parameter combination and first seed. The other kinds
(dstack's and the keep-alive policies are simulator models, a Python class has no live form)
and checks on `rps` metrics are listed as skipped with the reason. A live group needs an
allocation to measure, so a run that would start at zero starts at one. Start delays are not
replayed: the comparison's simulation starts allocations at once, as the mock driver does."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import orjson

from actors.experiments.core.catalog import build
from actors.experiments.core.live_plan import LIVE_QUERIES, LiveSetup
from actors.experiments.core.policies import NomadPolicy
from actors.experiments.grid import RunSpec, expand
from actors.experiments.traces import demand_for
from contracts.errors import ValidationError
from contracts.experiments import ExperimentSpec, LiveSettings
from launch.live_replay import LiveReplay, LiveResult, result_row, run_replays

LIVE_JSON = "live.json"
LIVE_CSV = "live.csv"


@dataclass(frozen=True, slots=True)
class LivePlan:
    replays: list[LiveReplay]
    skipped: list[str]  # "<trace>/<policy>: why"

    @property
    def real_seconds(self) -> float:
        return sum(r.setup.real_seconds for r in self.replays)


def _first_runs(spec: ExperimentSpec) -> list[RunSpec]:
    """One run per (trace, policy variant): the grid's first parameter combination and seed."""
    seen: set[tuple[str, str, tuple[tuple[str, str], ...]]] = set()
    chosen = []
    for run in expand(spec):
        key = (run.trace.name, run.policy.name, run.sweep)
        if key not in seen:
            seen.add(key)
            chosen.append(run)
    return chosen


def _name(run: RunSpec) -> str:
    sweep = ",".join(f"{k}={v}" for k, v in run.sweep)
    return f"{run.trace.name}/{run.policy.name}" + (f"[{sweep}]" if sweep else "")


def plan(spec: ExperimentSpec, live: LiveSettings) -> LivePlan:
    """The replays of `spec` under `live`; raises ValidationError when none can run live or
    they would take longer than `live.max_real_s`."""
    replays: list[LiveReplay] = []
    skipped: list[str] = []
    for run in _first_runs(spec):
        name = _name(run)
        built = build(run.policy, run.settings, per_alloc_rps=run.per_alloc_rps)
        if not isinstance(built.policy, NomadPolicy):
            skipped.append(f"{name}: a {run.policy.kind} policy runs in the simulator only")
            continue
        policy = built.policy.policy
        if spec.interval_s is not None:
            policy = replace(policy, evaluation_interval_s=spec.interval_s)
        queries = [c.query for c in policy.checks if c.strategy.name != "fixed-value"]
        unknown = [q for q in queries if q not in LIVE_QUERIES]
        if unknown:
            skipped.append(
                f"{name}: query {unknown[0]!r} has no live counterpart "
                f"(live replays read {', '.join(sorted(LIVE_QUERIES))})"
            )
            continue
        demand = demand_for(run.trace, run.seed)
        until = min(x for x in (demand.span_s, spec.until_s, live.until_s) if x is not None)
        start = built.min if run.start_count is None else run.start_count
        setup = LiveSetup(
            time_factor=live.time_factor,
            until_s=until,
            per_alloc_rps=run.per_alloc_rps,
            start_count=max(1, start),
            alloc_mhz=live.alloc_mhz,
        )
        replays.append(LiveReplay(name, demand.times, demand.values, policy, setup))
    if not replays:
        raise ValidationError(
            f"no policy of this experiment can be replayed live ({'; '.join(skipped)})"
        )
    result = LivePlan(replays, skipped)
    if result.real_seconds > live.max_real_s:
        raise ValidationError(
            f"live: the replays would take {result.real_seconds:.0f} s of real time, more than "
            f"live.max_real_s ({live.max_real_s:.0f} s); raise live.time_factor, lower "
            "live.until_s or raise live.max_real_s"
        )
    return result


def run(
    live_plan: LivePlan,
    *,
    address: str | None,
    token: str | None,
    progress: Callable[[str, float], None] | None = None,
) -> list[LiveResult]:
    return run_replays(live_plan.replays, address=address, token=token, progress=progress)


# -- results ----------------------------------------------------------------------------------


def document(
    spec: ExperimentSpec, live_plan: LivePlan, results: list[LiveResult]
) -> dict[str, Any]:
    setups = {r.name: r.setup for r in live_plan.replays}
    rows = []
    for result in results:
        setup = setups[result.name]
        row = result_row(result)
        row.update(
            time_factor=setup.time_factor,
            until_s=setup.until_s,
            live=[list(p) for p in result.live],
            simulated=[list(p) for p in result.simulated],
        )
        rows.append(row)
    return {"name": spec.name, "rows": rows, "skipped": live_plan.skipped}


def write(doc: dict[str, Any], directory: str) -> list[str]:
    os.makedirs(directory, exist_ok=True)
    json_path = os.path.join(directory, LIVE_JSON)
    with open(json_path, "wb") as file:
        file.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    csv_path = os.path.join(directory, LIVE_CSV)
    with open(csv_path, "w", encoding="utf-8", newline="") as file:
        file.write(csv_text(doc["rows"]))
    return [csv_path, json_path]


def read(directory: str) -> dict[str, Any] | None:
    """The live.json of a results folder, or None when it has none."""
    path = os.path.join(directory, LIVE_JSON)
    if not os.path.exists(path):
        return None
    try:
        with open(path, "rb") as file:
            doc = orjson.loads(file.read())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise ValidationError(f"{path}: cannot read it: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
        raise ValidationError(f"{path}: expected an object with a rows list")
    return doc


TABLE_COLUMNS = (
    ("replay", "Replay"),
    ("mean_abs_count_error", "Mean |count error|"),
    ("time_share_differing", "Time differing"),
    ("max_abs_count_error", "Max"),
    ("live_actions", "Live actions"),
    ("sim_actions", "Sim actions"),
    ("allocation_hours_error", "Alloc-hours error"),
    ("wall_s", "Wall s"),
)


def csv_text(rows: list[dict[str, Any]]) -> str:
    columns = [k for k in (rows[0] if rows else {}) if k not in ("live", "simulated")]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([row[c] for c in columns])
    return out.getvalue()


def summary(doc: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    headers = [title for _, title in TABLE_COLUMNS]
    rows = [[str(row.get(key, "-")) for key, _ in TABLE_COLUMNS] for row in doc["rows"]]
    return headers, rows
