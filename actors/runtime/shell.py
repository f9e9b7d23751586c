"""What every actor shell shares: build a service, start it, run its loop on a thread.

Shells stay thin on purpose: the behaviour lives in the services and their pure cores, which
are tested without Ray. A shell only adds Ray's lifecycle: a restarted actor re-runs its
constructor, which rebuilds the service from Redis (the log, consumer groups' pending lists).
"""

from __future__ import annotations

import threading
from typing import Any, Protocol


class Service(Protocol):
    def start(self) -> None: ...

    def run(self, stop: threading.Event) -> None: ...


class ServiceShell:
    service: Any

    def _serve(self, service: Service) -> None:
        self.service = service
        service.start()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=service.run, args=(self._stop,), name=type(service).__name__, daemon=True
        )
        self._thread.start()

    def ready(self) -> bool:
        return self._thread.is_alive()

    def stats(self) -> dict[str, Any]:
        stats = self.service.stats
        return dict(stats) if isinstance(stats, dict) else dict(vars(stats))

    def shutdown(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
