"""Runs on instance blocks and gangs (share.py), with dstack's assignment tests ported
(reference dstack.md §7 items 7-12, and #2650 with its negative variant).

Instances are simulated fleet nodes (their blocks are `drover/block/<fleet>` devices); plans
go through the real plan applier (`InProcessPlanner`), so the leader's re-check is exercised.
"""

from __future__ import annotations

import dataclasses

import pytest

from actors.agent.core import FleetSpec, simulated_nodes
from actors.leader.core.inprocess_planner import InProcessPlanner
from actors.leader.core.plan_eval import DEVICE_OVERSUBSCRIBED
from actors.worker.core.scheduler import new_scheduler
from actors.worker.core.scheduler.share import (
    busy_blocks,
    instance_of,
    share_fits,
    smallest_share,
)
from contracts import (
    EvalStatus,
    JobType,
    NodeEligibility,
    NodeStatus,
    Resources,
    Task,
    TaskGroup,
    TriggeredBy,
)
from contracts.share import BLOCK_TYPE, IntRange, ShareRequest

GB = 1024


def fleet(name: str, count: int, *, cpus: int, memory_gb: int, gpus: int = 0, **kw):
    return simulated_nodes(
        FleetSpec(
            name, count, cpu_mhz=cpus * 1000, memory_mb=memory_gb * GB, gpus=gpus,
            gpu_model="A100" if gpus else "", gpu_memory="80 GiB" if gpus else "", **kw,
        )
    )  # fmt: skip


def run_job(build, name: str, request: ShareRequest, nodes: int = 1, **kw):
    group = TaskGroup(
        name,
        count=nodes,
        tasks=(Task("rank", "mock", {"run_for": "1h"}, resources=Resources(0, 0)),),
        share=dataclasses.replace(request, gang=nodes > 1),
    )
    return build.job(name, group, type=JobType.BATCH, all_at_once=True, **kw)


def busy(h, node) -> int:
    instance = instance_of(h.store.node(node.id))
    return busy_blocks(instance, h.store.node_usage(node.id).device_ids)


def block_ids(alloc) -> tuple[str, ...]:
    return next(d.device_ids for d in alloc.allocated_resources.devices if d.type == BLOCK_TYPE)


def gpu_ids(alloc) -> tuple[str, ...]:
    devices = alloc.allocated_resources.devices
    return tuple(i for d in devices if d.type == "gpu" for i in d.device_ids)


ONE_GPU = ShareRequest(cpu=IntRange(1), memory_mb=IntRange(1 * GB), gpu_count=IntRange(1, 2))


# -- block sizing and shares ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cpus", "gpus", "blocks", "total"),
    [(32, 8, 1, 1), (32, 8, 4, 4), (32, 8, "auto", 8), (4, 8, "auto", 4), (32, 0, "auto", 32)],
)
def test_instances_carry_their_blocks_as_devices(cpus, gpus, blocks, total):
    (node,) = fleet("f", 1, cpus=cpus, memory_gb=64, gpus=gpus, blocks=blocks)
    instance = instance_of(node)
    assert instance is not None and instance.total_blocks == total
    assert len(instance.gpu_ids) == gpus
    assert node.scheduling_eligibility is NodeEligibility.ELIGIBLE


def test_an_instance_that_cannot_be_split_offers_nothing_and_says_why():
    (node,) = fleet("f", 1, cpus=6, memory_gb=64, gpus=8, blocks="auto")
    assert instance_of(node) is None
    assert node.scheduling_eligibility is NodeEligibility.INELIGIBLE
    assert "6 CPUs and 8 GPUs" in node.status_description


def test_smallest_fitting_share_among_free_blocks():
    """dstack test_returns_shared_block_offer_for_selected_instance: `cpu: 1`, T=2, busy=1."""
    instance = instance_of(fleet("f", 1, cpus=2, memory_gb=4, blocks=2)[0])
    request = ShareRequest(cpu=IntRange(1, 1), memory_mb=IntRange(1 * GB))
    assert smallest_share(request, instance, busy_blocks=1) == 1
    assert smallest_share(request, instance, busy_blocks=2) is None
    # A gang rank takes the host whole, and `cpu: 1` (max 1) does not match a 2-CPU host.
    assert smallest_share(request, instance, 0, whole=True) is None
    assert share_fits(ShareRequest(cpu=IntRange(1), memory_mb=IntRange(GB)), instance, 2)


def test_gpu_names_vendor_and_memory_are_matched_on_the_share():
    instance = instance_of(fleet("f", 1, cpus=32, memory_gb=128, gpus=8, blocks=4)[0])
    two = IntRange(2, 2)
    assert share_fits(ShareRequest(gpu_count=two, gpu_names=("a100",)), instance, 1)
    assert not share_fits(ShareRequest(gpu_count=two, gpu_names=("H100",)), instance, 1)
    assert not share_fits(ShareRequest(gpu_count=two, gpu_vendor="amd"), instance, 1)
    assert share_fits(ShareRequest(gpu_count=two, gpu_memory_mb=IntRange(80 * GB)), instance, 1)
    assert not share_fits(ShareRequest(gpu_count=two, gpu_memory_mb=IntRange(81 * GB)), instance, 1)
    total = IntRange(160 * GB, 160 * GB)
    assert share_fits(ShareRequest(gpu_count=two, gpu_total_memory_mb=total), instance, 1)
    # `gpu: 0` only matches shares without GPUs.
    assert not share_fits(ShareRequest(gpu_count=IntRange(0, 0)), instance, 1)


def test_a_fingerprinted_instance_offers_its_disk_size_not_its_free_space():
    """dstack offers an instance's disk size; a Ray machine's DiskMB is Nomad's free space,
    its size the storage fingerprint's `unique.storage.bytestotal`."""
    (node,) = fleet("f", 1, cpus=2, memory_gb=4, disk_mb=80 * GB)
    hundred = ShareRequest(cpu=IntRange(1), memory_mb=IntRange(GB), disk_mb=IntRange(100 * GB))
    assert instance_of(node).offer.disk_gb == 80
    assert not share_fits(hundred, instance_of(node), 1)
    assert share_fits(dataclasses.replace(hundred, disk_mb=IntRange(80 * GB)), instance_of(node), 1)
    total = str(200 * GB * 1024 * 1024)
    machine = dataclasses.replace(
        node, attributes={**node.attributes, "unique.storage.bytestotal": total}
    )
    assert instance_of(machine).offer.disk_gb == 200
    assert share_fits(hundred, instance_of(machine), 1)


# -- one rank ---------------------------------------------------------------------------------


def test_assigns_job_to_shared_instance(h, build):
    """dstack test_assigns_job_to_shared_instance: 8 GPU / 64 CPU / 128GB, T=4, one block
    busy; a job that fits one block is assigned and the instance goes 1 -> 2 busy."""
    (node,) = h.add_nodes(*fleet("f", 1, cpus=64, memory_gb=128, gpus=8, blocks=4))
    first, ev = h.register(run_job(build, "first", ONE_GPU))
    h.process(ev)
    assert busy(h, node) == 1
    _job, ev = h.register(run_job(build, "second", ONE_GPU))
    planner = h.process(ev)
    (alloc,) = build.placed(planner.plans[0])
    assert busy(h, node) == 2
    # The share: a quarter of the instance, and GPUs by device ID disjoint from the first's.
    assert alloc.allocated_resources.cpu == 16_000
    assert alloc.allocated_resources.memory_mb == 32 * GB
    assert len(gpu_ids(alloc)) == 2
    (other,) = h.live_allocs(first)
    assert not set(gpu_ids(alloc)) & set(gpu_ids(other))
    assert not set(block_ids(alloc)) & set(block_ids(other))


def test_single_ranks_pack_partly_busy_instances_first(h, build):
    nodes = h.add_nodes(*fleet("f", 3, cpus=8, memory_gb=32, blocks=4))
    request = ShareRequest(cpu=IntRange(2, 2), memory_mb=IntRange(GB))
    for i in range(4):
        _, ev = h.register(run_job(build, f"r{i}", request))
        h.process(ev)
    assert sorted(busy(h, n) for n in nodes) == [0, 0, 4]


def test_a_rank_that_fits_no_free_blocks_waits_blocked(h, build):
    (_node,) = h.add_nodes(*fleet("f", 1, cpus=2, memory_gb=4, blocks=2))
    request = ShareRequest(cpu=IntRange(2), memory_mb=IntRange(GB))
    _, ev = h.register(run_job(build, "a", request))
    h.process(ev)
    _, ev = h.register(run_job(build, "b", request))
    planner = h.process(ev)
    assert planner.plans == [] or not build.placed(planner.plans[0])
    assert planner.created_evals and planner.created_evals[0].status is EvalStatus.BLOCKED
    failed = planner.evals[-1].failed_tg_allocs["b"]
    assert failed.dimension_exhausted == {"blocks": 1}


def test_runs_only_use_the_fleets_they_name(h, build):
    h.add_nodes(*fleet("a", 1, cpus=4, memory_gb=8), *fleet("b", 1, cpus=4, memory_gb=8))
    request = ShareRequest(cpu=IntRange(1), memory_mb=IntRange(GB), fleets=("b",))
    _, ev = h.register(run_job(build, "r", request))
    (alloc,) = build.placed(h.process(ev).plans[0])
    assert alloc.node_name.startswith("b-")


# -- gangs ------------------------------------------------------------------------------------


def test_assigns_multi_node_job_to_whole_shared_instances(h, build):
    """dstack test_assigns_multi_node_job_to_shared_instance: idle T=4 instances, `nodes: 2`:
    each rank takes a whole instance (all 4 blocks, all 8 GPUs)."""
    nodes = h.add_nodes(
        *fleet("c", 2, cpus=64, memory_gb=128, gpus=8, blocks=4, placement="cluster")
    )
    _job, ev = h.register(run_job(build, "train", ONE_GPU.__class__(gpu_count=IntRange(1)), 2))
    planner = h.process(ev)
    allocs = build.placed(planner.plans[0])
    assert sorted(a.index for a in allocs) == [0, 1]
    assert {a.node_id for a in allocs} == {n.id for n in nodes}
    assert [busy(h, n) for n in nodes] == [4, 4]
    assert all(len(gpu_ids(a)) == 8 for a in allocs)
    assert planner.plans[0].all_at_once


def test_issue_2650_multi_node_run_on_idle_block_split_instances(h, build):
    """dstack #2650 (test_assigns_multinode_jobs_to_specific_shared_ssh_instances): a cluster
    fleet of 2 instances with 2 CPUs and 2 GB, `blocks: auto`; a task with `nodes: 2`,
    `cpu: 1..`, `memory: 1GB..`, `gpu: 0` runs on both, each shown 2/2 busy."""
    nodes = h.add_nodes(*fleet("c", 2, cpus=2, memory_gb=2, blocks="auto", placement="cluster"))
    request = ShareRequest(cpu=IntRange(1), memory_mb=IntRange(GB), gpu_count=IntRange(0, 0))
    job, ev = h.register(run_job(build, "iperf", request, 2))
    h.process(ev)
    allocs = h.live_allocs(job)
    assert len(allocs) == 2 and build.distinct(a.node_id for a in allocs)
    assert [busy(h, n) for n in nodes] == [2, 2]


def test_issue_2650_negative_a_busy_block_makes_the_gang_wait(h, build):
    """One instance has a busy block: the gang is not placed at all (nothing committed) and
    the evaluation waits blocked; it runs once the block is free."""
    nodes = h.add_nodes(*fleet("c", 2, cpus=2, memory_gb=2, blocks="auto", placement="cluster"))
    small = ShareRequest(cpu=IntRange(1, 1), memory_mb=IntRange(GB))
    _blocker, ev = h.register(run_job(build, "small", small))
    h.process(ev)
    assert sorted(busy(h, n) for n in nodes) == [0, 1]
    request = ShareRequest(cpu=IntRange(1), memory_mb=IntRange(GB), gpu_count=IntRange(0, 0))
    job, ev = h.register(run_job(build, "iperf", request, 2))
    planner = h.process(ev)
    assert h.live_allocs(job) == []
    assert all(not build.placed(p) for p in planner.plans)
    assert planner.created_evals[0].status is EvalStatus.BLOCKED
    assert planner.evals[-1].failed_tg_allocs["iperf"].dimension_exhausted == {
        "instance not idle": 1
    }
    assert sorted(busy(h, n) for n in nodes) == [0, 1]


def test_multinode_does_not_count_blocks_as_nodes(h, build):
    """dstack test_multinode_does_not_count_blocks_as_nodes / test_does_not_assign_multinode_
    job_without_enough_specific_instances: one idle 2-block host and `nodes: 2` -> nothing."""
    (node,) = h.add_nodes(*fleet("c", 1, cpus=2, memory_gb=4, blocks=2, placement="cluster"))
    request = ShareRequest(cpu=IntRange(1), memory_mb=IntRange(GB))
    job, ev = h.register(run_job(build, "two", request, 2))
    h.process(ev)
    assert h.live_allocs(job) == [] and busy(h, node) == 0


def test_gangs_need_a_cluster_fleet_and_stay_in_one_fleet(h, build):
    h.add_nodes(*fleet("any", 4, cpus=2, memory_gb=4))
    h.add_nodes(*fleet("c1", 1, cpus=2, memory_gb=4, placement="cluster"))
    h.add_nodes(*fleet("c2", 1, cpus=2, memory_gb=4, placement="cluster"))
    request = ShareRequest(cpu=IntRange(1), memory_mb=IntRange(GB))
    job, ev = h.register(run_job(build, "two", request, 2))
    planner = h.process(ev)
    assert h.live_allocs(job) == []  # four idle `any` instances and one per cluster fleet
    assert (
        planner.evals[-1]
        .failed_tg_allocs["two"]
        .dimension_exhausted["fleet placement is not cluster"]
        == 4
    )
    h.add_nodes(*fleet("c2", 2, cpus=2, memory_gb=4, placement="cluster"))
    planner = h.process(h.new_eval(job))
    placed = build.placed(planner.plans[0])
    assert {a.node_name.rsplit("-", 1)[0] for a in placed} == {"c2"}


# -- the leader's re-check ---------------------------------------------------------------------


def _schedule_on(build, snapshot, ev, planner):
    scheduler = new_scheduler(ev.type, snapshot, planner, new_id=build.ids(ev.id))
    scheduler.process(ev)


def test_two_concurrent_plans_never_hand_out_one_block(h, build):
    """Two workers schedule from the same snapshot, each taking the instance's last free
    block: the leader commits the first and rejects the second (device oversubscribed)."""
    (node,) = h.add_nodes(*fleet("f", 1, cpus=2, memory_gb=4, blocks=2))
    request = ShareRequest(cpu=IntRange(1, 1), memory_mb=IntRange(GB))
    _, ev1 = h.register(run_job(build, "a", request))
    _, ev2 = h.register(run_job(build, "b", request))
    _, ev0 = h.register(run_job(build, "c", request))
    h.process(ev0)  # one block taken: one left
    snapshot = h.store.snapshot()
    first, second = InProcessPlanner(h.store), InProcessPlanner(h.store)
    _schedule_on(build, snapshot, ev1, first)
    _schedule_on(build, snapshot, ev2, second)
    assert build.placed(first.plans[0]) and first.results[0].node_allocation
    rejected = second.results[0].rejected_nodes
    assert [r.reason for r in rejected] == [DEVICE_OVERSUBSCRIBED]
    assert busy(h, node) == 2
    assert len({a.id for n in (node,) for a in h.store.allocs_by_node(n.id)}) == 2


def test_a_gang_is_committed_whole_or_not_at_all(h, build):
    """Two gangs scheduled from one snapshot want the same two idle instances: the second
    plan is refused entirely (all at once), never half committed."""
    nodes = h.add_nodes(*fleet("c", 2, cpus=2, memory_gb=4, placement="cluster"))
    request = ShareRequest(cpu=IntRange(1), memory_mb=IntRange(GB))
    job1, ev1 = h.register(run_job(build, "g1", request, 2))
    job2, ev2 = h.register(run_job(build, "g2", request, 2))
    snapshot = h.store.snapshot()
    first, second = InProcessPlanner(h.store), InProcessPlanner(h.store)
    _schedule_on(build, snapshot, ev1, first)
    _schedule_on(build, snapshot, ev2, second)
    assert len(h.live_allocs(job1)) == 2
    assert h.live_allocs(job2) == []
    assert not second.results[0].node_allocation
    assert [busy(h, n) for n in nodes] == [1, 1]


# -- review fixes -------------------------------------------------------------------------------


def test_a_gang_is_never_placed_again_in_part(h, build):
    """A rank whose node went down is lost, not replaced on its own: the evaluation that
    follows places nothing for the gang (the leader ends the run)."""
    nodes = h.add_nodes(*fleet("c", 3, cpus=2, memory_gb=4, placement="cluster"))
    request = ShareRequest(cpu=IntRange(1), memory_mb=IntRange(GB))
    job, ev = h.register(run_job(build, "pair", request, 2))
    h.process(ev)
    ranks = h.live_allocs(job)
    assert len(ranks) == 2
    down = ranks[0].node_id
    h.update_node(down, status=NodeStatus.DOWN)
    planner = h.process(h.new_eval(job, triggered_by=TriggeredBy.NODE_UPDATE, node_id=down))
    assert all(not build.placed(p) for p in planner.plans)
    assert len([a for a in h.job_allocs(job) if a.task_group == "pair"]) == 2
    assert {n.id for n in nodes} - {a.node_id for a in h.job_allocs(job)}  # one stays free


def test_single_ranks_see_what_plain_jobs_hold(h, build):
    """A plain job holding an instance's CPUs leaves its blocks free in name only: runs go
    to the other instance instead of being refused by the leader."""
    first, second = h.add_nodes(*fleet("f", 2, cpus=2, memory_gb=4, blocks=2))
    plain = build.job("plain", build.group("web", 1, cpu=2000, memory_mb=256), type=JobType.BATCH)
    plain = dataclasses.replace(
        plain, constraints=(build.constraint("${node.unique.id}", first.id, "="),)
    )
    _, ev = h.register(plain)
    h.process(ev)
    request = ShareRequest(cpu=IntRange(1, 1), memory_mb=IntRange(GB))
    for i in range(2):
        job, ev = h.register(run_job(build, f"r{i}", request))
        planner = h.process(ev)
        assert planner.results[0].rejected_nodes == ()
        assert [a.node_id for a in h.live_allocs(job)] == [second.id]
