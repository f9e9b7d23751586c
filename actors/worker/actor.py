"""A scheduler worker's Ray shell (see service.py). The consumer name is the worker id, so a
restarted worker first re-reads the deliveries it held before it died."""

from __future__ import annotations

from actors.runtime.shell import ServiceShell, actor_telemetry
from actors.streams.client import connect
from actors.streams.names import StreamNames
from actors.worker.service import WorkerService


class WorkerActor(ServiceShell):
    def __init__(
        self,
        worker_id: str,
        redis_url: str,
        prefix: str = "drover",
        *,
        telemetry_dir: str | None = None,
        tracing: bool = True,
    ) -> None:
        self.telemetry = actor_telemetry("worker", worker_id, telemetry_dir, tracing)
        self._serve(
            WorkerService(
                worker_id,
                connect(redis_url, client_name=f"drover-{worker_id}"),
                StreamNames(prefix),
                telemetry=self.telemetry,
            )
        )
