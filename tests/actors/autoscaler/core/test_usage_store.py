"""The `drover` metric source: Nomad APM's `<operation>_<metric>` queries over the usage the
agents report, per task group, with a window, a lookback for agents reporting at their own
pace, a horizon and a per-group cap."""

from __future__ import annotations

import pytest

from actors.autoscaler.core.usage_store import (
    METRICS,
    OPERATIONS,
    GroupQuery,
    UsageStore,
    aggregate,
    parse_query,
    percentile,
)
from contracts.autoscaling import MetricQuery, MetricReadError
from contracts.usage import AllocUsage

T0 = 1_700_000_000.0
WEB = ("default", "web", "api")


def sample(
    alloc: str,
    at: float,
    cpu: float = 0.0,
    mem: float = 0.0,
    *,
    mhz: float = 0.0,
    group: str = "api",
    job: str = "web",
    cpu_alloc: int = 0,
    mem_alloc: int = 0,
) -> AllocUsage:
    return AllocUsage(
        alloc_id=alloc,
        namespace="default",
        job_id=job,
        task_group=group,
        node_id="n1",
        time_ns=int(at * 1e9),
        cpu_mhz=mhz,
        cpu_percent=cpu,
        memory_mb=mem,
        allocated_cpu_mhz=cpu_alloc,
        allocated_memory_mb=mem_alloc,
    )


def store_with(*samples: AllocUsage, **options: float) -> UsageStore:
    store = UsageStore(**options)  # type: ignore[arg-type]
    store.add(samples)
    return store


def values(points: list[tuple[float, float]]) -> list[float]:
    return [v for _, v in points]


def test_parse_query_accepts_nomads_forms_and_drovers_percentiles() -> None:
    assert parse_query("avg_cpu") == GroupQuery("avg", "cpu")
    assert parse_query("taskgroup_max_memory-allocated") == GroupQuery("max", "memory-allocated")
    assert parse_query("taskgroup_p95_cpu/api/web") == GroupQuery("p95", "cpu", "api", "web")
    for operation in OPERATIONS:
        for metric in METRICS:
            assert parse_query(f"{operation}_{metric}") == GroupQuery(operation, metric)


@pytest.mark.parametrize(
    "query",
    ["avg_gpu", "median_cpu", "avg", "", "avg_cpu/api/web", "taskgroup_avg_cpu/api", "cpu_avg"],
)
def test_unknown_queries_name_the_query_and_the_valid_forms(query: str) -> None:
    with pytest.raises(MetricReadError) as exc:
        parse_query(query)
    assert str(exc.value) == (
        f'unknown query "{query}" for source "drover": expected <operation>_<metric>, '
        "taskgroup_<operation>_<metric> or taskgroup_<operation>_<metric>/<group>/<job>, "
        "where operation is one of avg, min, max, sum, p50, p90, p95, p99 and metric one of "
        "cpu, memory, cpu-allocated, memory-allocated"
    )


def test_operations_over_the_groups_allocations() -> None:
    vals = [10.0, 20.0, 30.0, 40.0]
    assert aggregate("avg", vals) == 25.0
    assert (aggregate("min", vals), aggregate("max", vals), aggregate("sum", vals)) == (
        10.0,
        40.0,
        100.0,
    )
    assert aggregate("p50", vals) == 25.0
    assert aggregate("p90", vals) == pytest.approx(37.0)
    assert percentile([5.0], 99) == 5.0
    assert percentile([0.0, 100.0], 99) == pytest.approx(99.0)


def test_each_operation_reads_the_allocations_of_one_time() -> None:
    store = store_with(*(sample(f"a{i}", T0, cpu=10.0 * i, mem=100.0 * i) for i in range(1, 5)))
    read = lambda q: values(store.query(WEB, q, T0 - 60, T0))  # noqa: E731
    assert read("avg_cpu") == [25.0]
    assert read("min_cpu") == [10.0]
    assert read("max_memory") == [400.0]
    assert read("sum_memory") == [1000.0]
    assert read("taskgroup_p50_cpu") == [25.0]
    assert read("p99_memory") == [pytest.approx(397.0)]


def test_allocated_metrics_are_percent_of_the_allocations_own_resources() -> None:
    store = store_with(
        sample("a", T0, mhz=250.0, mem=64.0, cpu_alloc=500, mem_alloc=256),
        sample("b", T0, mhz=500.0, mem=256.0, cpu_alloc=500, mem_alloc=256),
        sample("c", T0, mhz=100.0, mem=10.0),  # nothing allocated: no percentage to give
    )
    assert values(store.query(WEB, "avg_cpu-allocated", T0 - 1, T0)) == [75.0]
    assert values(store.query(WEB, "max_memory-allocated", T0 - 1, T0)) == [100.0]
    assert values(store.query(WEB, "avg_cpu", T0 - 1, T0)) == [0.0]


def test_a_window_gets_a_point_per_bucket_within_its_bounds() -> None:
    store = store_with(
        *(sample("a", T0 + t, cpu=float(t)) for t in range(0, 10)),
        *(sample("b", T0 + t + 0.5, cpu=100.0) for t in range(0, 10)),
    )
    points = store.query(WEB, "avg_cpu", T0 + 3, T0 + 6)
    assert [t for t, _ in points] == [T0 + 3.5, T0 + 4.5, T0 + 5.5, T0 + 6]  # end included
    # Each point is over every allocation's latest sample: at +6, b's from +5.5.
    assert values(points) == [51.5, 52.0, 52.5, 53.0]
    assert store.query(WEB, "avg_cpu", T0 + 20, T0 + 80) == []  # nothing in the window
    assert store.query(WEB, "avg_cpu", T0 - 80, T0 - 20) == []


def test_an_allocation_that_stopped_reporting_drops_out_after_the_lookback() -> None:
    store = store_with(
        *(sample("a", T0 + t, cpu=10.0) for t in range(0, 20)),
        *(sample("b", T0 + t + 0.1, cpu=90.0) for t in range(0, 5)),  # stopped at +4
        lookback_s=3.0,
    )
    by_time = dict(store.query(WEB, "avg_cpu", T0, T0 + 19.5))
    assert by_time[T0 + 4.1] == 50.0
    assert by_time[T0 + 7] == 50.0  # b's last sample is 2.9 s old: still counted
    assert by_time[T0 + 8] == 10.0


def test_allocations_known_to_have_stopped_drop_out_at_once() -> None:
    """A scale-down from 10 to 2: the 8 stopped allocations' last samples must not make the
    2 left look idle for the lookback (they read 18 % instead of 50 %)."""
    survivors = {"a0", "a1"}
    store = store_with(
        *(sample(f"a{i}", T0, mhz=10.0, cpu_alloc=100) for i in range(10)),
        *(sample(a, T0 + t, mhz=50.0, cpu_alloc=100) for a in survivors for t in (1, 2, 3, 4)),
    )
    stale = values(store.query(WEB, "avg_cpu-allocated", T0 + 2, T0 + 4))
    assert stale and all(v < 20 for v in stale)
    fresh = store.query(WEB, "avg_cpu-allocated", T0 + 2, T0 + 4, live=survivors.__contains__)
    assert values(fresh) == [50.0, 50.0, 50.0]
    reader = store.reader(WEB, live=survivors.__contains__)
    query = MetricQuery("drover", "avg_cpu-allocated", T0 + 4, T0 + 4, instant=True)
    assert values(list(reader(query))) == [50.0]


def test_an_instant_query_reads_the_latest_sample_of_each_allocation() -> None:
    store = store_with(
        sample("a", T0 - 3, cpu=10.0),
        sample("a", T0 - 1, cpu=20.0),
        sample("b", T0 - 2, cpu=60.0),
        sample("c", T0 - 30, cpu=99.0),  # older than the lookback
        sample("a", T0 + 5, cpu=99.0),  # after the instant
    )
    assert store.query(WEB, "avg_cpu", T0, T0, instant=True) == [(T0, 40.0)]
    assert store.query(WEB, "avg_cpu", T0 + 60, T0 + 60, instant=True) == []


def test_samples_arriving_out_of_order_are_read_in_time_order() -> None:
    store = UsageStore()
    store.add([sample("a", T0 + 2, cpu=30.0)])
    store.add([sample("a", T0 + 1, cpu=20.0), sample("a", T0, cpu=10.0)])
    assert store.query(WEB, "max_cpu", T0, T0 + 2) == [
        (T0, 10.0),
        (T0 + 1, 20.0),
        (T0 + 2, 30.0),
    ]


def test_groups_are_kept_apart_and_a_query_may_name_its_group() -> None:
    store = store_with(
        sample("a", T0, cpu=10.0),
        sample("w", T0, cpu=70.0, group="worker"),
        sample("x", T0, cpu=50.0, group="api", job="other"),
    )
    assert values(store.query(WEB, "avg_cpu", T0 - 1, T0)) == [10.0]
    assert values(store.query(WEB, "taskgroup_avg_cpu/worker/web", T0 - 1, T0)) == [70.0]
    assert values(store.query(WEB, "taskgroup_avg_cpu/api/other", T0 - 1, T0)) == [50.0]
    assert store.query(("default", "ghost", "api"), "avg_cpu", T0 - 1, T0) == []


def test_horizon_cap_and_tracking_bound_what_is_kept() -> None:
    store = UsageStore(horizon_s=60.0, max_samples=5)
    store.add(sample("a", T0 + t, cpu=float(t)) for t in range(0, 8))
    assert store.sample_count() == 5  # the newest five
    assert values(store.query(WEB, "min_cpu", T0, T0 + 8)) == [3.0, 4.0, 5.0, 6.0, 7.0]
    assert store.prune(T0 + 65) == 2  # +3 and +4 are past the horizon
    assert store.prune(T0 + 200) == 3 and store.groups() == []
    store.track([WEB])
    assert store.add([sample("a", T0), sample("w", T0, group="worker")]) == 1
    assert store.groups() == [WEB]
    store.track([])
    assert store.groups() == []


def test_a_policys_reader_answers_drover_and_nomad_apm_and_refuses_other_sources() -> None:
    read = store_with(sample("a", T0, cpu=42.0)).reader(WEB)
    for source in ("drover", "nomad-apm"):
        assert read(MetricQuery(source, "avg_cpu", T0 - 5, T0)) == [(T0, 42.0)]
    with pytest.raises(MetricReadError) as exc:
        read(MetricQuery("prometheus", "up", T0 - 5, T0))
    assert str(exc.value) == (
        'unknown metric source "prometheus": this autoscaler reads "drover" '
        '(Nomad\'s "nomad-apm" is read as "drover")'
    )
