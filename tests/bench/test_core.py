"""The overcommit audit every runtime test and benchmark relies on (`bench.core.overcommitted`)
finds what it is meant to find, ignores what the leader ignores, and agrees with the leader's
plan re-check on what a live allocation is."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from actors.leader.core.plan_eval import evaluate_plan
from actors.state import StateStore
from bench.core import overcommitted, run
from contracts import (
    AllocatedDevice,
    AllocatedResources,
    Allocation,
    ClientStatus,
    DesiredStatus,
    DeviceInstance,
    Node,
    NodeDeviceResource,
    NodeResources,
    Plan,
)
from contracts.resources import ReservedResources
from contracts.state_log import UpsertAllocs, UpsertNodes

GPUS = NodeDeviceResource("nvidia", "gpu", "A100", (DeviceInstance("g0"), DeviceInstance("g1")))
NODE = Node(
    id="n1",
    node_resources=NodeResources(cpu=4000, memory_mb=8192, disk_mb=10_000, devices=(GPUS,)),
    reserved_resources=ReservedResources(cpu=500, memory_mb=1024, disk_mb=1000),
)
# What n1 offers: capacity minus reserved.
FREE = AllocatedResources(cpu=3500, memory_mb=7168, disk_mb=9000)


def alloc(
    alloc_id: str,
    resources: AllocatedResources,
    node_id: str = "n1",
    desired: DesiredStatus = DesiredStatus.RUN,
    client: ClientStatus = ClientStatus.RUNNING,
) -> Allocation:
    return Allocation(
        id=alloc_id,
        name=f"j.g[{alloc_id}]",
        node_id=node_id,
        job_id="j",
        task_group="g",
        allocated_resources=resources,
        desired_status=desired,
        client_status=client,
    )


def gpus(*ids: str) -> tuple[AllocatedDevice, ...]:
    return (AllocatedDevice("nvidia", "gpu", "A100", ids),)


def test_a_node_filled_exactly_to_what_it_offers_is_not_overcommitted() -> None:
    half = AllocatedResources(cpu=1750, memory_mb=3584, disk_mb=4500)
    allocs = [alloc("a", dataclasses.replace(half, devices=gpus("g0"))), alloc("b", half)]
    assert overcommitted([NODE], allocs) == []
    assert overcommitted([NODE], []) == []


@pytest.mark.parametrize("dimension", ["cpu", "memory_mb", "disk_mb"])
def test_one_unit_past_what_a_node_offers_is_found_in_every_dimension(dimension: str) -> None:
    one_more: dict[str, Any] = {dimension: getattr(FREE, dimension) + 1}
    over = dataclasses.replace(FREE, **one_more)
    assert overcommitted([NODE], [alloc("a", FREE)]) == []
    # Within the raw capacity, past capacity minus reserved: reserved resources count.
    assert overcommitted([NODE], [alloc("a", over)]) == ["n1"]
    # Summed over allocations, not per allocation.
    just_one: dict[str, Any] = {dimension: 1}
    rest = dataclasses.replace(AllocatedResources(), **just_one)
    assert overcommitted([NODE], [alloc("a", FREE), alloc("b", rest)]) == ["n1"]


def test_a_device_instance_held_twice_or_missing_from_the_node_is_found() -> None:
    small = AllocatedResources(cpu=100, memory_mb=100)
    one, other = (dataclasses.replace(small, devices=gpus(i)) for i in ("g0", "g1"))
    assert overcommitted([NODE], [alloc("a", one), alloc("b", other)]) == []
    assert overcommitted([NODE], [alloc("a", one), alloc("b", one)]) == ["n1"]
    both_twice = dataclasses.replace(small, devices=gpus("g0", "g0"))
    assert overcommitted([NODE], [alloc("a", both_twice)]) == ["n1"]
    elsewhere = dataclasses.replace(small, devices=gpus("g7"))
    assert overcommitted([NODE], [alloc("a", elsewhere)]) == ["n1"]


def test_an_allocation_on_an_unknown_node_is_found() -> None:
    small = AllocatedResources(cpu=100, memory_mb=100)
    found = overcommitted([NODE], [alloc("a", small), alloc("b", small, node_id="gone")])
    assert found == ["gone"]
    assert overcommitted([], [alloc("a", small)]) == ["n1"]


def test_only_live_allocations_on_an_unknown_node_count() -> None:
    small = AllocatedResources(cpu=100, memory_mb=100)
    stopped = alloc("a", small, node_id="gone", desired=DesiredStatus.STOP)
    assert overcommitted([NODE], [stopped]) == []


# Every combination of the two sides' statuses: terminal on either side releases the
# resources (Nomad's Allocation.TerminalStatus, as the plan re-check and the store's usage).
STATUSES = [(d, c) for d in DesiredStatus for c in ClientStatus]


@pytest.mark.parametrize(
    ("desired", "client"), STATUSES, ids=[f"{d.value}-{c.value}" for d, c in STATUSES]
)
def test_terminal_allocations_are_ignored_live_ones_count(
    desired: DesiredStatus, client: ClientStatus
) -> None:
    server_terminal = desired is not DesiredStatus.RUN
    client_terminal = client in (ClientStatus.COMPLETE, ClientStatus.FAILED, ClientStatus.LOST)
    holder = alloc(
        "old", dataclasses.replace(FREE, devices=gpus("g0")), desired=desired, client=client
    )
    newcomer = alloc("new", dataclasses.replace(FREE, devices=gpus("g0")))
    found = overcommitted([NODE], [holder, newcomer])
    assert found == ([] if server_terminal or client_terminal else ["n1"])


@pytest.mark.parametrize(
    ("desired", "client"), STATUSES, ids=[f"{d.value}-{c.value}" for d, c in STATUSES]
)
def test_the_audit_agrees_with_the_leaders_plan_recheck(
    desired: DesiredStatus, client: ClientStatus
) -> None:
    """A placement that needs the whole node is committed by the leader exactly when the
    allocation already there is not live; the audit flags the result exactly when not."""
    store = StateStore()
    store.commit(UpsertNodes((NODE,)))
    holder = alloc(
        "old", dataclasses.replace(FREE, devices=gpus("g0")), desired=desired, client=client
    )
    store.commit(UpsertAllocs((holder,)))
    newcomer = alloc(
        "new", dataclasses.replace(FREE, devices=gpus("g0")), client=ClientStatus.PENDING
    )
    result = evaluate_plan(store.snapshot(), Plan(eval_id="e", node_allocation={"n1": (newcomer,)}))
    leader_commits = not result.rejected_nodes
    audit_flags = overcommitted(store.nodes(), [*store.allocs(), newcomer]) == ["n1"]
    assert leader_commits is not audit_flags
    assert leader_commits is holder.terminal()


def test_the_core_bench_at_a_small_scale_overcommits_nothing() -> None:
    result = run(nodes=20, jobs=4, count=10)
    assert result["placements"] == 40
    assert result["overcommitted_nodes"] == 0
