"""The autoscaler's pure core (no Ray, no Redis): Nomad Autoscaler's strategies, check
combination and per-policy handler, plus drover's optional damping (behavior.py)."""

from actors.autoscaler.core.behavior import BehaviorState
from actors.autoscaler.core.checks import MetricReader, evaluate_checks, query_for
from actors.autoscaler.core.combine import Vote, cap_count, pick_winner, preempt, set_dry_run
from actors.autoscaler.core.handler import (
    HandlerState,
    PolicyHandler,
    interval_splay_s,
    remaining_cooldown,
)
from actors.autoscaler.core.strategies import StrategyError, needs_metrics, run_strategy

__all__ = [
    "BehaviorState",
    "HandlerState",
    "MetricReader",
    "PolicyHandler",
    "StrategyError",
    "Vote",
    "cap_count",
    "evaluate_checks",
    "interval_splay_s",
    "needs_metrics",
    "pick_winner",
    "preempt",
    "query_for",
    "remaining_cooldown",
    "run_strategy",
    "set_dry_run",
]
