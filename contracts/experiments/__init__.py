"""Autoscaling-policy experiment files (`drover experiment run EXP.yaml`): a grid of policies x
traces x parameters x seeds, as typed records.

    name: spike-demo
    traces:
      - name: spike
        synthetic: spike          # or file: (a series) or requests: (a per-request CSV)
        base: 5
        peak: 40
        at_s: 1800
        width_s: 900
        duration_s: 2h
        noise: 0.1                # drawn from the run's seed
    policies:
      - {name: target-value, kind: target-value, target: 70, cooldown: 1m}
      - {name: hpa, kind: hpa}
      - {name: dstack, kind: dstack, target: 7, sweep: {scale_up_delay: [0, 5m]}}
      - {name: keep-alive-10m, kind: keep-alive, keep_alive: 10m}
    parameters:                   # grid axes of every run
      start_delay_s: [0, 30]
      per_alloc_rps: 10
    seeds: 2
    cost: allocation-hours        # or {metric: idle-memory, memory_mb: 2048}
    slo: violation-minutes        # or cold-start-share, violated-requests
    live:                         # `drover experiment run -live`: through a running drover
      time_factor: 30             # 30 simulated seconds a real second
      until_s: 15m                # the first 15 simulated minutes of each trace

Problems raise `contracts.errors.ValidationError`, each naming the field path and the value
(`policies[2].kind: 'foo' is not one of target-value, ...`).
"""

from contracts.experiments.parse import MAX_RUNS, load_experiment, parse_experiment
from contracts.experiments.spec import (
    COST_METRICS,
    POLICY_KINDS,
    RUN_PARAMETERS,
    SIM_METRICS,
    SLO_METRICS,
    Axis,
    DstackSettings,
    ExperimentSpec,
    HpaSettings,
    HybridSettings,
    KeepAliveSettings,
    LiveSettings,
    NomadSettings,
    Pareto,
    PolicyFileSettings,
    PolicyKind,
    PolicySettings,
    PolicySpec,
    PythonSettings,
    RequestLog,
    SeriesFile,
    Synthetic,
    TargetValueSettings,
    ThresholdSettings,
    TraceSource,
    TraceSpec,
)

__all__ = [
    "COST_METRICS",
    "MAX_RUNS",
    "POLICY_KINDS",
    "RUN_PARAMETERS",
    "SIM_METRICS",
    "SLO_METRICS",
    "Axis",
    "DstackSettings",
    "ExperimentSpec",
    "HpaSettings",
    "HybridSettings",
    "KeepAliveSettings",
    "LiveSettings",
    "NomadSettings",
    "Pareto",
    "PolicyFileSettings",
    "PolicyKind",
    "PolicySettings",
    "PolicySpec",
    "PythonSettings",
    "RequestLog",
    "SeriesFile",
    "Synthetic",
    "TargetValueSettings",
    "ThresholdSettings",
    "TraceSource",
    "TraceSpec",
    "load_experiment",
    "parse_experiment",
]
