"""An in-memory backend for the API core: a state store written by the real leader core, with
the real scheduler run on demand, so the API is exercised without Ray, Redis or sockets (the
API core's tests, and bench.fuzz). `Client` calls the API the way the HTTP server does."""

from __future__ import annotations

import dataclasses
import itertools
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, wait
from typing import Any

import orjson

from actors.agent.core import FleetSpec, simulated_nodes
from actors.agent.core.retire import Retirement
from actors.api.core import Api, ApiError, ApiRequest, ApiResponse
from actors.api.core.acl import AclService, MemoryAclStore
from actors.api.core.backend import answered_now
from actors.autoscaler.core.applied import AppliedPolicies, MemoryPolicyStore, applied_path
from actors.autoscaler.core.registry import PolicyEntry, PolicyRegistry
from actors.autoscaler.core.views import policy_json
from actors.leader.core.inprocess_planner import InProcessPlanner
from actors.leader.core.leader import LeaderCore
from actors.state import StateReader, StateStore
from actors.worker.core.scheduler import new_scheduler
from contracts import DrainStrategy, EvalStatus, Job
from contracts.errors import NotFoundError, ValidationError
from contracts.jobspec.limits import DEFAULT_LIMITS, JobLimits
from contracts.messages import LeaderRequest, LeaderResponse, RequestKind
from contracts.node_commands import NodeCommand, NodeCommandKind, NodeCommandReply, TaskEvent
from contracts.usage import UsageReport


class MemoryBackend:
    def __init__(
        self,
        acl_enabled: bool = False,
        address: str = "127.0.0.1:4647",
        job_limits: JobLimits = DEFAULT_LIMITS,
    ) -> None:
        self.acl_enabled = acl_enabled
        self.job_limits = job_limits
        self.write_timeout_s = 30.0
        self.address = address  # the server's RPC address (leader_address)
        self.store = StateStore()
        ids = (f"id-{n:04d}" for n in itertools.count())
        self.core = LeaderCore(self.store, now_ns=lambda: 1_000, new_id=lambda: next(ids))
        self.acl = AclService(MemoryAclStore(), cache_s=0.0)
        self.declared: dict[str, FleetSpec] = {}
        self.retirement = Retirement()
        self.changed = threading.Condition()
        self.waits: list[float] = []  # each wait_after's timeout, in the order asked
        self.waiting = threading.Event()  # set when a blocking read starts waiting
        # What an autoscaler would answer per policy ID; None: no autoscaler runs.
        self.autoscaler: dict[str, dict[str, Any]] | None = None
        self.usage: list[tuple[int, UsageReport]] = []  # (published at, unix ms), oldest first
        # The autoscaler's file policies (the real registry and applied-file store); None:
        # no autoscaler runs.
        self.policy_files: AppliedPolicies | None = None
        # Commands sent to nodes' agents, what the agents answer (None: no answer in time),
        # and the task events they recorded, by allocation.
        self.sent: list[NodeCommand] = []
        self.answer: Callable[[NodeCommand], NodeCommandReply | None] = _done
        self.events: dict[str, list[TaskEvent]] = {}

    def start_autoscaler(self) -> AppliedPolicies:
        self.policy_files = AppliedPolicies(PolicyRegistry(), MemoryPolicyStore())
        return self.policy_files

    def snapshot(self) -> StateReader:
        return self.store.snapshot()

    def wait_after(self, index: int, timeout_s: float) -> None:
        with self.changed:
            self.waits.append(timeout_s)
            self.waiting.set()
            self.changed.wait_for(lambda: self.store.latest_index() > index, timeout_s)

    def write(self, request: LeaderRequest) -> LeaderResponse:
        decision = self.core.handle(request)
        assert decision.response is not None
        index = 0
        for change in decision.changes:
            index = self.store.commit(change)
        with self.changed:
            self.changed.notify_all()
        job_modify_index = (
            decision.job_write.reply_job_modify_index(index) if decision.job_write else 0
        )
        return dataclasses.replace(
            decision.response, index=index, job_modify_index=job_modify_index
        )

    def submit(self, request: LeaderRequest) -> Future[LeaderResponse]:
        return answered_now(self.write(request))

    def leader_address(self) -> str:
        return self.address

    def apply_fleet(self, spec: FleetSpec) -> int:
        self.declared[spec.name] = spec
        self.write(LeaderRequest(RequestKind.UPSERT_NODES, nodes=tuple(simulated_nodes(spec))))
        return spec.count

    def fleets(self) -> Sequence[FleetSpec]:
        self.settle_deletions()
        return list(self.declared.values())

    def delete_fleet(self, name: str, deadline_s: float) -> int:
        """As the system does: the instances drain (the real Retirement of the hosting
        agent), each removed once drained (`settle_deletions`, the agent's loop)."""
        spec = self.declared[name]
        self.declared[name] = dataclasses.replace(spec, deleting=True)
        node_ids = [n.id for n in simulated_nodes(spec)]
        asked = self.retirement.begin(node_ids, self.store.latest_index(), self.store.node)
        for node_id in asked:
            drain = DrainStrategy(deadline_s=deadline_s)
            self.write(LeaderRequest(RequestKind.DRAIN_NODE, node_ids=(node_id,), drain=drain))
        self.settle_deletions()
        return len(node_ids)

    def settle_deletions(self) -> None:
        done = self.retirement.drained(self.store.node)
        if done:
            self.write(LeaderRequest(RequestKind.DELETE_NODES, node_ids=tuple(done)))
        for name, spec in list(self.declared.items()):
            if spec.deleting and not any(self.store.node(n.id) for n in simulated_nodes(spec)):
                del self.declared[name]

    def scaling_explain(self, policy_id: str, limit: int) -> dict[str, Any] | None:
        if self.autoscaler is None:
            raise ApiError(503, "no autoscaler runs with this agent")
        known = self.autoscaler.get(policy_id)
        if known is None:
            return None
        return {"Policy": known["Policy"], "Decisions": known["Decisions"][:limit]}

    @staticmethod
    def _view(entry: PolicyEntry) -> dict[str, Any]:
        return {**policy_json(entry), "Policy": dict(entry.raw)}  # as the autoscaler's

    def scaling_file_policies(self) -> list[dict[str, Any]]:
        if self.policy_files is None:
            return []
        entries = self.policy_files.registry.entries()
        return [self._view(e) for e in entries if e.origin == "file"]

    def apply_scaling_policy(self, name: str, text: str) -> list[dict[str, Any]]:
        if self.policy_files is None:
            raise ApiError(503, "no autoscaler runs with this agent")
        try:
            self.policy_files.apply(name, text)
        except ValidationError as exc:
            raise ApiError(400, str(exc)) from None
        path = applied_path(name)
        return [self._view(e) for e in self.policy_files.registry.entries() if e.path == path]

    def delete_scaling_policy(self, policy_id: str) -> list[str]:
        if self.policy_files is None:
            raise ApiError(503, "no autoscaler runs with this agent")
        try:
            return list(self.policy_files.delete(policy_id).removed)
        except ValidationError as exc:
            raise ApiError(400, str(exc)) from None
        except NotFoundError as exc:
            raise ApiError(404, str(exc)) from None

    def package_job(self, job: Job) -> Job:
        return job  # no Ray here: nothing to upload

    def publish_usage(self, report: UsageReport, at_ms: int) -> None:
        """What an agent's XADD on the usage stream does."""
        self.usage.append((at_ms, report))

    def node_commands(self, commands: Sequence[NodeCommand]) -> list[NodeCommandReply | None]:
        """What the agents answer: `answer` (every command done, by default); each command
        sent is kept in `sent`, and the events of an answered signal in `events`."""
        self.sent.extend(commands)
        return [self.answer(c) for c in commands]

    def task_events(self, alloc_id: str) -> list[TaskEvent]:
        return list(self.events.get(alloc_id, ()))

    def recent_usage(self, since_ms: int, limit: int) -> list[UsageReport]:
        newest_first = [r for at, r in reversed(self.usage) if at >= since_ms]
        return newest_first[:limit]

    def schedule_pending(self) -> None:
        """Run every pending eval through the real scheduler (what the workers do)."""
        for ev in list(self.store.evals()):
            if ev.status is EvalStatus.PENDING:
                ids = (f"{ev.id}-alloc-{n}" for n in itertools.count())
                new_scheduler(
                    ev.type,
                    self.store.snapshot(),
                    InProcessPlanner(self.store),
                    now_ns=lambda: 2_000,
                    new_id=ids.__next__,
                ).process(ev)


def _done(command: NodeCommand) -> NodeCommandReply:
    collected = (command.alloc_id,) if command.kind is NodeCommandKind.GC_ALLOC else ()
    return NodeCommandReply(command.command_id, collected=collected or command.alloc_ids)


class Client:
    """Calls the API core the way the HTTP server does."""

    def __init__(self, api: Api, token: str = "") -> None:
        self.api = api
        self.token = token

    def __call__(self, method: str, path: str, body: Any = None, **query: Any) -> ApiResponse:
        raw = body if isinstance(body, bytes) else (orjson.dumps(body) if body is not None else b"")
        request = ApiRequest(method, path, {k: str(v) for k, v in query.items()}, raw, self.token)
        started = self.api.begin(request)
        if isinstance(started, ApiResponse):
            return started
        # The server awaits the answer on its loop, and gives it up at the timeout.
        if not wait([started.answer], timeout=started.timeout_s).done:
            started.answer.cancel()
        return self.api.finish(started, started.answer)
