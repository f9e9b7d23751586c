"""What the API core needs from the running system (`actors/api/service.py` provides it)."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any, Protocol

from actors.agent.core import FleetSpec
from actors.api.core.acl import AclService
from actors.state import StateReader
from contracts import Job
from contracts.jobspec.limits import JobLimits
from contracts.messages import LeaderRequest, LeaderResponse
from contracts.node_commands import NodeCommand, NodeCommandReply, TaskEvent
from contracts.usage import UsageReport


def answered_now(response: LeaderResponse) -> Future[LeaderResponse]:
    """A `submit` future for a write answered before it returned (a backend without a
    leader link of its own)."""
    done: Future[LeaderResponse] = Future()
    done.set_result(response)
    return done


class Backend(Protocol):
    acl_enabled: bool
    acl: AclService  # tokens and policies (core/acl.py)
    job_limits: JobLimits  # the server's limits on a submitted job
    write_timeout_s: float  # how long a submitted write's answer is waited for

    def snapshot(self) -> StateReader:
        """The API's read replica as of now, holding every write `write` has answered (so the
        client reads its own writes)."""
        ...

    def wait_after(self, index: int, timeout_s: float) -> None:
        """Block until the replica has applied an index above `index`, or the timeout."""
        ...

    def write(self, request: LeaderRequest) -> LeaderResponse:
        """Send a write to the leader; returns once the leader has committed it (the next
        `snapshot` holds it)."""
        ...

    def submit(self, request: LeaderRequest) -> Future[LeaderResponse]:
        """Send a write to the leader without waiting for it: the future resolves with its
        answer (the next `snapshot` holds it). A caller that gives up cancels it."""
        ...

    def leader_address(self) -> str:
        """The leader's RPC address as Nomad reports a server's: the agent's advertise host
        and its configured RPC port (Nomad's `ports { rpc = 4647 }`), e.g. "127.0.0.1:4647";
        nothing listens there (drover's servers talk through Redis). "" when unknown."""
        ...

    def apply_fleet(self, spec: FleetSpec) -> int:
        """Declare (or redeclare) a simulated fleet; returns how many nodes it registers."""
        ...

    def fleets(self) -> Sequence[FleetSpec]: ...

    def package_job(self, job: Job) -> Job:
        """The job with its `ray` tasks' local code uploaded to the cluster (paths become
        URIs: launch/ray_packages.py); as is where no Ray is attached."""
        ...

    def scaling_explain(self, policy_id: str, limit: int) -> dict[str, Any] | None:
        """The autoscaler's view of a policy and its last `limit` decisions, newest first
        (`{"Policy": {...}, "Decisions": [...]}`); None for a policy it does not know.
        ApiError(503) when no autoscaler runs or it does not answer."""
        ...

    def scaling_file_policies(self) -> Sequence[dict[str, Any]]:
        """The autoscaler's file policies (its policy views with Origin "file", each with
        "Policy": the policy map as written); empty when no autoscaler runs or answers."""
        ...

    def apply_scaling_policy(self, name: str, text: str) -> list[dict[str, Any]]:
        """Hand a policy file to the autoscaler, which keeps it; returns its policies' views.
        ApiError(400) when refused, (503) when no autoscaler runs or it does not answer."""
        ...

    def delete_scaling_policy(self, policy_id: str) -> list[str]:
        """Remove the applied file holding the policy; returns the IDs removed. ApiError
        (404) unknown, (400) not an applied file's, (503) no autoscaler answers."""
        ...

    def delete_fleet(self, name: str, deadline_s: float) -> int:
        """Delete a declared fleet: its instances drain (Nomad's drain deadline; < 0 forces at
        once) and each leaves once drained. Returns how many are draining. KeyError: unknown."""
        ...

    def node_commands(self, commands: Sequence[NodeCommand]) -> list[NodeCommandReply | None]:
        """Send each command to the agent of its node and wait for the replies (a few seconds
        at most, for all of them together): in the commands' order, None for a node whose
        agent did not answer in time. ApiError(503) when Redis cannot be reached."""
        ...

    def task_events(self, alloc_id: str) -> Sequence[TaskEvent]:
        """The task events agents recorded for the allocation (contracts/node_commands.py),
        oldest first; empty when there are none or they cannot be read."""
        ...

    def recent_usage(self, since_ms: int, limit: int) -> Sequence[UsageReport]:
        """The usage reports agents published at or after `since_ms` (unix ms, the stream
        entry's time), newest first, at most `limit`; unreadable entries are skipped.
        ApiError(503) when the stream cannot be read."""
        ...
