"""What the eval broker hands out: deliveries, locations, stats, and status descriptions."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from contracts.evaluation import Evaluation

FAILED_QUEUE = "_failed"
"""Evals that reached the delivery limit wait here for the leader to mark them failed."""

CANCELED_DESCRIPTION = "canceled after more recent eval was processed"
"""StatusDescription for evals handed out by `EvalBroker.take_cancelable` (Nomad's text)."""


def delivery_limit_description(limit: int, last_failure: str = "") -> str:
    """StatusDescription the leader writes on an eval taken from `FAILED_QUEUE` (Nomad's
    words), with why its last delivery failed."""
    described = f"evaluation reached delivery limit ({limit})"
    return f"{described}; last failure: {last_failure[:500]}" if last_failure else described


class Location(StrEnum):
    """Where a tracked eval is. Every tracked eval is in exactly one place."""

    WAITING = "waiting"  # delayed: wait_until in the future, or the re-enqueue delay after a nack
    READY = "ready"  # in its scheduler type's ready queue
    UNACKED = "unacked"  # delivered (from any queue, `_failed` included), awaiting ack/nack
    PENDING = "pending"  # behind another eval of the same job
    CANCELABLE = "cancelable"  # superseded on ack; waiting for `take_cancelable`
    FAILED = "failed"  # ready in `FAILED_QUEUE`, waiting for the leader's reaper


@dataclass(frozen=True, slots=True)
class Delivery:
    """One dequeue: the eval, the token to ack/nack it with, and the index to wait for.

    `wait_index` is the highest ModifyIndex of any eval of the same job the broker knows
    (Nomad's `Eval.Dequeue` WaitIndex): the worker's snapshot must reach it before
    scheduling, which is what makes dropping superseded pending evals safe.
    """

    eval: Evaluation
    token: str
    wait_index: int


@dataclass(frozen=True, slots=True)
class SchedulerStats:
    ready: int = 0
    unacked: int = 0


@dataclass(frozen=True, slots=True)
class BrokerStats:
    """A snapshot of the broker's counters (Nomad's BrokerStats).

    As in Nomad, `total_ready` and `total_unacked` include the `_failed` queue;
    `total_failed` is the part of `total_ready` that sits in `_failed`.
    """

    total_ready: int = 0
    total_unacked: int = 0
    total_pending: int = 0
    total_waiting: int = 0
    total_cancelable: int = 0
    total_failed: int = 0
    by_scheduler: dict[str, SchedulerStats] = field(default_factory=dict)
