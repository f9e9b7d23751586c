"""drover's metric instruments, created once per Telemetry.

Call sites use the typed `record_*` methods (so attribute names stay in one place) or the
instruments directly. Attribute values are low-cardinality on purpose: triggers, outcomes,
reasons, statuses, stream and group names; never eval, job or node ids.

Gauges are fed by callbacks the actors register: `register_backlog` for the pending entries
per stream and consumer group, `register_alloc_counts` for allocations per client status. A
callback that raises is skipped for that collection (logged once).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Final

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from observability import conventions as c

log = logging.getLogger(__name__)

PREFIX: Final = "drover."

EVALS: Final = "drover.evals"
EVAL_LATENCY: Final = "drover.eval.latency"
EVAL_RETRIES: Final = "drover.eval.retries"
EVALS_BLOCKED: Final = "drover.evals.blocked"
PLACEMENTS: Final = "drover.placements"
PLAN_APPLIES: Final = "drover.plan.applies"
PLAN_APPLY_LATENCY: Final = "drover.plan.apply.latency"
PLAN_REJECTED_NODES: Final = "drover.plan.rejected_nodes"
STREAM_BACKLOG: Final = "drover.stream.backlog"
ALLOC_STATUS_UPDATES: Final = "drover.allocation.status_updates"
ALLOCATIONS: Final = "drover.allocations"

PLACEMENT_OUTCOME: Final = "drover.placement.outcome"
"""committed (by the leader) or failed (no node could take it)."""

LATENCY_BUCKETS_S: Final = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)

BacklogCallback = Callable[[], Iterable[tuple[str, str, int]]]
"""Returns (stream, consumer group, pending entries) for each group the actor reads."""
AllocCountsCallback = Callable[[], Mapping[str, int]]
"""Returns {client status: allocations currently in it}."""


class _Callbacks:
    def __init__(self, name: str) -> None:
        self.name = name
        self._callbacks: list[Callable[[], Iterable[Observation]]] = []
        self._lock = threading.Lock()
        self._warned = False

    def add(self, callback: Callable[[], Iterable[Observation]]) -> Callable[[], None]:
        with self._lock:
            self._callbacks.append(callback)

        def remove() -> None:
            with self._lock:
                if callback in self._callbacks:
                    self._callbacks.remove(callback)

        return remove

    def observe(self, options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            callbacks = list(self._callbacks)
        observations: list[Observation] = []
        for callback in callbacks:
            try:
                observations.extend(callback())
            except Exception:
                if not self._warned:
                    self._warned = True
                    log.warning("%s callback failed; skipped", self.name, exc_info=True)
        return observations


class DroverMetrics:
    """The instruments. Built from a Meter (a no-op meter when telemetry is disabled)."""

    def __init__(self, meter: Meter) -> None:
        self.evals = meter.create_counter(
            EVALS, unit="{eval}", description="Evaluations finished, by trigger and outcome"
        )
        self.eval_latency = meter.create_histogram(
            EVAL_LATENCY,
            unit="s",
            description="Evaluation enqueue to ack (or nack)",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS_S,
        )
        self.eval_retries = meter.create_counter(
            EVAL_RETRIES, unit="{plan}", description="Plans resubmitted after a partial commit"
        )
        self.evals_blocked = meter.create_counter(
            EVALS_BLOCKED, unit="{eval}", description="Blocked evaluations created"
        )
        self.placements = meter.create_counter(
            PLACEMENTS, unit="{allocation}", description="Placements, by outcome"
        )
        self.plan_applies = meter.create_counter(
            PLAN_APPLIES, unit="{plan}", description="Plans applied by the leader, by outcome"
        )
        self.plan_apply_latency = meter.create_histogram(
            PLAN_APPLY_LATENCY,
            unit="s",
            description="Leader plan re-check and commit",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS_S,
        )
        self.rejected_nodes = meter.create_counter(
            PLAN_REJECTED_NODES,
            unit="{node}",
            description="Nodes rejected at plan apply, by reason and dimension",
        )
        self.alloc_status_updates = meter.create_counter(
            ALLOC_STATUS_UPDATES,
            unit="{allocation}",
            description="Allocation client status changes reported, by new status",
        )
        self._backlog = _Callbacks(STREAM_BACKLOG)
        self._alloc_counts = _Callbacks(ALLOCATIONS)
        self.stream_backlog = meter.create_observable_gauge(
            STREAM_BACKLOG,
            callbacks=[self._backlog.observe],
            unit="{message}",
            description="Entries pending per stream and consumer group",
        )
        self.allocations = meter.create_observable_gauge(
            ALLOCATIONS,
            callbacks=[self._alloc_counts.observe],
            unit="{allocation}",
            description="Allocations by client status",
        )

    # -- counters and histograms ----------------------------------------------------------

    def record_eval(self, trigger: str, outcome: str, latency_s: float | None = None) -> None:
        """An eval finished (outcome: complete, failed, blocked, nacked, cancelled);
        `latency_s` from enqueue to ack."""
        attrs = {c.EVAL_TRIGGER: trigger, c.EVAL_OUTCOME: outcome}
        self.evals.add(1, attrs)
        if latency_s is not None:
            self.eval_latency.record(latency_s, attrs)

    def record_retry(self, scheduler_type: str = "") -> None:
        self.eval_retries.add(1, {c.EVAL_TYPE: scheduler_type} if scheduler_type else None)

    def record_blocked_eval(self, trigger: str = "") -> None:
        self.evals_blocked.add(1, {c.EVAL_TRIGGER: trigger} if trigger else None)

    def record_placements(self, count: int, outcome: str = "committed") -> None:
        if count:
            self.placements.add(count, {PLACEMENT_OUTCOME: outcome})

    def record_plan_apply(
        self, outcome: str, latency_s: float, rejected_reasons: Iterable[str] = ()
    ) -> None:
        """One plan applied (outcome as `conventions.plan_outcome`), with its latency and the
        reason of each rejected node."""
        attrs = {c.PLAN_OUTCOME: outcome}
        self.plan_applies.add(1, attrs)
        self.plan_apply_latency.record(latency_s, attrs)
        for reason in rejected_reasons:
            self.record_rejected_node(reason)

    def record_rejected_node(self, reason: str) -> None:
        self.rejected_nodes.add(
            1, {c.REJECT_REASON: reason, c.REJECT_DIMENSION: c.reject_dimension(reason)}
        )

    def record_alloc_status(self, client_status: str, count: int = 1) -> None:
        if count:
            self.alloc_status_updates.add(count, {c.ALLOC_CLIENT_STATUS: client_status})

    # -- gauges ---------------------------------------------------------------------------

    def register_backlog(self, callback: BacklogCallback) -> Callable[[], None]:
        """Observe stream backlog through `callback`; returns a function that unregisters."""

        def observe() -> list[Observation]:
            return [
                Observation(
                    pending,
                    {
                        c.MESSAGING_SYSTEM: c.MESSAGING_SYSTEM_REDIS,
                        c.MESSAGING_DESTINATION: stream,
                        c.MESSAGING_CONSUMER_GROUP: group,
                    },
                )
                for stream, group, pending in callback()
            ]

        return self._backlog.add(observe)

    def register_alloc_counts(self, callback: AllocCountsCallback) -> Callable[[], None]:
        """Observe allocations per client status; returns a function that unregisters."""

        def observe() -> list[Observation]:
            return [
                Observation(count, {c.ALLOC_CLIENT_STATUS: status})
                for status, count in callback().items()
            ]

        return self._alloc_counts.add(observe)
