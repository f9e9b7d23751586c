"""Scaling policies and the events `Job.Scale` records."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from contracts.fast_init import install_fast_inits

# Nomad keeps this many scaling events per task group (JobTrackedScalingEvents).
TRACKED_SCALING_EVENTS = 20


@dataclass(frozen=True, slots=True)
class ScalingPolicy:
    """A group's `scaling` block. `policy` is opaque here; the autoscaler reads it."""

    min: int | None = None
    max: int = 0
    enabled: bool = True
    type: str = "horizontal"
    policy: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ScalingEvent:
    time: int = 0  # unix nanoseconds, as Nomad
    count: int | None = None
    previous_count: int = 0
    message: str = ""
    error: bool = False
    meta: dict[str, Any] = field(default_factory=dict)
    eval_id: str | None = None


install_fast_inits(__name__)
