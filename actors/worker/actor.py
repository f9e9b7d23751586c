"""A scheduler worker's Ray shell (see service.py). The consumer name is the worker id, so a
restarted worker first re-reads the deliveries it held before it died."""

from __future__ import annotations

from actors.runtime.shell import ServiceShell
from actors.streams.client import connect
from actors.streams.names import StreamNames
from actors.worker.service import WorkerService


class WorkerActor(ServiceShell):
    def __init__(self, worker_id: str, redis_url: str, prefix: str = "drover") -> None:
        self._serve(
            WorkerService(
                worker_id,
                connect(redis_url, client_name=f"drover-{worker_id}"),
                StreamNames(prefix),
            )
        )
