"""A client agent: runs the allocations placed on its nodes and reports back.

One agent hosts one node (real mode: the Ray node it is pinned to) or many virtual nodes
(simulated mode: 5,000 nodes need no 5,000 processes). It registers its nodes with the
leader, follows the state log for allocations placed on them, runs them through its drivers,
and sends status changes and heartbeats to the leader's stream. If it dies, its heartbeats
stop, the leader marks its nodes down and the scheduler replaces their allocations.

A restarted agent re-reads the log: allocations recorded as finished are not started again.

Commands the API sends its nodes (signal a task, collect finished allocations' local state:
contracts/node_commands.py) come over one command stream per node; a thread of the agent
reads them all (command_channel.py) and the loop carries them out on the client core
(core/commands.py) and answers each.

Every `usage_interval_s` it also samples what its running allocations use (their drivers'
`usage`: raw_exec's processes, mock's load model, ray's worker) and publishes one UsageReport
(split at MAX_SAMPLES_PER_REPORT samples) on the capped usage stream: telemetry for the
autoscaler's `drover` metric source, never part of the state log.
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import redis
from opentelemetry.trace import SpanKind

from actors.agent.command_channel import CommandChannel
from actors.agent.core import ClientCore, Driver
from actors.agent.core.cluster import cluster_env, cluster_info
from actors.agent.core.commands import run_command
from actors.agent.core.retire import Retirement
from actors.agent.core.usage import node_mhz_per_core, usage_samples
from actors.process_settings import tune_process, when_idle
from actors.runtime.reconnect import UNREACHABLE, Reconnecting
from actors.runtime.replica import LogReplica
from actors.state import StateStore
from actors.streams import StreamBus
from actors.streams.names import StreamNames
from contracts import CLIENT_TERMINAL, Allocation, ClientStatus, DrainStrategy, Node
from contracts.alloc_batch import ROW_NODE_ID
from contracts.messages import LeaderRequest, RequestKind
from contracts.state_log import (
    LogEntry,
    UpdateAllocsClientStatus,
    UpdateClientStatusRows,
    UpsertAllocRows,
    UpsertAllocs,
    decode_entry,
    without_allocs,
)
from contracts.usage import (
    MAX_SAMPLES_PER_REPORT,
    REPORT_TYPE,
    USAGE_STREAM_MAXLEN,
    usage_reports,
)
from observability import Telemetry
from observability import conventions as c
from observability.propagation import extract

log = logging.getLogger(__name__)

SWEEP_INTERVAL_S = 5.0
# Reports go out as soon as the log brings work (no tick to wait out), but at most one per
# this gap: under load the allocations of many plans share a message.
REPORT_GAP_S = 0.005


class AgentService:
    def __init__(
        self,
        agent_id: str,
        client: redis.Redis,
        names: StreamNames,
        nodes: Sequence[Node],
        drivers: Mapping[str, Driver],
        *,
        heartbeat_s: float = 2.0,
        tick_s: float = 0.1,
        clock: Callable[[], float] = time.time,
        telemetry: Telemetry | None = None,
        work_dir: Path | None = None,
        usage_interval_s: float = 1.0,
        mhz_per_cpu: float = 1000,
    ) -> None:
        """`usage_interval_s`: how often usage is published (0: never); `mhz_per_cpu`: a
        core's MHz where a node does not say (`cpu_percent` is of one core)."""
        tune_process()
        # Files the agent hands its tasks (a run's MPI hostfile).
        self.work_dir = work_dir or Path(tempfile.gettempdir()) / "drover" / agent_id
        self.agent_id = agent_id
        self.telemetry = telemetry or Telemetry.disabled("agent", agent_id)
        self.client = client
        self.names = names
        self.bus = StreamBus(client)
        self.nodes = list(nodes)
        self.node_ids = tuple(n.id for n in nodes)
        self.core = ClientCore(self.node_ids, drivers, clock)
        self.heartbeat_s = heartbeat_s
        self.tick_s = tick_s
        self.clock = clock
        self.lock = threading.Lock()
        # The agent needs job versions (to find tasks) from its store; allocation records go
        # straight from the log to the client core, so the store skips them. The log is read
        # compact, so that only the records of this agent's nodes are built; of the client
        # reports coming back it only uses terminal ones, so only those are decoded. It reads
        # no evaluations: they are neither decoded nor kept (two per small job, for ever).
        self.replica = LogReplica(
            client,
            names,
            store=StateStore(),
            listener=self._on_entry,
            decode=partial(
                decode_entry, terminal_updates_only=True, compact=True, keep_eval=_no_evals
            ),
            reduce=without_allocs,
        )
        self.usage_interval_s = usage_interval_s
        self.mhz_per_cpu = mhz_per_cpu
        self._mhz_per_core = {n.id: node_mhz_per_core(n, mhz_per_cpu) for n in self.nodes}
        self.stats = {"updates": 0, "heartbeats": 0, "usage_reports": 0, "usage_samples": 0}
        self.retirement = Retirement()  # hosted instances draining before their removal
        # Set by the log-tail thread when it hands the core allocations to act on, and by the
        # command reader when commands arrived.
        self._work = threading.Event()
        self.commands = CommandChannel(client, names, agent_id, lambda: self.node_ids)

    def start(self) -> None:
        """Register the nodes (the leader also treats this as a first heartbeat), then catch
        up with the log so allocations placed before a restart are known."""
        self._send(
            LeaderRequest(
                RequestKind.UPSERT_NODES, request_id=str(uuid.uuid4()), nodes=tuple(self.nodes)
            )
        )
        self.commands.begin()  # commands to our nodes count from now (command_channel.py)
        self.replica.load()

    def run(self, stop: threading.Event) -> None:
        def follow_log() -> None:
            try:
                # Reports go out at most every REPORT_GAP_S anyway: read the log as often.
                self.replica.run(stop, 100, linger_s=REPORT_GAP_S)
            finally:
                self._work.set()  # the loop may be waiting out a long tick: stop now

        tail = threading.Thread(target=follow_log, daemon=True)
        tail.start()
        commands = threading.Thread(
            target=self.commands.follow, args=(stop, self._work), daemon=True
        )
        commands.start()
        next_beat = next_sweep = next_usage = 0.0

        def turn() -> None:
            nonlocal next_beat, next_sweep, next_usage
            now = self.clock()
            if now >= next_beat:
                self.heartbeat()
                next_beat = now + self.heartbeat_s
            if now >= next_sweep:
                # Runners whose final status is committed are dropped; this scans them all,
                # so it runs on a timer, never per log entry.
                with self.lock:
                    self.core.forget_terminal()
                next_sweep = now + SWEEP_INTERVAL_S
            if self.retirement:
                self._release_drained()
            if self.commands.queue:
                self._run_commands()
            if self.usage_interval_s > 0 and now >= next_usage:
                # Reads every running task's processes: on its timer, never per entry.
                next_usage = now + self.usage_interval_s
                self._publish_usage_or_log()
            if self.report():
                stop.wait(REPORT_GAP_S)
            else:
                when_idle()

        reconnecting = Reconnecting(stop, f"agent {self.agent_id}")
        try:
            while not stop.is_set():
                try:
                    reconnecting(turn)
                except UNREACHABLE:
                    return  # raised only once stop is set
                # The tick paces drivers and timers; new allocations and commands cut it short.
                if self._work.wait(self.tick_s):
                    self._work.clear()
        finally:
            self.commands.wake()
            commands.join(timeout=5)

    def _run_commands(self) -> None:
        """The commands read for our nodes, carried out in order and answered."""
        queue = self.commands.queue
        while queue:
            command = queue.popleft()
            with self.lock:
                outcome = run_command(self.core, command, self.clock())
            for alloc_id in outcome.reply.collected:  # plain IDs (ClientCore.collect)
                (self.work_dir / f"{alloc_id}.hostfile").unlink(missing_ok=True)
            self.commands.answer(command, outcome)

    def heartbeat(self) -> None:
        with self.lock:
            node_ids = self.node_ids
        if node_ids:
            self._send(LeaderRequest(RequestKind.NODE_HEARTBEAT, node_ids=node_ids))
        self.stats["heartbeats"] += 1

    def host(self, nodes: Sequence[Node]) -> None:
        """Host more nodes (a simulated fleet declared while running), or re-register ones
        already hosted with what they offer now; their allocations start as the log brings
        them."""
        with self.lock:
            known = {n.id: i for i, n in enumerate(self.nodes)}
            for node in nodes:
                if node.id in known:
                    self.nodes[known[node.id]] = node
                else:
                    self.nodes.append(node)
                    self.core.add_node(node.id)
            self.node_ids = tuple(n.id for n in self.nodes)
            for node in nodes:
                self._mhz_per_core[node.id] = node_mhz_per_core(node, self.mhz_per_cpu)
        self.commands.wake()  # its next read takes the new nodes' command streams too
        self._send(
            LeaderRequest(
                RequestKind.UPSERT_NODES, request_id=str(uuid.uuid4()), nodes=tuple(nodes)
            )
        )

    def release(self, node_ids: Collection[str]) -> int:
        """Stop hosting `node_ids` (a deleted fleet): their tasks are stopped, their
        heartbeats end, and the leader is asked to remove them, which re-evaluates the jobs
        that had allocations there. Returns how many allocations they had."""
        gone = set(node_ids)
        with self.lock:
            self.retirement.forget(gone)
            gone &= set(self.node_ids)
            self.nodes = [n for n in self.nodes if n.id not in gone]
            self.node_ids = tuple(n.id for n in self.nodes)
            for node_id in gone:
                self._mhz_per_core.pop(node_id, None)
            allocs = sum(self.core.drop_node(node_id) for node_id in gone)
        if gone:
            self._send(
                LeaderRequest(
                    RequestKind.DELETE_NODES,
                    request_id=str(uuid.uuid4()),
                    node_ids=tuple(sorted(gone)),
                )
            )
        return allocs

    def retire(self, node_ids: Collection[str], drain: DrainStrategy) -> int:
        """Drain hosted `node_ids`, then release them once drained (core/retire.py): a
        deleted fleet leaves gracefully. Returns how many are retiring."""
        store = self.replica.store
        with self.lock:  # the loop thread reads the retirement too
            ids = sorted(set(node_ids) & set(self.node_ids))
            ask = self.retirement.begin(ids, store.latest_index(), store.node, again=drain.forced)
        for node_id in ask:
            self._send(
                LeaderRequest(
                    RequestKind.DRAIN_NODE,
                    request_id=str(uuid.uuid4()),
                    node_ids=(node_id,),
                    drain=drain,
                )
            )
        self._work.set()
        return len(ids)

    def retiring(self) -> int:
        return len(self.retirement)

    def _release_drained(self) -> None:
        with self.lock:
            done = self.retirement.drained(self.replica.store.node)
        if done:
            self.release(done)

    def report(self) -> int:
        """Advance the allocations and send what changed, in one message."""
        with self.lock:
            updates = self.core.tick()
        if updates:
            self._send(LeaderRequest(RequestKind.CLIENT_UPDATES, updates=tuple(updates)))
            self.stats["updates"] += len(updates)
            counts = Counter(u.client_status.value for u in updates)
            for status, count in counts.items():
                self.telemetry.metrics.record_alloc_status(status, count)
        return len(updates)

    def publish_usage(self) -> int:
        """Sample every running allocation and publish what they use as one report on the
        usage stream (split past MAX_SAMPLES_PER_REPORT samples; none for no samples).
        Returns the samples sent."""
        now = self.clock()
        with self.lock:
            used = self.core.usage(now)
            samples = usage_samples(used, now, self._mhz_per_core, self.mhz_per_cpu)
        reports = usage_reports(self.agent_id, samples, MAX_SAMPLES_PER_REPORT)
        if reports:
            # No trace context: a report belongs to no operation's trace.
            pairs = [(REPORT_TYPE, report) for report in reports]
            self.bus.publish(self.names.usage, pairs, trace={}, maxlen=USAGE_STREAM_MAXLEN)
            self.stats["usage_reports"] += len(reports)
            self.stats["usage_samples"] += len(samples)
        return len(samples)

    def _publish_usage_or_log(self) -> None:
        """Usage is telemetry: a driver that fails to measure must not stop the agent's
        reports and heartbeats (a lost connection is the loop's to handle)."""
        try:
            self.publish_usage()
        except redis.ConnectionError:
            raise
        except Exception:
            log.warning("agent %s: usage sampling failed", self.agent_id, exc_info=True)

    def _on_entry(self, entry: LogEntry, store: StateStore) -> None:
        """Allocation records for our nodes, as committed: placements and stops to act on;
        and our own reports coming back, which lets finished runners be forgotten."""
        change = entry.change
        if isinstance(change, UpsertAllocRows | UpsertAllocs):
            mine = records_on_nodes(change, self.core.node_ids)
            if mine:
                envs = self._run_envs(change, mine, store)
                with self.lock:
                    self.core.apply_allocs(mine, store.job_version, envs)
                self._work.set()
                if self.telemetry.enabled and entry.trace.get(""):
                    self._trace_start(entry, mine)
        elif isinstance(change, UpdateClientStatusRows | UpdateAllocsClientStatus):
            if isinstance(change, UpdateClientStatusRows):
                change = change.expanded()
            done = [u.alloc_id for u in change.updates if u.client_status in CLIENT_TERMINAL]
            if done:
                with self.lock:
                    self.core.acknowledge(done)

    def _run_envs(
        self, change: UpsertAllocRows | UpsertAllocs, mine: Sequence[Allocation], store: StateStore
    ) -> dict[str, dict[str, str]]:
        """The cluster variables of the runs' ranks placed here. A run's ranks are placed by
        one plan, so this entry holds all of them, wherever they landed."""
        envs: dict[str, dict[str, str]] = {}
        everyone: list[Allocation] | None = None
        for alloc in mine:
            if alloc.terminal() or alloc.client_status is not ClientStatus.PENDING:
                continue
            job = store.job_version(alloc.namespace, alloc.job_id, alloc.job_version)
            group = job.lookup_task_group(alloc.task_group) if job is not None else None
            if group is None or group.share is None:
                continue
            if everyone is None:
                everyone = (
                    list(change.allocs)
                    if isinstance(change, UpsertAllocs)
                    else [a for g in change.groups for a in g.expand()]
                )
            ranks = [
                a
                for a in everyone
                if a.job_id == alloc.job_id
                and a.namespace == alloc.namespace
                and a.eval_id == alloc.eval_id
                and not a.terminal()
            ]
            info = cluster_info(alloc, ranks, store.node)
            hostfile = self.work_dir / f"{alloc.id}.hostfile"
            try:
                hostfile.parent.mkdir(parents=True, exist_ok=True)
                hostfile.write_text(info.hostfile)
            except OSError:
                log.warning("could not write the MPI hostfile %s", hostfile, exc_info=True)
            envs[alloc.id] = cluster_env(info, str(hostfile))
        return envs

    def _trace_start(self, entry: LogEntry, allocs: Sequence[Allocation]) -> None:
        """One `alloc.start` span per committed plan that placed here, in the eval's trace
        (its parent is the leader's plan.apply, carried by the log entry)."""
        placed = [a for a in allocs if not a.server_terminal()]
        if not placed:
            return
        span = self.telemetry.tracer.start_span(
            c.SPAN_ALLOC_START,
            context=extract({"traceparent": entry.trace[""]}),
            kind=SpanKind.CONSUMER,
            attributes={
                c.EVAL_ID: placed[0].eval_id,
                c.JOB_ID: placed[0].job_id,
                "drover.allocs.started": len(placed),
                "drover.agent.id": self.agent_id,
            },
        )
        span.end()

    def _send(self, request: LeaderRequest) -> None:
        self.bus.publish(self.names.requests, [("LeaderRequest", request)])


def _no_evals(raw: dict[str, Any]) -> bool:
    """The agent's `keep_eval`: it reads no evaluation."""
    return False


def records_on_nodes(
    change: UpsertAllocRows | UpsertAllocs, node_ids: Collection[str]
) -> list[Allocation]:
    """The allocation records of `change` placed on `node_ids`, in log order. In the compact
    form only those records are built: an agent of one node in a large cluster reads every
    plan, and builds its own few allocations only."""
    if isinstance(change, UpsertAllocs):
        return [a for a in change.allocs if a.node_id in node_ids]
    mine: list[Allocation] = []
    for group in change.groups:
        rows = [row for row in group.rows if row[ROW_NODE_ID] in node_ids]
        if rows:
            mine += group.subset(rows).expand()
    return mine
