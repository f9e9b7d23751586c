"""The autoscaler service: Nomad Autoscaler's policy loop over drover's state and metrics.

    state log --(replica thread, read compact)--> registry: the policies of the job an entry
        changed; AllocCounts: the live allocations per group (the replica keeps no records)
    usage stream --(XREAD, batched)--> usage store (the `drover` metric source)
    each policy, every evaluation_interval (first after one interval plus a 0-290 ms splay):
        target status from the replica -> handler.tick -> decision (one span, kept in the log)
        decision.scale_due -> Job.Scale through the leader, on a small pool so that a slow
        answer never holds other policies back; the answer is handed back to the loop, which
        tells the handler (cooldown, or back to idle).

Each Scale request's id is derived from its decision's id, and a decision is sent once: the
leader applies a request id at most once, so nothing is scaled twice for one decision even
if a request is read again after a leader restart. A failing metric source or a refused
Scale is recorded in the decision and the loop goes on. Restartable: a new service rebuilds
the registry from the log, backfills the usage of the last `backfill_s` from the stream
(capped), and each handler resumes its cooldown from the group's last scaling event.

Policy files (`policy_dir`, *.hcl) are loaded at start, with the files applied through the
API (core/applied.py, kept in Redis: persist.py). Their cluster policies scale simulated
fleets (fleet_target.py) from the scheduler's signals (core/cluster_signals.py), read from
one ClusterView per evaluation tick; job policies may read those signals too. A fleet's
scaling is written into its stored spec (count, `last_scaled_s`), from which a restarted
autoscaler resumes the cooldown.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import redis

from actors.autoscaler.core.alloc_counts import ALLOC_CHANGES, AllocCounts, system_job
from actors.autoscaler.core.applied import AppliedPolicies, applied_path, policies_key
from actors.autoscaler.core.checks import MetricReader
from actors.autoscaler.core.cluster_signals import ClusterView
from actors.autoscaler.core.decisions import DecisionLog, to_json
from actors.autoscaler.core.handler import PolicyHandler, interval_splay_s
from actors.autoscaler.core.job_filter import may_bring_policy, wants_eval, wants_job
from actors.autoscaler.core.registry import PolicyEntry, PolicyRegistry
from actors.autoscaler.core.status import group_status
from actors.autoscaler.core.usage_store import UsageStore
from actors.autoscaler.core.views import policy_json
from actors.autoscaler.fleet_target import FleetTargets, RayFleetAgent, redis_spec_lookup
from actors.autoscaler.persist import FleetScalings, RedisPolicyStore
from actors.autoscaler.scaler import Scaler
from actors.autoscaler.sources import PrometheusSource
from actors.autoscaler.tracing import AutoscalerTracing
from actors.process_settings import tune_process
from actors.runtime.reconnect import UNREACHABLE, Reconnecting
from actors.runtime.replica import LogReplica
from actors.state import StateReader, StateStore
from actors.streams.envelope import BadMessage, decode_envelope
from actors.streams.names import StreamNames
from contracts.autoscaling import MetricPoint, MetricQuery, MetricReadError
from contracts.codec import CodecError
from contracts.messages import LeaderRequest, LeaderResponse
from contracts.state_log import (
    LogEntry,
    PurgeJob,
    RestoreJobs,
    UpsertJob,
    decode_entry,
    without_allocs,
)
from contracts.usage import REPORT_TYPE, decode_report
from observability import Telemetry

log = logging.getLogger(__name__)

USAGE_READ_COUNT = 512
LOG_LINGER_S = 0.05  # after a log read that brought entries, before the next
PRUNE_EVERY_S = 30.0
DOZE_AFTER_S = 30.0  # the replica dozes again no sooner after a wake-up (_doze_or_wake)


class AutoscalerService:
    def __init__(
        self,
        client: redis.Redis,
        names: StreamNames,
        send: Callable[[LeaderRequest], LeaderResponse],
        *,
        policy_dir: Path | None = None,
        telemetry: Telemetry | None = None,
        clock: Callable[[], float] = time.time,
        seed: int | None = None,
        usage: UsageStore | None = None,
        decisions_kept: int = 50,
        usage_block_ms: int = 200,
        backfill_s: float = 60.0,
        scale_workers: int = 4,
        fleets: FleetTargets | None = None,
        ray_namespace: str | None = None,
        prometheus: PrometheusSource | None = None,
    ) -> None:
        """`prometheus`: where checks with `source = "prometheus"` are answered (Nomad's
        `apm "prometheus" { address }`); None refuses them (their `on_error` applies)."""
        tune_process()
        self.prometheus = prometheus
        self.client = client
        self.names = names
        self.send = send
        self.policy_dir = policy_dir
        self.clock = clock
        self.rng = random.Random(seed)
        self.tracing = AutoscalerTracing(telemetry or Telemetry.disabled("autoscaler"), names.usage)
        self.usage = usage or UsageStore()
        self.registry = PolicyRegistry()
        self.applied = AppliedPolicies(
            self.registry, RedisPolicyStore(client, policies_key(names.prefix))
        )
        self.fleet_scalings = FleetScalings(client, names.fleets, clock)
        self.decisions = DecisionLog(decisions_kept)
        self.handlers: dict[str, PolicyHandler] = {}
        self.due: dict[str, float] = {}  # policy id -> next evaluation (clock seconds)
        # The replica thread, the loop and the actor's method threads share the above.
        self.lock = threading.RLock()
        self._dirty: set[str] = set()  # policies the log changed, for the loop to take up
        # Of allocations the autoscaler needs only counts per group: the log is read compact
        # and no allocation record is built or stored (a full replica would cost this actor
        # as much as the API's, on every allocation of the cluster). Of jobs it decodes only
        # those it reads, of evaluations the blocked ones (core/job_filter.py).
        store = StateStore()
        self.alloc_counts = AllocCounts(partial(system_job, store))
        self.replica = LogReplica(
            client,
            names,
            store=store,
            listener=self._on_entry,
            decode=partial(
                decode_entry,
                compact=True,
                jobs_as_evals=True,
                keep_job=partial(
                    wants_job, held=lambda ns, job_id: store.job(ns, job_id) is not None
                ),
                keep_eval=partial(wants_eval, held=lambda eval_id: store.eval(eval_id) is not None),
            ),
            reduce=without_allocs,
            on_reset=self._forget_log,
        )
        self.fleets = fleets or FleetTargets(
            RayFleetAgent(ray_namespace), redis_spec_lookup(client, names.fleets), clock
        )
        self.scaler = Scaler(send, self.tracing, scale_workers, self.fleets)
        self._usage_id = "0-0"
        self._usage_block_ms = usage_block_ms
        self._backfill_s = backfill_s
        self._next_prune = 0.0
        self._rewinds_seen = 0  # the replica's wake-ups (rebuilds), as of the last turn
        self._woke_at: float | None = None  # when a turn first saw the latest one
        self.stats: dict[str, int] = {
            "policies": 0,
            "evaluated_policies": 0,
            "evaluations": 0,
            "evaluation_errors": 0,
            "scale_calls": 0,
            "scale_ok": 0,
            "scale_failed": 0,
            "usage_reports": 0,
            "usage_samples": 0,
            "bad_usage_reports": 0,
            "loop_errors": 0,
        }

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        self._load_policy_dir()
        with self.lock:
            self._dirty.update(self.applied.load().added)
        self.replica.load()
        since_ms = max(0, int((self.clock() - self._backfill_s) * 1000))
        self._usage_id = f"{since_ms}-0"
        self.sync_policies()
        with self.lock:  # from now on only the groups some policy reads are kept
            self.usage.track(self.registry.tracked_groups())

    def run(self, stop: threading.Event) -> None:
        # Nothing here needs an entry the moment it commits (policies are evaluated every few
        # seconds): reads linger so that a stream of small jobs costs a read per batch.
        tail = threading.Thread(
            target=self.replica.run, args=(stop, 100, LOG_LINGER_S), daemon=True
        )
        tail.start()
        reconnecting = Reconnecting(stop, "autoscaler")
        try:
            while not stop.is_set():
                try:
                    reconnecting(self.poll_once)
                except UNREACHABLE:
                    return  # raised only once stop is set
                except Exception:  # never die: log it, count it, and go on
                    log.exception("autoscaler loop failed")
                    self.stats["loop_errors"] += 1
                    stop.wait(0.2)
        finally:
            self.close()

    def close(self) -> None:
        self.scaler.close()

    def poll_once(self) -> int:
        """One turn: answers settled, policy changes taken up, usage read (waiting at most
        until the next evaluation is due), due policies evaluated. Returns how many were."""
        self.settle_answers()
        self.sync_policies()
        self._doze_or_wake()
        self.read_usage(self._wait_ms())
        self.settle_answers()
        now = self.clock()
        evaluated = self.evaluate_due(now)
        if now >= self._next_prune:
            self._next_prune = now + PRUNE_EVERY_S
            self.usage.prune(now)
        return evaluated

    def _doze_or_wake(self) -> None:
        """With no policy at all, nothing reads the replica: it dozes, passing entries over
        unread until one may bring a policy (a job with a scaling block), and a policy
        applied or loaded from a file wakes it (runtime/replica.py). In a cluster that does
        not autoscale, following the log was all this actor did: a decode and an apply for
        every entry, about 4% of drover's CPU under many small jobs. A wake-up rebuilds the
        store, so the replica dozes again only DOZE_AFTER_S after one: at most one rebuild in
        that time, whatever woke it (a policy deleted and applied again, a driver config
        that merely looks like a scaling block)."""
        with self.lock:
            empty = len(self.registry) == 0
        replica = self.replica
        if not empty:
            if replica.dozing() and not replica.waking():
                log.info("autoscaler: a policy to run; its log replica wakes (rebuilt)")
            replica.wake()
            return
        now = self.clock()
        if replica.rewinds != self._rewinds_seen:
            self._rewinds_seen, self._woke_at = replica.rewinds, now
        if not replica.dozing() and (self._woke_at is None or now - self._woke_at >= DOZE_AFTER_S):
            log.info("autoscaler: no policy; its log replica dozes until one comes")
            replica.doze(may_bring_policy)

    # -- policies --------------------------------------------------------------------------------

    def _load_policy_dir(self) -> None:
        if self.policy_dir is None:
            return
        if not self.policy_dir.is_dir():
            log.warning("autoscaler policy dir %s is not a directory", self.policy_dir)
            return
        for path in sorted(self.policy_dir.glob("*.hcl")):
            try:
                text = path.read_text()
            except OSError as exc:
                log.warning("autoscaler policy file %s unreadable: %s", path, exc)
                continue
            self.apply_policy_file(str(path), text)

    def apply_policy_file(self, path: str, text: str) -> list[dict[str, Any]]:
        """Load (or reload) one policy file; returns its policies as `policies()` lists them
        (a file that does not parse gives one entry carrying the problems)."""
        with self.lock:
            change = self.registry.apply_file(path, text)
            self._dirty.update(change.added + change.updated + change.removed)
            return [self._policy_view(e) for e in self.registry.entries() if e.path == path]

    def apply_policy(self, name: str, text: str) -> list[dict[str, Any]]:
        """Apply (or replace) the policy file `name`, kept in Redis; ValidationError naming
        the field and value when it does not parse or is past a bound."""
        with self.lock:
            change = self.applied.apply(name, text)
            self._dirty.update(change.added + change.updated + change.removed)
            path = applied_path(name)
            return [self._policy_view(e) for e in self.registry.entries() if e.path == path]

    def delete_policy(self, policy_id: str) -> list[str]:
        """Remove the applied file holding the policy; returns the IDs removed."""
        with self.lock:
            change = self.applied.delete(policy_id)
            self._dirty.update(change.removed)
            return list(change.removed)

    def _forget_log(self) -> None:
        """Before a reload from the snapshot (the replica fell behind the trimmed log): drop
        what was read from the log; the snapshot's chunks bring it back (a policy whose job
        is still there starts again, resuming its cooldown from the scaling events)."""
        with self.lock:
            self.alloc_counts.clear()
            index = self.replica.store.latest_index()
            for namespace, job_id in self.registry.job_keys():
                result = self.registry.apply_job(namespace, job_id, None, index)
                self._dirty.update(result.removed)

    def _on_entry(self, entry: LogEntry, state: StateStore) -> None:
        change = entry.change
        if isinstance(change, ALLOC_CHANGES):
            with self.lock:
                self.alloc_counts.apply(change)
            return
        if isinstance(change, RestoreJobs):  # a snapshot's chunk
            with self.lock:
                for image in change.jobs:
                    job = image.job
                    result = self.registry.apply_job(job.namespace, job.id, job, entry.index)
                    self._dirty.update(result.added + result.updated + result.removed)
            return
        if isinstance(change, UpsertJob):
            key = (change.job.namespace, change.job.id)
        elif isinstance(change, PurgeJob):
            key = (change.namespace, change.job_id)
        else:
            return
        job = state.job(*key)
        with self.lock:
            result = self.registry.apply_job(key[0], key[1], job, entry.index)
            self._dirty.update(result.added + result.updated + result.removed)

    def sync_policies(self) -> None:
        """Start, update or stop the handlers of the policies that changed."""
        with self.lock:
            if not self._dirty:
                return
            dirty, self._dirty = self._dirty, set()
            now = self.clock()
            for policy_id in dirty:
                self._sync(policy_id, now)
            self.usage.track(self.registry.tracked_groups())
            self.stats["policies"] = len(self.registry)
            self.stats["evaluated_policies"] = len(self.handlers)

    def _sync(self, policy_id: str, now: float) -> None:
        entry = self.registry.get(policy_id)
        handler = self.handlers.get(policy_id)
        if entry is None or not entry.runnable or entry.policy is None:
            if handler is not None:
                del self.handlers[policy_id]
                self.due.pop(policy_id, None)
            if entry is None:
                self.decisions.forget(policy_id)
            return
        policy = entry.policy
        if handler is None:
            self.handlers[policy_id] = PolicyHandler(policy_id, policy)
            self.due[policy_id] = now + policy.evaluation_interval_s + interval_splay_s(self.rng)
        elif handler.policy != policy and handler.update_policy(policy):
            self.due[policy_id] = now + policy.evaluation_interval_s + interval_splay_s(self.rng)

    # -- usage -----------------------------------------------------------------------------------

    def _wait_ms(self) -> int | None:
        """How long the usage read may block: until the next evaluation, at most
        usage_block_ms; None (do not block) when one is due."""
        with self.lock:
            next_due = min(self.due.values(), default=None)
        if next_due is None:
            return self._usage_block_ms
        wait_ms = int((next_due - self.clock()) * 1000)
        return None if wait_ms <= 0 else min(wait_ms, self._usage_block_ms)

    def read_usage(self, block_ms: int | None = None) -> int:
        """Read what the agents reported since the last read; returns how many samples."""
        reply: Any = self.client.xread(
            {self.names.usage: self._usage_id}, count=USAGE_READ_COUNT, block=block_ms
        )
        kept = 0
        for _stream, rows in reply or ():
            for entry_id, fields in rows:
                self._usage_id = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
                try:
                    envelope = decode_envelope(fields)
                    if envelope.type != REPORT_TYPE:
                        raise BadMessage(f"unexpected message type {envelope.type!r}")
                    report = decode_report(envelope.body)
                except (BadMessage, CodecError) as exc:
                    self.stats["bad_usage_reports"] += 1
                    log.debug("unreadable usage report %s: %s", self._usage_id, exc)
                    continue
                self.stats["usage_reports"] += 1
                self.stats["usage_samples"] += len(report.samples)
                kept += self.usage.add(report.samples)
        return kept

    # -- evaluations -----------------------------------------------------------------------------

    def evaluate_due(self, now: float) -> int:
        if self.replica.dozing():  # its store is stale until it has woken (rebuilt)
            return 0
        with self.lock:
            due = sorted((at, pid) for pid, at in self.due.items() if at <= now)
        if not due:
            return 0
        state = self.replica.snapshot()
        # The fleets, as every policy of this tick reads them: scanned once, on first use.
        view = ClusterView(state.nodes, state.evals, self.alloc_counts.node_load)
        for at, policy_id in due:
            self._evaluate(policy_id, at, state, view)
        return len(due)

    def _with_sources(self, drover: MetricReader) -> MetricReader:
        """A check's reader by its source: Prometheus, else drover's own (usage, signals)."""
        prometheus = self.prometheus

        def read(query: MetricQuery) -> Sequence[MetricPoint]:
            if query.source != "prometheus":
                return drover(query)
            if prometheus is None:
                raise MetricReadError(
                    'source "prometheus" has no address: start the agent with '
                    "-autoscaler-prometheus-addr URL"
                )
            return prometheus.read(query)

        return read

    def _evaluate(
        self, policy_id: str, due_at: float, state: StateReader, view: ClusterView
    ) -> None:
        with self.lock:
            handler = self.handlers.get(policy_id)
            entry = self.registry.get(policy_id)
            if handler is None or entry is None:
                return
            now = self.clock()
            interval = handler.policy.evaluation_interval_s
            self.due[policy_id] = due_at + interval if due_at + interval > now else now + interval
            fleet = entry.target.fleet if entry.target.kind == "fleet" else ""
            label = f"fleet/{fleet}" if fleet else "/".join(entry.group_key)
            with self.tracing.evaluation(policy_id, label) as span:
                try:
                    if fleet:
                        status, reader = self.fleets.inputs(entry, handler, view)
                    else:
                        status = group_status(state, *entry.group_key, self.alloc_counts)
                        usage = self.usage.reader(entry.group_key, self.alloc_counts.is_live)
                        reader = view.reader("", usage)
                    decision = handler.tick(now, status, self._with_sources(reader))
                except Exception:  # a bug in one policy's evaluation must not stop the rest
                    log.exception("evaluating scaling policy %s failed", policy_id)
                    self.stats["evaluation_errors"] += 1
                    return
                self.tracing.record(span, decision)
                self.decisions.add(decision)
                self.stats["evaluations"] += 1
                seen = view.fleet(fleet) if fleet else None
                if decision.scale_due and self.scaler.submit(entry, decision, span, seen):
                    self.stats["scale_calls"] += 1
                    if fleet:
                        self.fleet_scalings.sent(fleet, decision)

    def settle_answers(self) -> int:
        """Hand the Scale calls' answers to their handlers and decisions."""
        answers = self.scaler.answers()
        for answer in answers:
            self.fleet_scalings.answered(answer.decision_id, answer.ok)
            with self.lock:
                self.stats["scale_ok" if answer.ok else "scale_failed"] += 1
                handler = self.handlers.get(answer.policy_id)
                if handler is not None:
                    if answer.ok:
                        handler.scale_succeeded(answer.decision_id, self.clock())
                    else:
                        handler.scale_failed(answer.decision_id)
                self.decisions.settle(
                    answer.decision_id,
                    answer.ok,
                    error=answer.error,
                    eval_id=answer.eval_id,
                    index=answer.index,
                )
            if not answer.ok:
                log.warning("scaling policy %s: Scale refused: %s", answer.policy_id, answer.error)
        return len(answers)

    # -- views (the actor's methods) -------------------------------------------------------------

    def policies(self) -> list[dict[str, Any]]:
        with self.lock:
            entries = sorted(self.registry.entries(), key=lambda e: (e.origin, e.id))
            return [self._policy_view(e) for e in entries]

    def policy(self, policy_id: str) -> dict[str, Any] | None:
        with self.lock:
            entry = self.registry.get(policy_id)
            return self._policy_view(entry) if entry is not None else None

    def decision_log(self, policy_id: str, limit: int = 20) -> list[dict[str, Any]]:
        """The policy's last decisions, newest first."""
        with self.lock:
            return [to_json(r) for r in self.decisions.last(policy_id, limit)]

    def explain(self, policy_id: str, limit: int = 20) -> dict[str, Any] | None:
        """The policy as `policy` gives it and its last decisions, read together; None for
        a policy the autoscaler does not know."""
        with self.lock:
            entry = self.registry.get(policy_id)
            if entry is None:
                return None
            return {
                "Policy": self._policy_view(entry),
                "Decisions": self.decision_log(policy_id, limit),
            }

    def _policy_view(self, entry: PolicyEntry) -> dict[str, Any]:
        last = self.decisions.last(entry.id, 1)
        view = policy_json(
            entry, self.handlers.get(entry.id), self.due.get(entry.id), last[0] if last else None
        )
        return {**view, "Policy": dict(entry.raw)}
