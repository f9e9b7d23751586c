"""Scaling actions: what a strategy proposes and what the autoscaler asks a target to do.

Mirrors nomad-autoscaler's `sdk.ScalingAction`: the direction enum keeps Nomad's order
(Down = -1 < None = 0 < Up = 1) because combining checks compares directions numerically
("safest wins": Up beats None beats Down). The meta keys are Nomad's, so scaling events
read the same in `job scaling-events` output.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from contracts.fast_init import install_fast_inits

META_POLICY_ID = "nomad_policy_id"
META_DRY_RUN = "nomad_autoscaler.dry_run"
META_DRY_RUN_COUNT = "nomad_autoscaler.dry_run.count"
META_COUNT_CAPPED = "nomad_autoscaler.count.capped"
META_COUNT_ORIGINAL = "nomad_autoscaler.count.original"
META_REASON_HISTORY = "nomad_autoscaler.reason_history"

# The count a dry-run action carries: a target never scales to a negative count, so the
# Scale call registers an event without changing anything (Nomad's sentinel).
DRY_RUN_COUNT = -1


class Direction(IntEnum):
    DOWN = -1
    NONE = 0
    UP = 1

    def __str__(self) -> str:
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class ScalingAction:
    """A desired count with its direction relative to the current count, and why."""

    count: int = 0
    direction: Direction = Direction.NONE
    reason: str = ""
    error: bool = False
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def capped(self) -> bool:
        return self.meta.get(META_COUNT_CAPPED) is True

    @property
    def dry_run(self) -> bool:
        return self.meta.get(META_DRY_RUN) is True


install_fast_inits(__name__)
