"""The autoscaler's Ray shell (see service.py): Scale calls go to the leader over its request
stream (LeaderLink), as the API's writes do. `AutoscalerClient` is how the API reaches it.

Refusals cross Ray as answers, not exceptions: `{"Error": message, "Status": 400 | 404}`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ray

from actors.autoscaler.service import AutoscalerService
from actors.autoscaler.sources import PrometheusSource
from actors.runtime.shell import ServiceShell, actor_telemetry
from actors.streams.client import connect
from actors.streams.leader_link import LeaderLink
from actors.streams.names import StreamNames
from contracts.errors import NotFoundError, ValidationError
from observability.safe_export import ExportStats

CALL_TIMEOUT_S = 10.0


class AutoscalerActor(ServiceShell):
    def __init__(
        self,
        redis_url: str,
        prefix: str = "drover",
        policy_dir: str | None = None,
        *,
        telemetry_dir: str | None = None,
        tracing: bool = True,
        ray_namespace: str | None = None,
        prometheus_address: str | None = None,
    ) -> None:
        """`ray_namespace`: where the agent hosting simulated fleets is found by name;
        `prometheus_address`: the Prometheus server `source = "prometheus"` checks query."""
        self.telemetry = actor_telemetry("autoscaler", "autoscaler", telemetry_dir, tracing)
        client = connect(redis_url, client_name="drover-autoscaler")
        names = StreamNames(prefix)
        self._link = LeaderLink(client, names, "autoscaler").start()
        self._serve(
            AutoscalerService(
                client,
                names,
                self._link.send,
                policy_dir=Path(policy_dir) if policy_dir else None,
                telemetry=self.telemetry,
                ray_namespace=ray_namespace,
                prometheus=PrometheusSource(prometheus_address) if prometheus_address else None,
            )
        )

    def policies(self) -> list[dict[str, Any]]:
        policies: list[dict[str, Any]] = self.service.policies()
        return policies

    def policy(self, policy_id: str) -> dict[str, Any] | None:
        policy: dict[str, Any] | None = self.service.policy(policy_id)
        return policy

    def apply_policy(self, name: str, text: str) -> dict[str, Any]:
        """Apply a policy file: {"Policies": [policy(id), ...]} or a refusal."""
        try:
            return {"Policies": self.service.apply_policy(name, text)}
        except ValidationError as exc:
            return {"Error": str(exc), "Status": 400}

    def delete_policy(self, policy_id: str) -> dict[str, Any]:
        """Remove the applied file holding the policy: {"Removed": [id, ...]} or a refusal."""
        try:
            return {"Removed": self.service.delete_policy(policy_id)}
        except ValidationError as exc:
            return {"Error": str(exc), "Status": 400}
        except NotFoundError as exc:
            return {"Error": str(exc), "Status": 404}

    def decisions(self, policy_id: str, limit: int = 20) -> list[dict[str, Any]]:
        """The policy's last decisions, newest first (JSON-ready)."""
        decisions: list[dict[str, Any]] = self.service.decision_log(policy_id, limit)
        return decisions

    def explain(self, policy_id: str, limit: int = 20) -> dict[str, Any] | None:
        """{"Policy": policy(id), "Decisions": decisions(id, limit)}, read together."""
        explained: dict[str, Any] | None = self.service.explain(policy_id, limit)
        return explained

    def shutdown(self) -> dict[str, ExportStats]:
        stats = super().shutdown()
        self._link.stop()
        return stats


class AutoscalerClient:
    """The autoscaler actor as the API's backend calls it (from its HTTP threads)."""

    def __init__(self, handle: Any, timeout_s: float = CALL_TIMEOUT_S) -> None:
        self.handle = handle
        self.timeout_s = timeout_s

    def _get(self, ref: Any) -> Any:
        return ray.get(ref, timeout=self.timeout_s)

    def explain(self, policy_id: str, limit: int) -> dict[str, Any] | None:
        explained: dict[str, Any] | None = self._get(self.handle.explain.remote(policy_id, limit))
        return explained

    def policies(self) -> list[dict[str, Any]]:
        policies: list[dict[str, Any]] = self._get(self.handle.policies.remote())
        return policies

    def policy(self, policy_id: str) -> dict[str, Any] | None:
        policy: dict[str, Any] | None = self._get(self.handle.policy.remote(policy_id))
        return policy

    def apply_policy(self, name: str, text: str) -> dict[str, Any]:
        answer: dict[str, Any] = self._get(self.handle.apply_policy.remote(name, text))
        return answer

    def delete_policy(self, policy_id: str) -> dict[str, Any]:
        answer: dict[str, Any] = self._get(self.handle.delete_policy.remote(policy_id))
        return answer
