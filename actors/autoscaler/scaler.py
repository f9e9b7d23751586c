"""Job.Scale calls for the decisions that need one, as the Nomad target plugin makes them.

Each call runs on a small pool, so that a leader slow to answer one never holds the other
policies' evaluations back; its answer is queued for the loop (`answers`), which tells the
handler and the decision log. A decision is sent once: its request id is derived from the
decision id, and the leader applies a request id at most once, so even a request read again
after a leader restart scales nothing twice.

The request is Nomad's Jobs().Scale(job, group, count, message=reason, error, meta): the
action's meta with `nomad_policy_id`. A dry run (the -1 sentinel) or an action reporting an
error is sent without a count, which records a scaling event and changes nothing.
"""

from __future__ import annotations

import queue
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from opentelemetry.trace import Span

from actors.autoscaler.core.registry import PolicyEntry
from actors.autoscaler.tracing import AutoscalerTracing
from contracts.autoscaling import DRY_RUN_COUNT, META_POLICY_ID, Decision
from contracts.messages import LeaderRequest, LeaderResponse, RequestKind

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
    ) -> None:
        self.send = send
        self.tracing = tracing
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="drover-autoscaler")
        self._answers: queue.SimpleQueue[ScaleAnswer] = queue.SimpleQueue()
        self._sent: OrderedDict[str, None] = OrderedDict()

    def submit(self, entry: PolicyEntry, decision: Decision, parent: Span) -> bool:
        """Send the decision's Scale call (once); False if it was sent before or has none."""
        request = scale_request(entry, decision)
        if request is None or decision.decision_id in self._sent:
            return False
        self._sent[decision.decision_id] = None
        while len(self._sent) > SENT_REMEMBERED:
            self._sent.popitem(last=False)
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
