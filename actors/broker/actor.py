"""The eval broker's Ray shell (see service.py)."""

from __future__ import annotations

from actors.broker.service import BrokerService
from actors.runtime.shell import ServiceShell, actor_telemetry
from actors.streams.client import connect
from actors.streams.names import StreamNames


class BrokerActor(ServiceShell):
    def __init__(
        self,
        redis_url: str,
        prefix: str = "drover",
        capacity: int = 2,
        nack_timeout_s: float = 60.0,
        delivery_limit: int = 3,
        *,
        telemetry_dir: str | None = None,
        tracing: bool = True,
    ) -> None:
        self.telemetry = actor_telemetry("broker", "broker", telemetry_dir, tracing)
        self._serve(
            BrokerService(
                connect(redis_url, client_name="drover-broker"),
                StreamNames(prefix),
                capacity=capacity,
                nack_timeout_s=nack_timeout_s,
                delivery_limit=delivery_limit,
                telemetry=self.telemetry,
            )
        )
