"""Job.Scale calls for the decisions that need one, as the Nomad target plugin makes them.

Each call runs on a small pool, so that a leader slow to answer one never holds the other
policies' evaluations back; its answer is queued for the loop (`answers`), which tells the
handler and the decision log. A decision is sent once: its request id is derived from the
decision id, and the leader applies a request id at most once, so even a request read again
after a leader restart scales nothing twice.

The request is Nomad's Jobs().Scale(job, group, count, message=reason, error, meta): the
action's meta with `nomad_policy_id`. A dry run (the -1 sentinel) or an action reporting an
error is sent without a count, which records a scaling event and changes nothing.

A fleet's decision goes to its FleetTargets (fleet_target.py) on the same pool instead:
instances added or drained through the agent that hosts them; no scaling event is written.
"""

from __future__ import annotations

import logging
import queue
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from opentelemetry.trace import Span

from actors.autoscaler.core.cluster_signals import FleetState
from actors.autoscaler.core.registry import PolicyEntry
from actors.autoscaler.fleet_target import FleetTargets
from actors.autoscaler.tracing import AutoscalerTracing
from contracts.autoscaling import DRY_RUN_COUNT, META_POLICY_ID, Decision
from contracts.messages import LeaderRequest, LeaderResponse, RequestKind

log = logging.getLogger(__name__)

SENT_REMEMBERED = 10_000


@dataclass(frozen=True, slots=True)
class ScaleAnswer:
    policy_id: str
    decision_id: str
    ok: bool
    error: str = ""
    eval_id: str = ""
    index: int = 0


def scale_request(entry: PolicyEntry, decision: Decision) -> LeaderRequest | None:
    """The leader request a decision's action makes; None when it has none."""
    action = decision.action
    if action is None:
        return None
    count = None if action.error or action.count == DRY_RUN_COUNT else action.count
    target = entry.target
    return LeaderRequest(
        RequestKind.SCALE_JOB,
        request_id=f"autoscaler-{decision.decision_id}",
        namespace=target.namespace,
        job_id=target.job,
        group=target.group,
        count=count,
        message=action.reason,
        error=action.error,
        meta={**action.meta, META_POLICY_ID: entry.id},
    )


class Scaler:
    def __init__(
        self,
        send: Callable[[LeaderRequest], LeaderResponse],
        tracing: AutoscalerTracing,
        workers: int = 4,
        fleets: FleetTargets | None = None,
    ) -> None:
        self.send = send
        self.fleets = fleets
        self.tracing = tracing
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="drover-autoscaler")
        self._answers: queue.SimpleQueue[ScaleAnswer] = queue.SimpleQueue()
        self._sent: OrderedDict[str, None] = OrderedDict()

    def submit(
        self, entry: PolicyEntry, decision: Decision, parent: Span, fleet: FleetState | None = None
    ) -> bool:
        """Send the decision's Scale call (once); False if it was sent before or has none.
        `fleet`: a fleet target's instances as the decision saw them."""
        if decision.action is None or decision.decision_id in self._sent:
            return False
        request = None
        if entry.target.kind != "fleet":
            request = scale_request(entry, decision)
            if request is None:
                return False
        self._sent[decision.decision_id] = None
        while len(self._sent) > SENT_REMEMBERED:
            self._sent.popitem(last=False)
        if request is None:
            self._pool.submit(self._fleet_call, entry, decision, fleet, parent)
        else:
            self._pool.submit(self._call, entry.id, decision.decision_id, request, parent)
        return True

    def answers(self) -> list[ScaleAnswer]:
        """The answers that came in since the last call."""
        out = []
        while True:
            try:
                out.append(self._answers.get_nowait())
            except queue.Empty:
                return out

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _call(self, policy_id: str, decision_id: str, request: LeaderRequest, parent: Span) -> None:
        with self.tracing.scale_call(parent, decision_id) as span:
            try:
                response = self.send(request)
                answer = ScaleAnswer(
                    policy_id,
                    decision_id,
                    response.ok,
                    response.error,
                    response.eval_id,
                    response.index,
                )
            except Exception as exc:  # unanswered, or Redis away: the call failed
                answer = ScaleAnswer(policy_id, decision_id, False, f"{type(exc).__name__}: {exc}")
            self.tracing.scale_answer(span, answer.ok, answer.error, answer.eval_id)
        self._answers.put(answer)

    def _fleet_call(
        self, entry: PolicyEntry, decision: Decision, fleet: FleetState | None, parent: Span
    ) -> None:
        target = entry.target
        with self.tracing.scale_call(parent, decision.decision_id) as span:
            try:
                if self.fleets is None:
                    raise LookupError("this autoscaler scales no fleets")
                note = self.fleets.scale(
                    target.fleet,
                    target.node_selector_strategy,
                    target.node_drain_deadline_s,
                    decision,
                    fleet,
                )
                log.info("fleet %s: %s (policy %s)", target.fleet, note, entry.id)
                answer = ScaleAnswer(entry.id, decision.decision_id, True)
            except Exception as exc:  # the agent away or refusing: the call failed
                error = f"{type(exc).__name__}: {exc}"
                answer = ScaleAnswer(entry.id, decision.decision_id, False, error)
            self.tracing.scale_answer(span, answer.ok, answer.error, answer.eval_id)
        self._answers.put(answer)
