"""A plan moves onto the fresher state its planner has before it is submitted: placements on
nodes that filled up while the scheduler computed are taken back and placed again, so the
leader commits the plan whole instead of rejecting those nodes (rebase.py)."""

from __future__ import annotations

from typing import Any

from actors.leader.core.inprocess_planner import InProcessPlanner
from actors.state import StateReader, StateStore
from actors.worker.core.scheduler import new_scheduler
from actors.worker.core.scheduler.phases import PhaseLog
from actors.worker.core.scheduler.planner import RefreshingPlanner
from contracts import AllocatedResources, ClientStatus, EvalStatus
from contracts.state_log import (
    AllocClientUpdate,
    UpdateAllocsClientStatus,
    UpsertAllocs,
    UpsertNodes,
)

NODES = 10


class ConcurrentPlanner(InProcessPlanner):
    """While the scheduler computes, "another worker" commits a plan that takes half of
    every node; the scheduler learns of it when it asks for a fresher state (`refreshing`),
    or only from the leader's verdict (a plain planner)."""

    def __init__(self, store: StateStore, filler: Any, *, change_nodes: bool = False) -> None:
        super().__init__(store)
        self.filler = filler
        self.change_nodes = change_nodes
        self.asked = 0

    def commit_concurrent_plan(self) -> None:
        self.store.commit(UpsertAllocs(tuple(self.filler(f"node-{i}") for i in range(NODES))))
        if self.change_nodes:
            node = self.store.node("node-0")
            assert node is not None
            self.store.commit(UpsertNodes((node,)))

    def fresher_state(self, since_index: int) -> StateReader | None:
        self.asked += 1
        if self.asked == 1:
            self.commit_concurrent_plan()
        if self.store.latest_index() <= since_index:
            return None
        return self.store.snapshot()


class LatePlanner(ConcurrentPlanner):
    """The concurrent plan commits after the scheduler last looked: the leader rejects."""

    def submit_plan(self, plan: Any) -> Any:
        if not self.plans:
            self.commit_concurrent_plan()
        return super().submit_plan(plan)

    def fresher_state(self, since_index: int) -> StateReader | None:
        return None


def setup(h: Any, build: Any) -> tuple[Any, Any, Any]:
    h.nodes(NODES, cpu=4000, memory_mb=8192)
    other, _ = h.register(build.job("other", build.group("g", 10, cpu=2000)))
    job, evaluation = h.register(build.job("web", build.group("web", 20, cpu=1000)))

    def filler(node_id: str) -> Any:
        return build.alloc(other, node_id, int(node_id.split("-")[1]), alloc_id=f"o-{node_id}")

    return job, evaluation, filler


def schedule(h: Any, evaluation: Any, planner: Any, build: Any) -> Any:
    scheduler = new_scheduler(
        "service", h.store.snapshot(), planner, now_ns=lambda: build.now, new_id=build.ids("a")
    )
    scheduler.phases = PhaseLog()
    scheduler.process(evaluation)
    return scheduler


def test_placements_on_nodes_filled_meanwhile_move_before_submission(h: Any, build: Any) -> None:
    job, evaluation, filler = setup(h, build)
    planner = ConcurrentPlanner(h.store, filler)
    assert isinstance(planner, RefreshingPlanner)
    scheduler = schedule(h, evaluation, planner, build)

    # Bin packing first put three or four on a few nodes; each now has room for two only.
    assert scheduler.rebases == 1 and scheduler.rebased_nodes >= 1
    assert len(planner.plans) == 1, "one plan, committed whole: no retry"
    assert not planner.results[0].rejected_nodes
    placed = build.placed(planner.plans[0])
    assert sorted(a.name for a in placed) == sorted(f"web.web[{i}]" for i in range(20))
    per_node: dict[str, int] = {}
    for alloc in h.live_allocs(job):
        per_node[alloc.node_id] = per_node.get(alloc.node_id, 0) + 1
    assert per_node == {f"node-{i}": 2 for i in range(NODES)}  # the cluster is exactly full
    assert build.assert_eval(planner, EvalStatus.COMPLETE)
    rebase = [p for p in scheduler.phases.phases if p.name == "rebase"]
    assert len(rebase) == 1
    full, again = rebase[0].attributes["full"], rebase[0].attributes["placed_again"]
    assert full == scheduler.rebased_nodes
    assert 3 * int(full) <= int(again) <= 4 * int(full)  # every one on the full nodes


def test_without_a_fresher_state_the_leader_rejects_and_the_scheduler_retries(
    h: Any, build: Any
) -> None:
    job, evaluation, filler = setup(h, build)
    planner = LatePlanner(h.store, filler)
    scheduler = schedule(h, evaluation, planner, build)
    assert scheduler.rebases == 0
    assert len(planner.plans) == 2 and planner.results[0].rejected_nodes
    assert len(h.live_allocs(job)) == 20
    build.assert_eval(planner, EvalStatus.COMPLETE)


def test_a_plan_is_left_to_the_leader_when_nodes_changed_meanwhile(h: Any, build: Any) -> None:
    job, evaluation, filler = setup(h, build)
    planner = ConcurrentPlanner(h.store, filler, change_nodes=True)
    scheduler = schedule(h, evaluation, planner, build)
    assert planner.asked >= 1 and scheduler.rebases == 0
    assert len(planner.plans) == 2 and planner.results[0].rejected_nodes  # the leader's verdict
    assert len(h.live_allocs(job)) == 20


def test_nothing_committed_meanwhile_leaves_the_plan_alone(h: Any, build: Any) -> None:
    job, evaluation, _filler = setup(h, build)

    class Quiet(ConcurrentPlanner):
        def commit_concurrent_plan(self) -> None:
            pass

    planner = Quiet(h.store, None)
    scheduler = schedule(h, evaluation, planner, build)
    assert planner.asked == 1 and scheduler.rebases == 0
    assert not any(p.name == "rebase" for p in scheduler.phases.phases)
    assert len(planner.plans) == 1 and not planner.results[0].rejected_nodes
    assert len(h.live_allocs(job)) == 20


class Meanwhile(InProcessPlanner):
    """Commits `changes` (a callable) the first time the scheduler asks for a fresher state."""

    def __init__(self, store: StateStore, changes: Any) -> None:
        super().__init__(store)
        self.changes = changes
        self.asked = 0

    def fresher_state(self, since_index: int) -> StateReader | None:
        self.asked += 1
        if self.asked == 1:
            self.changes(self.store)
        return self.store.snapshot() if self.store.latest_index() > since_index else None


def test_a_node_that_was_full_but_has_room_in_the_fresher_state_takes_a_placement_again(
    h: Any, build: Any
) -> None:
    """C was full (the stacks marked it so); meanwhile its allocation completed and B took
    more. The placement taken back from B goes to C, not to a blocked evaluation."""
    h.add_nodes(*(build.node(n, cpu=4000, memory_mb=8192) for n in "ABC"))
    other, _ = h.register(build.job("other", build.group("o", 4, cpu=1000)))
    shape = {n: AllocatedResources(cpu=c, memory_mb=256) for n, c in (("A", 2000), ("B", 2000))}
    h.add_allocs(
        *(
            build.alloc(other, n, i, alloc_id=f"o-{n}", allocated_resources=r)
            for i, (n, r) in enumerate(shape.items())
        ),
        build.alloc(
            other, "C", 2, alloc_id="o-C", allocated_resources=AllocatedResources(cpu=4000)
        ),
    )
    job, evaluation = h.register(build.job("web", build.group("web", 2, cpu=2000)))

    def meanwhile(store: StateStore) -> None:
        store.commit(
            UpdateAllocsClientStatus((AllocClientUpdate("o-C", ClientStatus.COMPLETE, "", 1),))
        )
        more = build.alloc(
            other, "B", 3, alloc_id="o-B2", allocated_resources=AllocatedResources(cpu=1000)
        )
        store.commit(UpsertAllocs((more,)))

    planner = Meanwhile(h.store, meanwhile)
    scheduler = schedule(h, evaluation, planner, build)
    assert scheduler.rebases == 1
    assert len(planner.plans) == 1 and not planner.results[0].rejected_nodes
    assert sorted(a.node_id for a in h.live_allocs(job)) == ["A", "C"]
    assert not planner.created_evals  # nothing blocked
    build.assert_eval(planner, EvalStatus.COMPLETE)


def test_no_rebase_where_the_plan_stops_something_on_a_node_that_moved(h: Any, build: Any) -> None:
    """The allocation the plan stops on A completed meanwhile: the fresher usage already
    released it, so moving A's load would release it twice. The plan goes as it is."""
    h.add_nodes(
        build.node("A", cpu=4000, memory_mb=8192), build.node("B", cpu=4000, memory_mb=8192)
    )
    other, _ = h.register(build.job("other", build.group("o", 4, cpu=1000)))
    h.add_allocs(
        build.alloc(
            other, "A", 0, alloc_id="o-A", allocated_resources=AllocatedResources(cpu=1000)
        ),
        build.alloc(
            other, "B", 1, alloc_id="o-B", allocated_resources=AllocatedResources(cpu=2000)
        ),
    )
    old, _ = h.register(build.job("web", build.group("old", 1, cpu=1000)))
    h.add_allocs(build.alloc(old, "A", 0, alloc_id="X"))
    _, evaluation = h.register(build.job("web", build.group("new", 1, cpu=2000)))  # X stops

    def meanwhile(store: StateStore) -> None:
        store.commit(
            UpdateAllocsClientStatus((AllocClientUpdate("X", ClientStatus.COMPLETE, "", 1),))
        )
        store.commit(
            UpsertAllocs(
                (
                    build.alloc(
                        other,
                        "A",
                        2,
                        alloc_id="o-A2",
                        allocated_resources=AllocatedResources(cpu=1500),
                    ),
                    build.alloc(
                        other,
                        "B",
                        3,
                        alloc_id="o-B2",
                        allocated_resources=AllocatedResources(cpu=1000),
                    ),
                )
            )
        )

    planner = Meanwhile(h.store, meanwhile)
    scheduler = schedule(h, evaluation, planner, build)
    assert planner.asked >= 1 and scheduler.rebases == 0
    first = planner.plans[0]
    assert "X" in {a.id for allocs in first.node_update.values() for a in allocs}
