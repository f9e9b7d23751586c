"""A node pool whose room and placement come from drover's real scheduling core.

`NodePool` (cluster.py) counts slots: a node holds `allocs_per_node` allocations, so free
room anywhere is room. Real nodes have resources, and a node's free room is only usable by
an allocation that fits in it whole: two nodes with 2000 MHz free each cannot hold three
1300 MHz allocations, though 4000 >= 3900. `CorePool` keeps NodePool's autoscaling rules
(provisioning delay, fleet limit, idle-node removal, scale-in order, `ClusterStats`) but
asks the core (`new_scheduler` with `InProcessPlanner` against one `StateStore`, in
process, as bench/gang.py drives it) where allocations go and whether they fit, so that
fragmentation and blocked allocations are the scheduler's own. A per-shape background load
(reserved resources) leaves each node an amount of room that the ask need not divide.

The group is one service job: a scale-out registers it with its new count and processes
one evaluation (how drover and Nomad scale a group), a node becoming ready re-queues one, so
an event costs one scheduler invocation (two when the nodes it asks for are ready at once),
not one per allocation; the plan of a new count also updates every live allocation to the
new job version in place, as Nomad's does. Scale-in is NodePool's: blocked allocations
first, then the latest ready, which are reported complete as a client would (the scheduler
is not asked to choose; the job's count follows at the next evaluation). Processed
evaluations and finished allocations are garbage-collected at once, so the store holds only
the live cluster.
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import itertools
import math
from collections import deque
from dataclasses import dataclass, field

from actors.agent.core.fingerprint import FleetSpec, simulated_nodes
from actors.experiments.core.cluster import Allocations, DelayFn
from actors.experiments.core.pool_run import PoolRun, check_rules
from actors.leader.core.inprocess_planner import InProcessPlanner
from actors.state import StateStore
from actors.worker.core.scheduler import new_scheduler
from contracts import ClientStatus, EvalStatus, Evaluation, Job, JobType, TriggeredBy
from contracts.job import Task, TaskGroup
from contracts.node import Node
from contracts.resources import ReservedResources, Resources
from contracts.state_log import (
    AllocClientUpdate,
    DeleteEvals,
    DeleteNodes,
    UpdateAllocsClientStatus,
    UpsertEvals,
    UpsertJob,
    UpsertNodes,
)

JOB_ID = "group"
DEFAULT_ASK = Resources(cpu=1000, memory_mb=1024)


@dataclass(frozen=True, slots=True)
class NodeShape:
    """A node's size and its background load (held by other work, never offered)."""

    cpu_mhz: int = 4000
    memory_mb: int = 8192
    load_cpu: int = 0
    load_memory_mb: int = 0

    def fit(self, ask: Resources) -> int:
        """How many `ask`s a fresh node of this shape holds after its background load."""
        room = []
        if ask.cpu > 0:
            room.append((self.cpu_mhz - self.load_cpu) // ask.cpu)
        if ask.memory_mb > 0:
            room.append((self.memory_mb - self.load_memory_mb) // ask.memory_mb)
        return max(0, min(room)) if room else 0


@dataclass(frozen=True, slots=True)
class CorePool:
    """NodePool's rules with resource-sized nodes, placed by the real scheduler.

    Each allocation asks for `ask`; the n-th node takes `shapes[(n - 1) % len(shapes)]`.
    A node asked for at t joins the scheduler's store at t + `node_delay_s` (the scheduler
    sees ready nodes only); the allocations it was asked for wait for it without being
    blocked, and their start delay runs while it provisions, as in NodePool. What the core
    cannot place and no provisioning node will take is blocked, retried oldest first when
    a node is ready. Nodes asked for: enough fresh nodes of the next shapes to hold what is
    left, within `max_nodes`."""

    ask: Resources = DEFAULT_ASK
    shapes: tuple[NodeShape, ...] = (NodeShape(),)
    initial_nodes: int = 0
    min_nodes: int = 0
    max_nodes: int | None = None
    node_delay_s: float = 0.0
    node_idle_s: float = 300.0

    def __post_init__(self) -> None:
        if not self.shapes:
            raise ValueError("need at least one node shape")
        if any(s.fit(self.ask) < 1 for s in self.shapes):
            raise ValueError("every node shape must hold at least one allocation")
        check_rules(self)

    def start(self, count: int) -> Allocations:
        return _CoreRun(count, rules=self)


@dataclass(slots=True)
class _Node:
    seq: int
    node: Node
    fit: int  # allocations it holds fresh
    ready_s: float
    used: int = 0
    idle_from: float = 0.0  # when it last became empty (and ready); valid while used == 0


@dataclass(slots=True)
class _Wait:
    """An allocation not placed yet: its start delay, and since when that delay has been
    running (set once a provisioning node is on its way for it)."""

    delay: float
    since: float | None = None


@dataclass(slots=True)
class _CoreRun(PoolRun[_Node, CorePool]):
    start_count: int
    store: StateStore = field(default_factory=StateStore)
    planner: InProcessPlanner = field(init=False)
    seq_of: dict[str, int] = field(default_factory=dict)  # node id -> seq
    alloc_ids: list[str] = field(default_factory=list)  # of each `ready_at` entry
    node_of: dict[str, int] = field(default_factory=dict)  # alloc id -> node seq
    waiting: deque[_Wait] = field(default_factory=deque)  # oldest first
    provisioning: list[tuple[float, int]] = field(default_factory=list)  # heap (ready, seq)
    coming: int = 0  # allocations the provisioning nodes will hold
    counted: int = 0  # blocked allocations already counted in `blocked_allocs`
    ids: int = 0
    now_s: float = 0.0
    evaluations: int = 0  # scheduler invocations
    registered: int = -1  # the count the group's job was last registered with

    def __post_init__(self) -> None:
        self.planner = InProcessPlanner(self.store)
        for _ in range(self.rules.initial_nodes):
            self._add_node(0.0, 0.0)
        self.waiting.extend(_Wait(0.0) for _ in range(self.start_count))
        self._place_blocked(0.0, settle=True)
        self.totals.nodes_provisioned = 0

    # -- the protocol -----------------------------------------------------------------------

    @property
    def count(self) -> int:
        return len(self.ready_at) + len(self.waiting)

    @property
    def blocked(self) -> int:
        """Waiting allocations that no provisioning node will take."""
        return max(0, len(self.waiting) - self.coming)

    def scale(self, t: float, target: int, delay: DelayFn) -> None:
        count = self.count
        if target > count:
            self.waiting.extend(_Wait(delay()) for _ in range(target - count))
        else:
            drop = count - target
            while drop and self.waiting:
                self.waiting.pop()
                drop -= 1
            if drop:
                self._stop(t, drop)
        self._place_blocked(t)
        self._due(t)

    def _next_node_ready(self) -> float | None:
        return self.provisioning[0][0] if self.provisioning else None

    def _blocked_now(self) -> int:
        return self.blocked

    # -- nodes ------------------------------------------------------------------------------

    def _add_node(self, t: float, ready_s: float) -> _Node:
        self.seq += 1
        shape = self.rules.shapes[(self.seq - 1) % len(self.rules.shapes)]
        (node,) = simulated_nodes(
            FleetSpec(f"n{self.seq}", 1, cpu_mhz=shape.cpu_mhz, memory_mb=shape.memory_mb)
        )
        load = ReservedResources(cpu=shape.load_cpu, memory_mb=shape.load_memory_mb)
        node = dataclasses.replace(node, reserved_resources=load)
        entry = _Node(self.seq, node, shape.fit(self.rules.ask), ready_s, idle_from=ready_s)
        self.seq_of[node.id] = entry.seq
        if ready_s > t:
            heapq.heappush(self.provisioning, (ready_s, entry.seq))
            self.coming += entry.fit
        else:
            self.store.commit(UpsertNodes((node,)))
        self._joined(entry)
        return entry

    def _due(self, p: float) -> None:
        """Nodes ready at `p` join the store and take the waiting; idle nodes whose time is
        up leave it."""
        joined = []
        while self.provisioning and self.provisioning[0][0] <= p:
            node = self.nodes[heapq.heappop(self.provisioning)[1]]
            self.coming -= node.fit
            joined.append(node.node)
        if joined:
            self.store.commit(UpsertNodes(tuple(joined)))
            if self.waiting:  # before removals: a node asked for is not idle on arrival
                self._place_blocked(p)
        gone = [node.node.id for node in self._expired(p)]
        if gone:
            self.store.commit(DeleteNodes(tuple(gone)))

    # -- placement --------------------------------------------------------------------------

    def _place_blocked(self, t: float, *, settle: bool = False) -> None:
        """Let the core place the waiting allocations, oldest first, then ask for the nodes
        that what is left needs (`settle`: ready at once, the run's settled start)."""
        if self.waiting:
            self._schedule(t)
        if self.blocked:
            ready_now = settle or self.rules.node_delay_s == 0
            limit = math.inf if self.rules.max_nodes is None else self.rules.max_nodes
            added = 0
            short = self.blocked
            while short > 0 and len(self.nodes) < limit:
                node = self._add_node(t, t if ready_now else t + self.rules.node_delay_s)
                short -= node.fit
                added += 1
            if added and ready_now:
                self._schedule(t)
            # The delay of those a provisioning node will take runs from now.
            for wait in itertools.islice(self.waiting, self.coming):
                if wait.since is None:
                    wait.since = t
        blocked = self.blocked
        if blocked > self.counted:
            self.totals.blocked_allocs += blocked - self.counted
        self.counted = blocked

    def _schedule(self, t: float) -> None:
        """One evaluation of the group's job registered with its full count; what it places
        takes the oldest waiting allocations."""
        self.now_s = t
        # A new count is a new job version (the scheduler updates every allocation to it in
        # place); a retry at the same count is a re-queued evaluation, as an unblocked one.
        changed = self.count != self.registered
        evaluation = Evaluation(
            id=self._new_id(),
            type="service",
            job_id=JOB_ID,
            triggered_by=TriggeredBy.JOB_REGISTER if changed else TriggeredBy.QUEUED_ALLOCS,
            status=EvalStatus.PENDING,
        )
        if changed:
            self.registered = self.count
            self.store.commit(UpsertJob(self._job(self.count), evals=(evaluation,)))
        else:
            self.store.commit(UpsertEvals((evaluation,)))
        planner = self.planner
        scheduler = new_scheduler(
            "service", self.store.snapshot(), planner, now_ns=self._now_ns, new_id=self._new_id
        )
        stored = self.store.eval(evaluation.id)
        assert stored is not None
        scheduler.process(stored)
        self.evaluations += 1
        placed = [
            a
            for r in planner.results
            for allocs in r.node_allocation.values()
            for a in allocs
            if a.id not in self.node_of
        ]
        stopped = [a.id for r in planner.results for us in r.node_update.values() for a in us]
        done = [evaluation.id, *(e.id for e in planner.created_evals)]
        for kept in (planner.plans, planner.results, planner.evals, planner.created_evals):
            kept.clear()
        planner.reblocked.clear()
        self.store.commit(DeleteEvals(tuple(done)))
        if stopped or len(placed) > len(self.waiting):
            raise RuntimeError(f"the core stopped {stopped} or over-placed {len(placed)}")
        for alloc in sorted(placed, key=lambda a: a.name):
            wait = self.waiting.popleft()
            start = t if wait.since is None else wait.since
            ready_s = max(start + wait.delay, t)
            node = self.nodes[self.seq_of[alloc.node_id]]
            node.used += 1
            i = bisect.bisect_right(self.ready_at, ready_s)
            self.ready_at.insert(i, ready_s)
            self.alloc_ids.insert(i, alloc.id)
            self.node_of[alloc.id] = node.seq

    def _stop(self, t: float, drop: int) -> None:
        """Report the `drop` latest-ready allocations complete and forget them."""
        ids = self.alloc_ids[-drop:]
        del self.alloc_ids[-drop:]
        del self.ready_at[-drop:]
        updates = []
        for alloc_id in ids:
            node = self.nodes[self.node_of.pop(alloc_id)]
            updates.append(AllocClientUpdate(alloc_id, ClientStatus.COMPLETE, node_id=node.node.id))
            self._emptied(t, node)
        self.store.commit(UpdateAllocsClientStatus(tuple(updates)))
        self.store.commit(DeleteEvals((), tuple(ids)))

    # -- identities -------------------------------------------------------------------------

    def _job(self, count: int) -> Job:
        task = Task("task", "mock", {}, resources=self.rules.ask)
        group = TaskGroup("group", count=count, tasks=(task,))
        return Job(id=JOB_ID, name=JOB_ID, type=JobType.SERVICE, task_groups=(group,))

    def _new_id(self) -> str:
        self.ids += 1
        n = self.ids
        return f"{n:08x}-0000-4000-8000-{(n * 0x9E3779B97F4A7C15) % (1 << 48):012x}"

    def _now_ns(self) -> int:
        return int(self.now_s * 1e9)
