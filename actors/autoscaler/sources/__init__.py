"""Metric sources the autoscaler reads besides its own `drover` usage store
(core/usage_store.py): each answers a MetricQuery with MetricPoints or raises
MetricReadError."""

from actors.autoscaler.sources.prometheus import PrometheusSource

__all__ = ["PrometheusSource"]
