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
      start_delay_s: [0, 30, model-load]
      per_alloc_rps: 10
    seeds: 2
    cost: allocation-hours        # or {metric: idle-memory, memory_mb: 2048}
    slo: violation-minutes        # or cold-start-share, violated-requests
    start_delays:                 # sampled start delays, named in parameters.start_delay_s
      model-load: {file: loads.csv, column: value, unit: ms}
    queue: {slo_wait_s: 2}        # the excess waits; a wait over 2 s violates the SLO
    cluster:                      # allocations on nodes a cluster autoscaler adds and removes
      allocs_per_node: 4
      max_nodes: 10               # beyond: blocked allocations
      node_delay_s: 2m            # provisioning
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
    ClusterSettings,
    DelaySamples,
    DstackSettings,
    ExperimentSpec,
    HpaSettings,
    HybridSettings,
    KeepAliveSettings,
    LiveSettings,
    NodeShapeSpec,
    NomadSettings,
    Pareto,
    PolicyFileSettings,
    PolicyKind,
    PolicySettings,
    PolicySpec,
    PythonSettings,
    QueueSettings,
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
    "ClusterSettings",
    "DelaySamples",
    "DstackSettings",
    "ExperimentSpec",
    "HpaSettings",
    "HybridSettings",
    "KeepAliveSettings",
    "LiveSettings",
    "NodeShapeSpec",
    "NomadSettings",
    "Pareto",
    "PolicyFileSettings",
    "PolicyKind",
    "PolicySettings",
    "PolicySpec",
    "PythonSettings",
    "QueueSettings",
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
