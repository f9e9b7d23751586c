"""The leader's Ray shell: one named actor, the single writer (see service.py), hosting the
eval broker (actors/broker/service.py) on a thread of its own, as Nomad's leader does."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from actors.broker.service import BrokerService
from actors.leader.service import LeaderService
from actors.leader.snapshots import SnapshotPolicy
from actors.runtime.shell import ServiceShell, actor_telemetry
from actors.state import StateSnapshot
from actors.streams.client import connect
from actors.streams.names import StreamNames
from contracts import Allocation, Evaluation, Job, Node
from contracts.messages import LeaderRequest, LeaderResponse, PlanSubmission


class LeaderActor(ServiceShell):
    def __init__(
        self,
        redis_url: str,
        prefix: str = "drover",
        heartbeat_ttl_s: float = 10.0,
        *,
        telemetry_dir: str | None = None,
        tracing: bool = True,
        snapshot_policy: SnapshotPolicy | None = None,
        broker_capacity: int = 2,
        nack_timeout_s: float = 60.0,
        delivery_limit: int = 3,
        local_scheduling: bool = True,
    ) -> None:
        """broker_capacity: deliveries in flight at once (DELIVERIES_PER_WORKER per worker);
        local_scheduling: small evals scheduled here, the workers taking the rest."""
        self.telemetry = actor_telemetry("leader", "leader", telemetry_dir, tracing)
        broker_telemetry = actor_telemetry("broker", "broker", telemetry_dir, tracing)
        self.companion_telemetry = {"broker": broker_telemetry}
        names = StreamNames(prefix)
        self.broker = BrokerService(
            connect(redis_url, client_name="drover-broker"),
            names,
            capacity=broker_capacity,
            nack_timeout_s=nack_timeout_s,
            delivery_limit=delivery_limit,
            telemetry=broker_telemetry,
        )
        self._serve(
            LeaderService(
                connect(redis_url, client_name="drover-leader"),
                names,
                heartbeat_ttl_s=heartbeat_ttl_s,
                telemetry=self.telemetry,
                snapshot_policy=snapshot_policy,
                broker=self.broker,
                local_scheduling=local_scheduling,
            ),
            self.broker,
        )

    def stats(self) -> dict[str, Any]:
        """The leader's counters, and `local_refreshes`: of the evals it scheduled itself,
        plans partially rejected and scheduled again on a fresh snapshot (a run's evals
        share one while they only place: local_scheduling.py)."""
        local = self.service.local
        refreshes = local.stats["refreshes"] if local is not None else 0
        return super().stats() | {"local_refreshes": refreshes}

    def broker_stats(self) -> dict[str, int]:
        """The hosted broker's counters (delivered, acked, of those acked on commit, nacked,
        stale acks) and `unacked`: deliveries outstanding now."""
        with self.broker.lock:
            unacked = self.broker.broker.stats().total_unacked
        return dict(self.broker.stats) | {"unacked": unacked}

    def write_snapshot(self) -> int:
        """Write a snapshot now and trim the log before its tail; returns its index."""
        index: int = self.service.write_snapshot()
        return index

    def snapshot_stats(self) -> dict[str, object]:
        return dataclasses.asdict(self.service.snapshot_writer.stats)

    def request(self, request: LeaderRequest) -> LeaderResponse:
        response: LeaderResponse = self.service.submit(request)
        return response

    # The plan hold: a failpoint that forces concurrent plans (see LeaderService.hold_plans).

    def hold_plans(self, count: int, timeout_s: float, job_ids: Sequence[str] = ()) -> None:
        self.service.hold_plans(count, timeout_s, job_ids)

    def release_plans(self) -> int:
        released: int = self.service.release_plans()
        return released

    def held_plans(self) -> list[PlanSubmission]:
        held: list[PlanSubmission] = self.service.held_plans()
        return held

    # Reads come from a snapshot: the store belongs to the service's thread.

    def _snapshot(self) -> StateSnapshot:
        snapshot: StateSnapshot = self.service.store.snapshot()
        return snapshot

    def index(self) -> int:
        return self._snapshot().latest_index()

    def job(self, namespace: str, job_id: str) -> Job | None:
        return self._snapshot().job(namespace, job_id)

    def job_versions(self, namespace: str, job_id: str) -> list[Job]:
        return self._snapshot().job_versions(namespace, job_id)

    def allocs_by_job(self, namespace: str, job_id: str) -> list[Allocation]:
        return self._snapshot().allocs_by_job(namespace, job_id)

    def evals_by_job(self, namespace: str, job_id: str) -> list[Evaluation]:
        return self._snapshot().evals_by_job(namespace, job_id)

    def nodes(self) -> list[Node]:
        return list(self._snapshot().nodes())

    def allocs(self) -> list[Allocation]:
        return list(self._snapshot().allocs())
