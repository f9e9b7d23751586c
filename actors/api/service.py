"""The API's backend over the running system: reads from a log replica of its own (as a Nomad
server answers reads from its local state store), writes through the leader.

A write is answered as soon as the leader has committed it; every read then waits until the
replica has applied the highest index this API has answered a write with (its read barrier),
so a client that writes and then reads through the same agent always sees its write. The
write's own latency does not include the replica's catch-up: under load the replica applies
entries in large batches behind the leader, and only a read that follows a write waits for it
(Nomad's reads are consistent by default the same way: they go to the leader, whose state
holds every write it acknowledged). ACL tokens and policies and fleet
declarations are not cluster state (the leader never schedules on them); they live in Redis
hashes of their own (acl_redis.py, `StreamNames.fleets`), the bootstrap guarded by SETNX.

The replica also feeds `/v1/event/stream`: each entry it applies after start is translated
into Nomad's events (core/events.py) and published to `events`, the broker subscribers read.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError
from typing import Any, Protocol

import redis

from actors.agent.core import FleetSpec
from actors.api.acl_redis import RedisAclStore
from actors.api.core import ApiError
from actors.api.core.acl import AclService, Issued
from actors.api.core.backend import answered_now
from actors.api.core.event_broker import EventBroker
from actors.api.core.events import EventSource, EventTranslator
from actors.api.core.request_ids import with_request_id
from actors.process_settings import tune_process
from actors.runtime.replica import LogReplica
from actors.state import StateReader
from actors.streams.envelope import BadMessage, decode_envelope
from actors.streams.leader_link import LeaderUnanswered
from actors.streams.names import StreamNames
from actors.streams.node_link import send_commands, task_events
from actors.streams.outbox import OutboxStopped
from contracts import Job
from contracts.codec import CodecError
from contracts.jobspec.limits import DEFAULT_LIMITS, JobLimits
from contracts.messages import LeaderRequest, LeaderResponse
from contracts.node_commands import NodeCommand, NodeCommandReply, TaskEvent
from contracts.usage import REPORT_TYPE, UsageReport, decode_report

# How long a read waits for the replica to hold this API's answered writes (it takes
# milliseconds: the leader appended them before answering).
READ_BARRIER_TIMEOUT_S = 10.0
DEFAULT_RPC_PORT = 4647  # Nomad's default `ports { rpc }`
NODE_COMMAND_TIMEOUT_S = 10.0  # an agent answers in milliseconds; a node may have just died
DEFAULT_WRITE_TIMEOUT_S = 30.0  # as the leader link's own

log = logging.getLogger(__name__)


class FleetManager(Protocol):
    def apply_fleet(self, spec: FleetSpec) -> int: ...

    def fleets(self) -> Sequence[FleetSpec]: ...

    def delete_fleet(self, name: str, deadline_s: float) -> int: ...


class AutoscalerView(Protocol):
    def explain(self, policy_id: str, limit: int) -> dict[str, Any] | None: ...

    def policies(self) -> list[dict[str, Any]]: ...

    def apply_policy(self, name: str, text: str) -> dict[str, Any]: ...

    def delete_policy(self, policy_id: str) -> dict[str, Any]: ...


class ApiService:
    def __init__(
        self,
        client: redis.Redis,
        names: StreamNames,
        send: Callable[[LeaderRequest], LeaderResponse],
        *,
        submit: Callable[[LeaderRequest], Future[LeaderResponse]] | None = None,
        write_timeout_s: float = DEFAULT_WRITE_TIMEOUT_S,
        acl_enabled: bool = False,
        fleet_manager: FleetManager | None = None,
        packager: Callable[[Job], Job] | None = None,
        autoscaler: AutoscalerView | None = None,
        job_limits: JobLimits = DEFAULT_LIMITS,
    ) -> None:
        tune_process()  # as every actor: the API's threads hand the GIL over quickly too
        self.client = client
        self.job_limits = job_limits
        self.names = names
        self.send = send
        self._submit = submit
        self.write_timeout_s = write_timeout_s
        self.acl_enabled = acl_enabled
        self._advertised = ""
        self.fleet_manager = fleet_manager
        self.packager = packager
        self.autoscaler = autoscaler
        self.events = EventBroker()
        self.event_source = EventSource(self.events.publish, self.events.reset, EventTranslator())
        self.replica = LogReplica(client, names, on_reset=self.event_source.reset)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # The highest index a write of this API was answered with: reads wait for it.
        self.read_barrier = 0
        self._barrier_lock = threading.Lock()
        self.acl = AclService(RedisAclStore(client, names))

    def start(self) -> ApiService:
        if self.acl_enabled:
            RedisAclStore(self.client, self.names).migrate_plain_tokens()
        self.replica.load()
        # Events start with what is applied from now on (Nomad's buffer starts empty too).
        self.event_source.attach(self.replica.store)
        self.replica.listener = self.event_source.on_entry
        self._thread = threading.Thread(
            target=self.replica.run, args=(self._stop,), name="drover-api-replica", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    # -- reads and writes ------------------------------------------------------------------------

    def snapshot(self) -> StateReader:
        """The replica's state, once it holds every write this API has answered."""
        barrier = self.read_barrier
        if self.replica.store.latest_index() < barrier and not self.replica.wait_for(
            barrier, READ_BARRIER_TIMEOUT_S
        ):
            # The replica cannot follow (Redis away, its thread stuck): read what it holds,
            # as a stale read would, rather than hold every reader.
            log.warning(
                "the API's replica is at %d, short of %d this API answered; reading it as is",
                self.replica.store.latest_index(),
                barrier,
            )
        return self.replica.snapshot()

    def wait_after(self, index: int, timeout_s: float) -> None:
        self.replica.wait_for(index + 1, timeout_s)

    def write(self, request: LeaderRequest) -> LeaderResponse:
        request = with_request_id(request)
        try:
            response = self.send(request)
        except _UNSENT as exc:
            raise _write_error(exc) from None
        self._answered(response)
        return response

    def submit(self, request: LeaderRequest) -> Future[LeaderResponse]:
        """Send a write and return without waiting: the future resolves with the leader's
        answer, the read barrier already past it. Without a `submit` of the link's, the write
        is sent (and answered) before this returns."""
        if self._submit is None:
            return answered_now(self.write(request))
        request = with_request_id(request)
        try:
            sent = self._submit(request)
        except _UNSENT as exc:
            raise _write_error(exc) from None
        # The caller's future is resolved only once the read barrier is past the answer,
        # whoever waits on it and however (a callback or a blocked result()).
        # Each future's callback refers to the other; the one back to `sent` is weak, or
        # every write would leave a reference cycle for the cyclic collector (whoever will
        # resolve `sent`, the leader link, holds it until then).
        answered: Future[LeaderResponse] = Future()
        sent.add_done_callback(functools.partial(self._relay, answered=answered))
        answered.add_done_callback(functools.partial(_cancel_with, weakref.ref(sent)))
        return answered

    def _relay(self, sent: Future[LeaderResponse], answered: Future[LeaderResponse]) -> None:
        if sent.cancelled():
            answered.cancel()
            return
        error = sent.exception()
        if isinstance(error, _UNSENT):
            error = _write_error(error)
        with contextlib.suppress(InvalidStateError):  # its caller gave up meanwhile
            if error is not None:
                answered.set_exception(error)
            else:
                self._answered(sent.result())
                answered.set_result(sent.result())

    def _answered(self, response: LeaderResponse) -> None:
        if response.ok and response.index:
            # What the leader committed before answering (a small job's placement) included.
            visible = max(response.index, response.visible_index)
            with self._barrier_lock:
                self.read_barrier = max(self.read_barrier, visible)

    def advertise(self, host: str, rpc_port: int = DEFAULT_RPC_PORT) -> None:
        """Set this agent's advertise address (the host its HTTP server is bound to) and the
        RPC port it reports (Nomad's `ports { rpc }`): the server's identity, as Nomad gives
        it in /v1/status/leader and /peers and /v1/agent/servers. drover's servers talk
        through Redis, so nothing listens on that port; the HTTP API is where clients go."""
        self._advertised = f"{host}:{rpc_port}"

    def leader_address(self) -> str:
        """The leader's RPC address, `<advertise host>:<rpc port>`; "" until the HTTP server
        is bound (Nomad's answer when there is no leader)."""
        return self._advertised

    # -- ACL -------------------------------------------------------------------------------------

    def bootstrap_acl(self, secret_id: str | None = None) -> Issued:
        """Issue the management token (with this secret, or a new one), once across every
        agent on this Redis; ApiError(400) after that."""
        return self.acl.bootstrap(secret_id)

    # -- fleets ----------------------------------------------------------------------------------

    def apply_fleet(self, spec: FleetSpec) -> int:
        if self.fleet_manager is None:
            raise ApiError(400, "this agent hosts no simulated fleets (started without Ray)")
        return self.fleet_manager.apply_fleet(spec)

    def fleets(self) -> Sequence[FleetSpec]:
        return self.fleet_manager.fleets() if self.fleet_manager is not None else ()

    def package_job(self, job: Job) -> Job:
        return self.packager(job) if self.packager is not None else job

    # -- the autoscaler --------------------------------------------------------------------------

    def scaling_explain(self, policy_id: str, limit: int) -> dict[str, Any] | None:
        if self.autoscaler is None:
            raise ApiError(503, "no autoscaler runs with this agent")
        try:
            return self.autoscaler.explain(policy_id, limit)
        except Exception as exc:  # the actor restarting, or gone
            raise ApiError(503, f"the autoscaler did not answer: {type(exc).__name__}") from None

    def scaling_file_policies(self) -> list[dict[str, Any]]:
        if self.autoscaler is None:
            return []
        try:
            policies = self.autoscaler.policies()
        except Exception as exc:  # the actor restarting, or gone: the job policies still list
            log.warning("the autoscaler did not list its policies: %s", type(exc).__name__)
            return []
        return [p for p in policies if p.get("Origin") == "file"]

    def _autoscaler_call(self, call: Callable[[AutoscalerView], dict[str, Any]]) -> dict[str, Any]:
        if self.autoscaler is None:
            raise ApiError(503, "no autoscaler runs with this agent")
        try:
            answer = call(self.autoscaler)
        except Exception as exc:
            raise ApiError(503, f"the autoscaler did not answer: {type(exc).__name__}") from None
        if "Error" in answer:
            raise ApiError(int(answer.get("Status", 400)), str(answer["Error"]))
        return answer

    def apply_scaling_policy(self, name: str, text: str) -> list[dict[str, Any]]:
        answer = self._autoscaler_call(lambda a: a.apply_policy(name, text))
        return list(answer["Policies"])

    def delete_scaling_policy(self, policy_id: str) -> list[str]:
        answer = self._autoscaler_call(lambda a: a.delete_policy(policy_id))
        return list(answer["Removed"])

    def delete_fleet(self, name: str, deadline_s: float) -> int:
        if self.fleet_manager is None:
            raise KeyError(name)
        return self.fleet_manager.delete_fleet(name, deadline_s)

    # -- commands to one node's agent (signals, client GC) ----------------------------------------

    def node_commands(self, commands: Sequence[NodeCommand]) -> list[NodeCommandReply | None]:
        try:
            return send_commands(self.client, self.names, commands, NODE_COMMAND_TIMEOUT_S)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise ApiError(503, f"Redis is unreachable ({exc}): the node was not reached") from None

    def task_events(self, alloc_id: str) -> list[TaskEvent]:
        try:
            return task_events(self.client, self.names, alloc_id)
        except redis.RedisError:
            log.warning("the task events of allocation %s cannot be read", alloc_id)
            return []

    # -- usage (for /v1/metrics) -----------------------------------------------------------------

    def recent_usage(self, since_ms: int, limit: int) -> list[UsageReport]:
        try:
            rows: Any = self.client.xrevrange(
                self.names.usage, max="+", min=str(max(since_ms, 0)), count=limit
            )
        except redis.RedisError as exc:
            raise ApiError(503, f"the usage stream cannot be read: {exc}") from None
        reports = []
        for _entry_id, fields in rows or ():
            try:
                envelope = decode_envelope(fields)
                if envelope.type == REPORT_TYPE:
                    reports.append(decode_report(envelope.body))
            except (BadMessage, CodecError):
                continue  # telemetry: a bad entry leaves a gap, as the autoscaler treats it
        return reports


# A write that did not reach the leader, or got no answer from it: a 503 either way.
_UNSENT = (LeaderUnanswered, OutboxStopped, redis.ConnectionError, redis.TimeoutError)


def _write_error(exc: BaseException) -> ApiError:
    if isinstance(exc, LeaderUnanswered):
        return ApiError(503, str(exc))
    if isinstance(exc, OutboxStopped):
        return ApiError(503, "this API is stopping: the request did not reach the leader")
    # Reads still come from this API's replica; a write cannot reach the leader.
    return ApiError(
        503,
        f"Redis is unreachable ({exc}): the request did not reach the leader; retry when it"
        " is back",
    )


def _cancel_with(sent: weakref.ref[Future[LeaderResponse]], answered: Future[Any]) -> None:
    """`answered` given up: so is the write it waits for, if that is still around."""
    if answered.cancelled() and (write := sent()) is not None:
        write.cancel()
