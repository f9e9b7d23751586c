"""Feasibility: the base node set, drivers, constraints, devices, class caching and the
metrics of filtered nodes (Nomad's feasible_test.go, util_test.go, device_test.go and the
class-eligibility parts of context_test.go), plus distinct_hosts / distinct_property
through the scheduler.
"""

from __future__ import annotations

import dataclasses

import pytest

from actors.worker.core.scheduler.feasible import (
    EvalEligibility,
    Feasibility,
    FilterMetrics,
    GroupFeasibility,
    devices_feasible,
    in_any_datacenter,
    ready_nodes_in_pool,
)
from contracts import (
    ClientStatus,
    Constraint,
    DeviceRequest,
    DrainStrategy,
    DriverInfo,
    EvalStatus,
    JobType,
    NodeEligibility,
    NodeStatus,
    Resources,
)
from contracts.state_log import AllocClientUpdate, UpdateAllocsClientStatus


def feasible_ids(job, nodes, eligibility=None):
    """Node ids that pass the group's checks, with the metrics and the eligibility cache."""
    eligibility = eligibility or EvalEligibility()
    checker = GroupFeasibility(job, job.task_groups[0], eligibility)
    metrics = FilterMetrics()
    ok = [n.id for n in nodes if checker.check(n, metrics)]
    return ok, metrics, eligibility


# -- base node set ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("datacenter", "patterns", "expected"),
    [
        ("dc1", ("dc1",), True),
        ("dc1", ("dc2",), False),
        ("dc1", ("*",), True),
        ("us-east-1", ("us-*",), True),
        ("eu-west-1", ("us-*",), False),
        ("dc2", ("dc1", "dc2"), True),
        ("dc10", ("dc1",), False),
        ("dc10", ("dc1*",), True),
        ("dc1", (), False),
    ],
)
def test_in_any_datacenter(datacenter, patterns, expected):
    assert in_any_datacenter(datacenter, patterns) is expected


def test_ready_nodes_in_dcs_and_pool(build):
    """readyNodesInDCsAndPool: ready + eligible + not draining, DC glob, node pool."""
    nodes = [
        build.node("ok-1", datacenter="dc1"),
        build.node("ok-2", datacenter="dc2"),
        build.node("other-dc", datacenter="eu1"),
        build.node("other-pool", datacenter="dc1", node_pool="gpu"),
        build.node("down", status=NodeStatus.DOWN),
        build.node("init", status=NodeStatus.INITIALIZING),
        build.node("disconnected", status=NodeStatus.DISCONNECTED),
        build.node("ineligible", scheduling_eligibility=NodeEligibility.INELIGIBLE),
        build.node("draining", drain_strategy=DrainStrategy()),
    ]
    job = build.job(datacenters=("dc*",))
    out, by_dc = ready_nodes_in_pool(nodes, job)
    assert [n.id for n in out] == ["ok-1", "ok-2"]
    assert by_dc == {"dc1": 1, "dc2": 1}

    out, by_dc = ready_nodes_in_pool(nodes, build.job(node_pool="all"))
    assert {n.id for n in out} == {"ok-1", "ok-2", "other-dc", "other-pool"}
    assert by_dc == {"dc1": 2, "dc2": 1, "eu1": 1}

    out, _ = ready_nodes_in_pool(nodes, build.job(node_pool="gpu"))
    assert [n.id for n in out] == ["other-pool"]


def test_node_pool_end_to_end(h, build):
    h.nodes(3)
    h.add_nodes(*(build.node(f"gpu-{i}", node_pool="gpu") for i in range(2)))
    job, ev = h.register(build.job("my-job", build.group(count=2), node_pool="gpu"))
    h.process(ev)
    assert sorted(a.node_id for a in h.job_allocs(job)) == ["gpu-0", "gpu-1"]


def test_datacenter_glob_end_to_end(h, build):
    h.add_nodes(
        build.node("a", datacenter="us-east-1"),
        build.node("b", datacenter="us-west-2"),
        build.node("c", datacenter="eu-west-1"),
    )
    job, ev = h.register(build.job("my-job", build.group(count=2), datacenters=("us-*",)))
    planner = h.process(ev)
    build.assert_eval(planner, EvalStatus.COMPLETE)
    assert sorted(a.node_id for a in h.job_allocs(job)) == ["a", "b"]


# -- drivers ----------------------------------------------------------------------------------


def test_driver_checker(build):
    """TestDriverChecker / _DriverInfo / _Compatibility."""
    nodes = [
        build.node("healthy"),
        build.node("unhealthy", drivers={"mock": DriverInfo(healthy=False)}),
        build.node("undetected", drivers={"mock": DriverInfo(detected=False)}),
        build.node("missing", drivers={"exec": DriverInfo()}),
        build.node("attr-true", drivers={}, attributes={"driver.mock": "true"}),
        build.node("attr-one", drivers={}, attributes={"driver.mock": "1"}),
        build.node("attr-false", drivers={}, attributes={"driver.mock": "false"}),
    ]
    ok, metrics, _ = feasible_ids(build.job(), nodes)
    assert ok == ["healthy", "attr-true", "attr-one"]
    assert metrics.nodes_filtered == 4
    assert metrics.constraint_filtered == {"missing drivers": 4}


def test_every_task_driver_is_needed(build):
    tasks = (build.task("a", driver="mock"), build.task("b", driver="exec"))
    job = build.job("my-job", build.group(tasks=tasks))
    nodes = [
        build.node("both", drivers={"mock": DriverInfo(), "exec": DriverInfo()}),
        build.node("one", drivers={"mock": DriverInfo()}),
    ]
    assert feasible_ids(job, nodes)[0] == ["both"]


# -- constraints ------------------------------------------------------------------------------


def test_job_group_and_task_constraints_all_apply(build):
    job = build.job(
        "my-job",
        build.group(
            tasks=(build.task(constraints=(Constraint("${meta.ssd}", "true", "="),)),),
            constraints=(Constraint("${attr.arch}", "amd64", "="),),
        ),
        constraints=(Constraint("${attr.kernel.name}", "linux", "="),),
    )
    base = {"kernel.name": "linux", "arch": "amd64"}
    nodes = [
        build.node("all", attributes=base, meta={"ssd": "true"}),
        build.node("no-ssd", attributes=base, meta={"ssd": "false"}),
        build.node("arm", attributes={**base, "arch": "arm64"}, meta={"ssd": "true"}),
        build.node("windows", attributes={**base, "kernel.name": "windows"}, meta={"ssd": "true"}),
    ]
    ok, metrics, _ = feasible_ids(job, nodes)
    assert ok == ["all"]
    assert metrics.constraint_filtered == {
        "${meta.ssd} = true": 1,
        "${attr.arch} = amd64": 1,
        "${attr.kernel.name} = linux": 1,
    }


@pytest.mark.parametrize(
    ("constraint", "expected"),
    [
        (Constraint("${node.unique.id}", "n1", "="), ["n1"]),
        (Constraint("${node.unique.name}", "n2", "!="), ["n1", "n3"]),
        (Constraint("${node.datacenter}", "dc2", "="), ["n2"]),
        (Constraint("${node.class}", "large", "="), ["n3"]),
        (Constraint("${node.pool}", "default", "="), ["n1", "n2", "n3"]),
        (Constraint("${attr.rack}", "r1", "="), ["n1", "n2"]),
        (Constraint("${meta.team}", "a,b", "set_contains_any"), ["n1", "n3"]),
        (Constraint("${attr.cores}", "8", ">="), ["n2", "n3"]),
        (Constraint("${attr.version}", ">= 1.2, < 2.0", "version"), ["n1", "n2"]),
        (Constraint("${attr.version}", "~> 1.2", "version"), ["n1", "n2"]),
        (Constraint("${attr.missing}", "", "is_not_set"), ["n1", "n2", "n3"]),
        (Constraint("${attr.rack}", "", "is_set"), ["n1", "n2"]),
        (Constraint("${attr.missing}", "x", "="), []),
        (Constraint("${attr.missing}", "x", "!="), ["n1", "n2", "n3"]),
        (Constraint("${attr.os}", "^ubu", "regexp"), ["n1", "n3"]),
        (Constraint(operand="distinct_hosts"), ["n1", "n2", "n3"]),
        (Constraint("${attr.rack}", "1", "distinct_property"), ["n1", "n2", "n3"]),
    ],
)
def test_constraint_targets_against_nodes(build, constraint, expected):
    nodes = [
        build.node(
            "n1",
            attributes={"rack": "r1", "cores": "4", "version": "1.2.0", "os": "ubuntu"},
            meta={"team": "a"},
        ),
        build.node(
            "n2",
            datacenter="dc2",
            attributes={"rack": "r1", "cores": "16", "version": "1.9.9", "os": "debian"},
            meta={"team": "c"},
        ),
        build.node(
            "n3",
            node_class="large",
            attributes={"cores": "8", "version": "2.0.0", "os": "ubuntu"},
            meta={"team": "b,c"},
        ),
    ]
    job = build.job("my-job", build.group(constraints=(constraint,)))
    assert feasible_ids(job, nodes)[0] == expected


# -- devices ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("gpu", True),
        ("nvidia/gpu", True),
        ("nvidia/gpu/A100", True),
        ("nvidia/gpu/H100", False),
        ("amd/gpu", False),
        ("fpga", False),
        ("intel/fpga/A100", False),
    ],
)
def test_device_name_matching(build, name, expected):
    node = build.node("gpu-node", devices=(build.gpus(2),))
    assert devices_feasible(node, (DeviceRequest(name=name),)) is expected


def test_device_count_counts_only_healthy_instances(build):
    node = build.node("gpu-node", devices=(build.gpus(4, unhealthy=2),))
    assert devices_feasible(node, (DeviceRequest("gpu", count=2),))
    assert not devices_feasible(node, (DeviceRequest("gpu", count=3),))
    # Two requests for the same group share its instances.
    assert not devices_feasible(node, (DeviceRequest("gpu", count=2), DeviceRequest("gpu")))


def test_device_requests_use_different_groups(build):
    node = build.node(
        "gpu-node",
        devices=(build.gpus(1, model="A100", prefix="a"), build.gpus(1, model="T4", prefix="t")),
    )
    requests = (DeviceRequest("nvidia/gpu/A100"), DeviceRequest("gpu"))
    assert devices_feasible(node, requests)
    assert not devices_feasible(node, (*requests, DeviceRequest("gpu")))


@pytest.mark.parametrize(
    ("constraint", "expected"),
    [
        (Constraint("${device.attr.memory}", "40 GiB", ">="), True),
        (Constraint("${device.attr.memory}", "81920 MiB", ">="), True),
        (Constraint("${device.attr.memory}", "100 GB", ">="), False),
        (Constraint("${device.attr.memory}", "1 GHz", ">="), False),
        (Constraint("${device.model}", "A100", "="), True),
        (Constraint("${device.vendor}", "amd", "="), False),
        (Constraint("${device.attr.missing}", "", "is_set"), False),
    ],
)
def test_device_constraints(build, constraint, expected):
    node = build.node("gpu-node", devices=(build.gpus(2, attributes={"memory": "80 GiB"}),))
    request = DeviceRequest("nvidia/gpu", constraints=(constraint,))
    assert devices_feasible(node, (request,)) is expected


def test_device_checker_in_group_feasibility(build):
    task = build.task(resources=Resources(cpu=100, memory_mb=64, devices=(DeviceRequest("gpu"),)))
    job = build.job("my-job", build.group(tasks=(task,)))
    gpu = build.node("gpu", devices=(build.gpus(1),))
    sick = build.node("sick", devices=(build.gpus(1, unhealthy=1),))
    ok, metrics, _ = feasible_ids(job, [gpu, build.node("plain")])
    assert ok == ["gpu"]
    assert metrics.constraint_filtered == {"missing devices": 1}
    ok, metrics, _ = feasible_ids(job, [sick])
    assert ok == []
    assert metrics.constraint_filtered == {"missing devices": 1}
    # Instance health is not part of the computed class (Nomad hashes vendor, type, name and
    # attributes only), so within one evaluation the first node of the class decides for
    # both, whichever it is. Nomad's DeviceChecker is class-cached the same way; binpack's
    # device offer still refuses a node without free healthy instances.
    assert sick.computed_class == gpu.computed_class
    assert feasible_ids(job, [gpu, sick])[0] == ["gpu", "sick"]
    assert feasible_ids(job, [sick, gpu])[0] == []


def test_device_placement_end_to_end(h, build):
    """GPU asks are placed on instances that are free, and run out like any resource."""
    h.add_nodes(
        build.node("gpu", devices=(build.gpus(2),)), build.node("plain-1"), build.node("plain-2")
    )
    task = build.task(resources=Resources(cpu=100, memory_mb=64, devices=(DeviceRequest("gpu"),)))
    job, ev = h.register(build.job("my-job", build.group(count=3, tasks=(task,))))

    planner = h.process(ev)

    allocs = h.job_allocs(job)
    assert len(allocs) == 2 and {a.node_id for a in allocs} == {"gpu"}
    ids = [i for a in allocs for d in a.allocated_resources.devices for i in d.device_ids]
    assert sorted(ids) == ["gpu-0", "gpu-1"]
    device = allocs[0].allocated_resources.devices[0]
    assert (device.vendor, device.type, device.name) == ("nvidia", "gpu", "A100")
    metric = planner.evals[0].failed_tg_allocs["web"]
    assert metric.dimension_exhausted == {"devices": 1}
    assert metric.constraint_filtered == {"missing devices": 2}
    assert h.store.node_usage("gpu").device_ids == frozenset({"gpu-0", "gpu-1"})


# -- class caching ----------------------------------------------------------------------------


def _same_class(*nodes):
    return [dataclasses.replace(n, computed_class="v1:same") for n in nodes]


def test_class_eligibility_is_cached(build):
    """Nodes of one computed class are judged once: the second node is filtered from the
    cache without its own check (it would pass on its own), and still counted."""
    nodes = _same_class(
        build.node("r1", node_class="c", attributes={"rack": "r1"}),
        build.node("r2", node_class="c", attributes={"rack": "r2"}),
    )
    job = build.job("my-job", build.group(constraints=(Constraint("${attr.rack}", "r2", "="),)))
    ok, metrics, eligibility = feasible_ids(job, nodes)
    assert ok == []
    assert metrics.nodes_filtered == 2
    assert metrics.constraint_filtered == {"${attr.rack} = r2": 2}
    assert metrics.class_filtered == {"c": 2}
    assert eligibility.groups["web"]["v1:same"][0] is Feasibility.INELIGIBLE
    assert eligibility.class_eligibility() == {"v1:same": False}
    assert not eligibility.has_escaped()


def test_job_level_class_cache(build):
    nodes = _same_class(
        build.node("r1", attributes={"rack": "r1"}), build.node("r2", attributes={"rack": "r2"})
    )
    job = build.job("my-job", build.group(), constraints=(Constraint("${attr.rack}", "r1", "="),))
    ok, _, eligibility = feasible_ids(job, nodes)
    assert ok == ["r1", "r2"]  # r2 rides on r1's eligible verdict
    assert eligibility.job["v1:same"][0] is Feasibility.ELIGIBLE
    assert eligibility.class_eligibility() == {"v1:same": True}


def test_escaped_constraints_are_not_cached(build):
    """A constraint on ${node.unique.name} cannot be judged per class: every node is checked
    and the eval is marked escaped."""
    nodes = _same_class(build.node("n1"), build.node("n2"))
    job = build.job(
        "my-job", build.group(constraints=(Constraint("${node.unique.name}", "n2", "="),))
    )
    ok, _, eligibility = feasible_ids(job, nodes)
    assert ok == ["n2"]
    assert eligibility.has_escaped()
    assert eligibility.groups["web"] == {}


def test_escaped_device_constraint(build):
    request = DeviceRequest("gpu", constraints=(Constraint("${node.unique.id}", "x", "!="),))
    task = build.task(resources=Resources(devices=(request,)))
    job = build.job("my-job", build.group(tasks=(task,)))
    eligibility = EvalEligibility()
    GroupFeasibility(job, job.task_groups[0], eligibility)
    assert eligibility.has_escaped()


def test_blocked_eval_carries_class_eligibility(h, build):
    h.add_nodes(build.node("n1", attributes={"kernel.name": "windows"}))
    _job, ev = h.register(
        build.job(
            "my-job",
            build.group(count=1),
            constraints=(Constraint("${attr.kernel.name}", "linux", "="),),
        )
    )
    planner = h.process(ev)
    (blocked,) = planner.created_evals
    assert blocked.class_eligibility == {h.store.node("n1").computed_class: False}
    assert not blocked.escaped_computed_class


def test_blocked_eval_escaped(h, build):
    h.add_nodes(build.node("n1"))
    _job, ev = h.register(
        build.job(
            "my-job",
            build.group(count=1, constraints=(Constraint("${node.unique.id}", "n9", "="),)),
        )
    )
    planner = h.process(ev)
    (blocked,) = planner.created_evals
    assert blocked.escaped_computed_class
    assert blocked.class_eligibility == {}


# -- metrics ----------------------------------------------------------------------------------


def test_alloc_metric_names_the_constraint_and_count(h, build):
    h.add_nodes(*(build.node(f"win-{i}", attributes={"kernel.name": "windows"}) for i in range(3)))
    h.add_nodes(build.node("nodriver", drivers={}, attributes={"kernel.name": "linux"}))
    _job, ev = h.register(
        build.job(
            "my-job",
            build.group(count=2),
            constraints=(Constraint("${attr.kernel.name}", "linux", "="),),
        )
    )

    planner = h.process(ev)

    metric = planner.evals[0].failed_tg_allocs["web"]
    assert metric.nodes_in_pool == 4
    assert metric.nodes_filtered == 4
    assert metric.nodes_evaluated == 4
    assert metric.coalesced_failures == 1
    assert metric.constraint_filtered == {
        "${attr.kernel.name} = linux": 3,
        "missing drivers": 1,
    }
    assert metric.nodes_available == {"dc1": 4}
    assert "${attr.kernel.name} = linux filtered 3 node(s)" in metric.reasons()
    assert "missing drivers filtered 1 node(s)" in metric.reasons()


def test_alloc_metric_exhaustion(h, build):
    h.add_nodes(build.node("small-cpu", cpu=100), build.node("small-mem", memory_mb=100))
    _job, ev = h.register(build.job("my-job", build.group(count=1)))
    planner = h.process(ev)
    metric = planner.evals[0].failed_tg_allocs["web"]
    assert metric.nodes_exhausted == 2
    assert metric.dimension_exhausted == {"cpu": 1, "memory": 1}
    assert "cpu exhausted on 1 node(s)" in metric.reasons()
    assert metric.class_exhausted == {}  # nodes without a class are not counted by class


def test_alloc_metric_counts_exhausted_nodes_per_node_class(h, build):
    """Nomad's AllocMetric.ExhaustedNode: every exhausted node counts in NodesExhausted and
    its dimension, and in ClassExhausted under its node class when it has one."""
    h.add_nodes(
        build.node("small-cpu", cpu=100, node_class="small"),
        build.node("small-mem", memory_mb=100, node_class="small"),
        build.node("tiny", cpu=100, node_class="tiny"),
        build.node("classless", cpu=100),
    )
    _job, ev = h.register(build.job("my-job", build.group(count=1)))
    planner = h.process(ev)
    metric = planner.evals[0].failed_tg_allocs["web"]
    assert metric.nodes_exhausted == 4
    assert metric.dimension_exhausted == {"cpu": 3, "memory": 1}
    assert metric.class_exhausted == {"small": 2, "tiny": 1}
    assert metric.class_filtered == {} and metric.constraint_filtered == {}


def test_system_alloc_metric_counts_the_exhausted_nodes_class(h, build):
    """The system scheduler asks node by node: the first failure is the metric (with its
    node's class), the others are coalesced, as in Nomad's system scheduler."""
    h.add_nodes(*(build.node(f"small-{i}", cpu=100, node_class="small") for i in range(3)))
    _job, ev = h.register(build.job("my-job", build.group(count=1), type=JobType.SYSTEM))
    metric = h.process(ev).evals[0].failed_tg_allocs["web"]
    assert (metric.nodes_exhausted, metric.coalesced_failures) == (1, 2)
    assert metric.class_exhausted == {"small": 1} and metric.dimension_exhausted == {"cpu": 1}


# -- distinct_hosts / distinct_property -------------------------------------------------------


def test_distinct_hosts_counts_existing_allocs(h, build):
    h.nodes(3)
    constraint = (Constraint(operand="distinct_hosts"),)
    job, ev = h.register(build.job("my-job", build.group(count=2), constraints=constraint))
    h.process(ev)
    first = {a.node_id for a in h.job_allocs(job)}
    job2, ev = h.register(
        job.replace(task_groups=(dataclasses.replace(job.task_groups[0], count=3),))
    )
    h.process(ev)
    nodes = [a.node_id for a in h.live_allocs(job2)]
    assert len(nodes) == 3 and len(set(nodes)) == 3 and first < set(nodes)


def test_distinct_hosts_failure_metric_is_per_placement(h, build):
    h.nodes(10)
    constraint = (Constraint(operand="distinct_hosts"),)
    _job, ev = h.register(build.job("my-job", build.group(count=11), constraints=constraint))
    planner = h.process(ev)
    metric = planner.evals[0].failed_tg_allocs["web"]
    assert metric.constraint_filtered == {"distinct_hosts": 10}
    assert metric.nodes_filtered == 10


def _racks(h, build, racks=3, per_rack=2):
    h.add_nodes(
        *(
            build.node(f"r{r}-{i}", attributes={"rack": f"r{r}"})
            for r in range(racks)
            for i in range(per_rack)
        )
    )


def _per_rack(h, allocs):
    out: dict[str, int] = {}
    for a in allocs:
        rack = h.store.node(a.node_id).attributes["rack"]
        out[rack] = out.get(rack, 0) + 1
    return out


@pytest.mark.parametrize(("limit", "count"), [("", 3), ("1", 3), ("2", 6)])
def test_distinct_property_limit(h, build, limit, count):
    """TestDistinctPropertyIterator_JobDistinctProperty_Count: RTarget is the number of
    allocs allowed per value (default 1); one more than fits fails."""
    _racks(h, build)
    constraint = Constraint("${attr.rack}", limit, "distinct_property")
    job, ev = h.register(
        build.job("my-job", build.group(count=count + 1), constraints=(constraint,))
    )
    planner = h.process(ev)
    per_rack = int(limit or 1)
    assert _per_rack(h, h.job_allocs(job)) == {"r0": per_rack, "r1": per_rack, "r2": per_rack}
    metric = planner.evals[0].failed_tg_allocs["web"]
    assert metric.constraint_filtered.get("distinct_property", 0) > 0
    assert len(planner.created_evals) == 1


def test_distinct_property_missing_attribute_filters(h, build):
    _racks(h, build, racks=1, per_rack=1)
    h.add_nodes(build.node("norack"))
    constraint = Constraint("${attr.rack}", "5", "distinct_property")
    job, ev = h.register(build.job("my-job", build.group(count=2, constraints=(constraint,))))
    h.process(ev)
    assert {a.node_id for a in h.job_allocs(job)} == {"r0-0"}


def test_distinct_property_counts_existing_allocs(h, build):
    _racks(h, build)
    constraint = Constraint("${attr.rack}", "1", "distinct_property")
    job, ev = h.register(build.job("my-job", build.group(count=2), constraints=(constraint,)))
    h.process(ev)
    job2, ev = h.register(
        job.replace(task_groups=(dataclasses.replace(job.task_groups[0], count=4),))
    )
    planner = h.process(ev)
    assert sorted(_per_rack(h, h.live_allocs(job2)).values()) == [1, 1, 1]
    assert planner.evals[0].queued_allocations == {"web": 1}


def test_distinct_property_ignores_terminal_allocs(h, build):
    _racks(h, build, racks=1, per_rack=2)
    constraint = Constraint("${attr.rack}", "1", "distinct_property")
    job, ev = h.register(build.job("my-job", build.group(count=1), constraints=(constraint,)))
    h.process(ev)
    (alloc,) = h.job_allocs(job)
    h.store.commit(UpdateAllocsClientStatus((AllocClientUpdate(alloc.id, ClientStatus.FAILED),)))
    planner = h.process(h.new_eval(job))
    # The failed alloc no longer holds rack r0: its replacement goes there.
    assert len(h.live_allocs(job)) == 1
    assert planner.created_evals == []


def test_distinct_property_destructive_update_frees_values(h, build):
    """Two racks, one alloc per rack allowed, count 2: replacing both allocs must work, each
    replacement taking the value its predecessor frees."""
    _racks(h, build, racks=2, per_rack=1)
    constraint = Constraint("${attr.rack}", "1", "distinct_property")
    job, ev = h.register(build.job("my-job", build.group(count=2), constraints=(constraint,)))
    h.process(ev)
    assert len(h.live_allocs(job)) == 2

    job2, ev = h.register(job.replace(task_groups=(build.group(count=2, cpu=600),)))
    planner = h.process(ev)

    assert planner.evals[0].failed_tg_allocs == {}
    live = h.live_allocs(job2)
    assert len(live) == 2 and all(a.job_version == job2.version for a in live)
