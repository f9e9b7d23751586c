"""`DroverClient`: the Python API of a running system (`DroverSystem.client()`): submit jobs
through the leader actor and watch their allocations."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ray

from contracts import Allocation, ClientStatus, Job
from contracts.jobspec import parse_job_file
from contracts.messages import LeaderRequest, LeaderResponse, RequestKind


class DroverClient:
    """The Python API: submit jobs through the leader and watch their allocations."""

    def __init__(self, leader: Any, namespace: str = "default") -> None:
        self.leader = leader
        self.namespace = namespace

    def _request(self, kind: RequestKind, **fields: Any) -> LeaderResponse:
        """Send one write to the leader under a fresh request id (the leader applies each id
        once, so a retried call can never apply twice); a refusal raises with its reason."""
        response = self.send(self._new_request(kind, **fields))
        if not response.ok:
            raise RuntimeError(response.error)
        return response

    def _new_request(self, kind: RequestKind, **fields: Any) -> LeaderRequest:
        return LeaderRequest(kind, request_id=str(uuid.uuid4()), namespace=self.namespace, **fields)

    def send(self, request: LeaderRequest) -> LeaderResponse:
        """A write as is. The leader applies each request id once, so sending it again to
        ride out a leader restart can never apply it twice."""
        response: LeaderResponse = self._call("request", request)
        return response

    def run_job(self, job: Job, *, preserve_counts: bool = False) -> LeaderResponse:
        return self._request(RequestKind.REGISTER_JOB, job=job, preserve_counts=preserve_counts)

    def run_jobs(
        self, jobs: Sequence[Job], *, preserve_counts: bool = False
    ) -> list[LeaderResponse]:
        """Register several jobs at once: every request is sent before any answer is awaited,
        so the leader commits them back to back and their evals reach the workers together
        (a user submitting a batch; tests that need concurrent plans)."""
        requests = [
            (self._new_request(RequestKind.REGISTER_JOB, job=job, preserve_counts=preserve_counts),)
            for job in jobs
        ]
        responses: list[LeaderResponse] = self._call_all("request", requests)
        refused = [(job.id, r.error) for job, r in zip(jobs, responses, strict=True) if not r.ok]
        if refused:
            raise RuntimeError("; ".join(f"{job_id}: {error}" for job_id, error in refused))
        return responses

    def run_job_file(self, path: str | Path, *, preserve_counts: bool = False) -> LeaderResponse:
        return self.run_job(parse_job_file(path), preserve_counts=preserve_counts)

    def stop_job(self, job_id: str, *, purge: bool = False) -> LeaderResponse:
        return self._request(RequestKind.STOP_JOB, job_id=job_id, purge=purge)

    def revert_job(self, job_id: str, version: int) -> LeaderResponse:
        return self._request(RequestKind.REVERT_JOB, job_id=job_id, version=version)

    def scale_job(self, job_id: str, group: str, count: int, message: str = "") -> LeaderResponse:
        return self._request(
            RequestKind.SCALE_JOB, job_id=job_id, group=group, count=count, message=message
        )

    def _read(self, method: str, *args: Any, timeout_s: float = 30.0) -> Any:
        """Reads are safe to repeat, so they ride out a leader restart."""
        return self._call(method, *args, timeout_s=timeout_s)

    def _call(self, method: str, *args: Any, timeout_s: float = 30.0) -> Any:
        return self._call_all(method, [args], timeout_s=timeout_s)[0]

    def _call_all(
        self, method: str, calls: Sequence[tuple[Any, ...]], timeout_s: float = 30.0
    ) -> list[Any]:
        """Call the leader once per argument tuple, all sent before any answer is awaited,
        retrying while Ray answers ActorUnavailableError (the restarted actor rebuilding its
        state from the log); only for calls safe to repeat (reads, writes with request ids)."""
        deadline = time.monotonic() + timeout_s
        remote = getattr(self.leader, method).remote
        while True:
            try:
                return list(ray.get([remote(*args) for args in calls]))
            except ray.exceptions.ActorUnavailableError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def job(self, job_id: str) -> Job | None:
        job: Job | None = self._read("job", self.namespace, job_id)
        return job

    def job_versions(self, job_id: str) -> list[Job]:
        versions: list[Job] = self._read("job_versions", self.namespace, job_id)
        return versions

    def allocs(self, job_id: str) -> list[Allocation]:
        allocs: list[Allocation] = self._read("allocs_by_job", self.namespace, job_id)
        return allocs

    def index(self) -> int:
        index: int = self._read("index")
        return index

    def leader_stats(self) -> dict[str, Any]:
        stats: dict[str, Any] = self._read("stats")
        return stats

    def wait_for_allocs(
        self,
        job_id: str,
        *,
        count: int,
        status: ClientStatus | str = ClientStatus.RUNNING,
        timeout_s: float = 60.0,
        live_only: bool = True,
    ) -> list[Allocation]:
        """Wait until `count` allocations of the job have `status`; returns them."""
        wanted = ClientStatus(status)
        deadline = time.monotonic() + timeout_s
        matching: list[Allocation] = []
        while time.monotonic() < deadline:
            allocs = self.allocs(job_id)
            if live_only and wanted in (ClientStatus.PENDING, ClientStatus.RUNNING):
                allocs = [a for a in allocs if not a.server_terminal()]
            matching = [a for a in allocs if a.client_status is wanted]
            if len(matching) >= count:
                return matching
            time.sleep(0.1)
        raise TimeoutError(
            f"job {job_id!r}: {len(matching)} of {count} allocations {wanted} "
            f"after {timeout_s:.0f}s"
        )
