"""The autoscaler service on a real Redis, following a real leader's log, with a broker, a
scheduler worker and a simulated client agent running the allocations (no Ray). Usage is
published on the usage stream here, as the agents publish it, on a clock the test moves:
the evaluations happen when the test polls, never on a timer.

Checked: a target-value policy on avg_cpu makes a Scale call with the count, message and
meta Nomad's autoscaler sends; the cooldown holds the next one back, also across a restart
(resumed from the scaling event); a broken query, missing metrics or a refused call are
recorded and the loop goes on; each decision is applied once; the evaluation is a span."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis

from actors.agent.core import FleetSpec, builtin_drivers, simulated_nodes
from actors.agent.service import AgentService
from actors.autoscaler.core.applied import policies_key
from actors.autoscaler.core.registry import group_policy_id
from actors.autoscaler.fleet_target import FleetTargets, redis_spec_lookup
from actors.autoscaler.service import DOZE_AFTER_S, AutoscalerService
from actors.autoscaler.tracing import EVENT_CHECK, SPAN_EVALUATE, SPAN_SCALE
from actors.broker.service import BrokerService
from actors.leader.service import LeaderService
from actors.streams import StreamBus
from actors.streams.names import StreamNames
from actors.worker.service import WorkerService
from contracts import ClientStatus, EvalStatus, Evaluation, Job
from contracts.jobspec import parse_hcl
from contracts.messages import LeaderRequest, LeaderResponse, RequestKind
from contracts.state_log import LogEntry, UpsertAllocs, UpsertEvals, UpsertJob, encode_entry
from contracts.usage import REPORT_TYPE, USAGE_STREAM_MAXLEN, AllocUsage, UsageReport
from launch.system_fleets import spec_from_stored

NAMES = StreamNames("asc")
FLEET = FleetSpec(name="sim", count=2, cpu_mhz=8000, memory_mb=16384)
WEB_ID = group_policy_id("default", "web", "api")


def web_hcl(query: str = "avg_cpu", *, on_check_error: str = "ignore", count: int = 2) -> str:
    return f"""
job "web" {{
  group "api" {{
    count = {count}
    scaling {{
      min = 1
      max = 10
      policy {{
        evaluation_interval = "10s"
        cooldown            = "2m"
        on_check_error      = "{on_check_error}"
        check "cpu" {{
          query        = "{query}"
          query_window = "30s"
          strategy "target-value" {{ target = 50 }}
        }}
      }}
    }}
    task "t" {{
      driver = "mock"
      resources {{
        cpu    = 500
        memory = 128
      }}
    }}
  }}
}}
"""


def plain_hcl() -> str:
    """web_hcl's job as "plain", without its scaling block."""
    plain = web_hcl().replace('job "web"', 'job "plain"')
    return plain[: plain.index("scaling")] + plain[plain.index("task ") :]


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@dataclass
class Cluster:
    client: redis.Redis
    leader: LeaderService

    def run_job(self, hcl: str) -> LeaderResponse:
        request = LeaderRequest(
            RequestKind.REGISTER_JOB, request_id=f"reg-{time.monotonic_ns()}", job=parse_hcl(hcl)
        )
        response = self.leader.submit(request)
        assert response.ok, response.error
        return response

    def running(self, job_id: str = "web") -> list[str]:
        allocs = self.leader.store.allocs_by_job("default", job_id)
        return [a.id for a in allocs if a.client_status is ClientStatus.RUNNING]

    def wait_running(self, count: int, job_id: str = "web") -> list[str]:
        def probe() -> list[str] | None:
            ids = self.running(job_id)
            return ids if len(ids) >= count else None

        result: list[str] = wait_for(probe)
        return result

    def group_count(self, job_id: str = "web") -> int:
        job = self.leader.store.job("default", job_id)
        assert job is not None
        return job.task_groups[0].count

    def report(self, allocs: list[str], cpu: float, at: float, job_id: str = "web") -> None:
        """Usage of the allocations at `at` and the 9 seconds before, as agents publish it."""
        samples = tuple(
            AllocUsage(a, "default", job_id, "api", "n", int((at - s) * 1e9), 0.0, cpu, 64.0)
            for a in allocs
            for s in range(10)
        )
        StreamBus(self.client).publish(
            NAMES.usage,
            [(REPORT_TYPE, UsageReport("test", samples))],
            trace={},
            maxlen=USAGE_STREAM_MAXLEN,
        )


def wait_for(probe: Callable[[], Any], timeout_s: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


@pytest.fixture
def cluster(
    client: redis.Redis, run_in_thread: Callable[[Any], Callable[[], None]], tmp_path: Path
) -> Iterator[Cluster]:
    broker = BrokerService(client, NAMES, capacity=2)
    leader = LeaderService(client, NAMES, broker=broker)
    services: list[Any] = [
        leader,
        broker,
        WorkerService("worker-1", client, NAMES),
        AgentService(
            "sim",
            client,
            NAMES,
            simulated_nodes(FLEET),
            builtin_drivers(data_dir=tmp_path / "allocs"),
            usage_interval_s=0,  # the test is the only one reporting usage
        ),
    ]
    for service in services:
        service.start()
    for service in reversed(services):  # stopped in this order: the leader last
        run_in_thread(service)
    yield Cluster(client, leader)


def new_autoscaler(cluster: Cluster, clock: Clock, **kw: Any) -> AutoscalerService:
    service = AutoscalerService(cluster.client, NAMES, cluster.leader.submit, clock=clock, **kw)
    service.start()
    return service


def evaluate(service: AutoscalerService, cluster: Cluster, clock: Clock, after_s: float) -> int:
    """Move the clock, bring the autoscaler's replica up to the leader, poll once."""
    clock.now += after_s
    assert service.replica.catch_up_to(cluster.leader.store.latest_index(), 30)
    return service.poll_once()


def settled(service: AutoscalerService, policy_id: str = WEB_ID) -> dict[str, Any]:
    """The newest decision, once its Scale call (if any) was answered."""

    def probe() -> dict[str, Any] | None:
        service.settle_answers()
        (last,) = service.decision_log(policy_id, 1)
        scale = last["Scale"]
        return None if scale is not None and scale["Status"] == "pending" else last

    result: dict[str, Any] = wait_for(probe)
    return result


def test_avg_cpu_above_target_scales_the_group_up_once_then_cools_down(
    cluster: Cluster, in_memory: Callable[[str], Any]
) -> None:
    telemetry, spans, _ = in_memory("autoscaler")
    clock = Clock()
    cluster.run_job(web_hcl())
    allocs = cluster.wait_running(2)
    service = new_autoscaler(cluster, clock, telemetry=telemetry)
    assert evaluate(service, cluster, clock, 5) == 0  # not due yet: one interval first
    cluster.report(allocs, cpu=100.0, at=clock.now + 10)
    assert evaluate(service, cluster, clock, 10.5) == 1
    decision = settled(service)
    assert decision["Outcome"] == "scale" and decision["Scale"]["Status"] == "ok"
    assert (decision["CurrentCount"], decision["Action"]["Count"]) == (2, 4)
    (check,) = decision["Checks"]
    assert (check["Value"], check["Action"]["Direction"]) == (100.0, "up")
    assert cluster.group_count() == 4
    (event,) = cluster.leader.store.scaling_events("default", "web")["api"]
    assert (event.count, event.previous_count, event.error) == (4, 2, False)
    assert event.message == "scaling up because factor is 2.000000"
    assert event.meta["nomad_policy_id"] == WEB_ID
    assert event.eval_id == decision["Scale"]["EvalID"]

    # Still above target at the next interval: the cooldown holds the second call back.
    cluster.report(allocs, cpu=100.0, at=clock.now + 10)
    evaluate(service, cluster, clock, 10)
    held = settled(service)
    assert held["Outcome"] == "cooldown" and held["Scale"] is None
    assert "not scaling while the policy cools down" in held["Reason"]
    assert service.stats["scale_calls"] == 1 and cluster.group_count() == 4

    by_name = {s.name: s for s in spans.get_finished_spans()}
    span = by_name[SPAN_EVALUATE]
    assert span.attributes["drover.autoscaler.policy.id"] == WEB_ID
    assert span.attributes["drover.autoscaler.state"] == "cooldown"
    (event_span,) = [e for e in span.events if e.name == EVENT_CHECK]
    assert event_span.attributes["drover.autoscaler.check.value"] == 100.0
    assert by_name[SPAN_SCALE].attributes["drover.autoscaler.scale.ok"] is True


def test_a_restarted_autoscaler_resumes_the_cooldown_from_the_scaling_event(
    cluster: Cluster,
) -> None:
    clock = Clock()
    cluster.run_job(web_hcl())
    allocs = cluster.wait_running(2)
    first = new_autoscaler(cluster, clock)
    cluster.report(allocs, cpu=100.0, at=clock.now + 11)
    evaluate(first, cluster, clock, 11)
    assert settled(first)["Scale"]["Status"] == "ok"
    first.close()

    clock.now += 30
    second = new_autoscaler(cluster, clock)
    cluster.report(allocs, cpu=100.0, at=clock.now + 11)
    evaluate(second, cluster, clock, 11)
    resumed = settled(second)
    assert resumed["Outcome"] == "cooldown" and second.stats["scale_calls"] == 0
    # Until two minutes (cooldown_on_scale_up = cooldown) after the event the first wrote.
    (event,) = cluster.leader.store.scaling_events("default", "web")["api"]
    assert resumed["CooldownUntil"] == pytest.approx(event.time / 1e9 + 120)
    assert cluster.group_count() == 4


def test_bad_queries_and_missing_metrics_are_recorded_and_the_loop_goes_on(
    cluster: Cluster,
) -> None:
    clock = Clock()
    cluster.run_job(web_hcl("avg_gpu"))
    cluster.wait_running(2)
    service = new_autoscaler(cluster, clock)
    evaluate(service, cluster, clock, 11)
    ignored = settled(service)
    assert ignored["Outcome"] == "no-action"
    (check,) = ignored["Checks"]
    assert check["Ignored"] and check["Error"].startswith(
        'failed to query source: unknown query "avg_gpu" for source "drover": expected'
    )

    # on_check_error = "fail": the evaluation fails; a valid query without data too.
    cluster.run_job(web_hcl("avg_cpu", on_check_error="fail"))
    evaluate(service, cluster, clock, 10)
    failed = settled(service)
    assert failed["Outcome"] == "failed"
    assert failed["Reason"] == 'evaluation failed: check "cpu": no metrics available'
    assert service.stats["loop_errors"] == 0 and service.stats["scale_calls"] == 0
    assert cluster.group_count() == 2


def test_a_refused_or_unanswered_scale_call_leaves_the_policy_free_to_try_again(
    cluster: Cluster,
) -> None:
    clock = Clock()
    cluster.run_job(web_hcl())
    allocs = cluster.wait_running(2)
    sent: list[LeaderRequest] = []
    lost = threading.Event()

    def send(request: LeaderRequest) -> LeaderResponse:
        sent.append(request)
        if not lost.is_set():
            lost.set()
            raise TimeoutError("the leader did not answer")
        return cluster.leader.submit(request)

    service = AutoscalerService(cluster.client, NAMES, send, clock=clock)
    service.start()
    cluster.report(allocs, cpu=100.0, at=clock.now + 11)
    evaluate(service, cluster, clock, 11)
    failed = settled(service)
    assert failed["Scale"]["Status"] == "failed"
    assert failed["Scale"]["Error"] == "TimeoutError: the leader did not answer"
    assert cluster.group_count() == 2

    cluster.report(allocs, cpu=100.0, at=clock.now + 10)
    evaluate(service, cluster, clock, 10)  # no cooldown after a failed call: it tries again
    assert settled(service)["Scale"]["Status"] == "ok" and cluster.group_count() == 4
    # One request per decision, each under its decision's id (the leader applies an id once).
    assert len({r.request_id for r in sent}) == 2
    assert all(r.request_id.startswith(f"autoscaler-{WEB_ID}:") for r in sent)
    assert service.stats["scale_failed"] == 1 and service.stats["scale_ok"] == 1


def test_a_stopped_job_is_not_scaled_and_a_purged_one_is_forgotten(cluster: Cluster) -> None:
    clock = Clock()
    cluster.run_job(web_hcl())
    allocs = cluster.wait_running(2)
    service = new_autoscaler(cluster, clock)
    stop = LeaderRequest(RequestKind.STOP_JOB, request_id="stop", job_id="web")
    assert cluster.leader.submit(stop).ok
    cluster.report(allocs, cpu=100.0, at=clock.now + 11)
    evaluate(service, cluster, clock, 11)
    assert settled(service)["Outcome"] == "target-not-ready"
    purge = LeaderRequest(RequestKind.STOP_JOB, request_id="purge", job_id="web", purge=True)
    assert cluster.leader.submit(purge).ok
    evaluate(service, cluster, clock, 10)
    assert service.policy(WEB_ID) is None and service.decision_log(WEB_ID) == []
    assert service.stats["scale_calls"] == 0


def test_policy_files_are_listed_and_fleet_targets_are_evaluated(
    cluster: Cluster, tmp_path: Path
) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "gpu.hcl").write_text("""
scaling "gpu" {
  enabled = true
  max = 4
  policy {
    check "queue" {
      query = "queued_allocs"
      strategy "target-value" { target = 1 }
    }
    target "fleet" { fleet = "gpu" }
  }
}
""")
    (policies / "broken.hcl").write_text('scaling "x" { policy {} }')
    service = new_autoscaler(cluster, Clock(), policy_dir=policies)
    listed = {p["Path"].rsplit("/", 1)[-1]: p for p in service.policies()}
    assert listed["gpu.hcl"]["Note"] == ""
    assert listed["gpu.hcl"]["Target"] == {"Fleet": "gpu", "NodeSelectorStrategy": "least_busy"}
    assert listed["gpu.hcl"]["Evaluated"]  # cluster policies on fleets are evaluated
    assert "max is required" in listed["broken.hcl"]["Error"]
    assert service.stats["evaluated_policies"] == 1


class GrowingAgent:
    """Hosts the fleet's scale-outs: asked instances never register (the policy waits)."""

    def __init__(self) -> None:
        self.asked: list[int] = []

    def scale_fleet(self, name: str, count: int) -> list[str]:
        self.asked.append(count)
        return [f"new-{len(self.asked)}"]

    def retire_instances(self, node_ids: list[str], deadline_s: float) -> int:
        return len(node_ids)


def test_applied_policies_and_fleet_scalings_outlive_the_autoscaler(cluster: Cluster) -> None:
    """An applied file is kept in Redis; a fleet's scaling is written into its stored spec
    (count, last_scaled_s), and a restarted autoscaler resumes the cooldown from it."""
    cluster.client.hset(NAMES.fleets, "sim", orjson.dumps({**asdict(FLEET), "future": 1}))
    text = """
scaling "sim" {
  enabled = true
  max     = 5
  policy {
    evaluation_interval = "10s"
    cooldown            = "2m"
    check "c" { strategy "fixed-value" { value = 3 } }
    target "fleet" { fleet = "sim" }
  }
}
"""
    clock, agent = Clock(), GrowingAgent()
    targets = FleetTargets(agent, redis_spec_lookup(cluster.client, NAMES.fleets), clock)
    service = new_autoscaler(cluster, clock, fleets=targets)
    (view,) = service.apply_policy("sim.hcl", text)
    policy_id = view["ID"]
    assert view["Policy"]["check"] and view["Target"]["Fleet"] == "sim"
    service.sync_policies()
    evaluate(service, cluster, clock, 10.5)
    decision = settled(service, policy_id)
    assert decision["Outcome"] == "scale" and decision["Scale"]["Status"] == "ok"
    assert agent.asked == [3]
    stored = orjson.loads(cluster.client.hget(NAMES.fleets, "sim") or b"")
    assert stored["count"] == 3 and stored["future"] == 1
    assert abs(stored["last_scaled_s"] - clock.now) < 1
    assert spec_from_stored(stored).count == 3  # what a restarted system hosts
    service.close()

    clock.now += 30  # within the 2m cooldown
    again = GrowingAgent()
    targets = FleetTargets(again, redis_spec_lookup(cluster.client, NAMES.fleets), clock)
    restarted = new_autoscaler(cluster, clock, fleets=targets)
    assert [p["ID"] for p in restarted.policies() if p["Origin"] == "file"] == [policy_id]
    evaluate(restarted, cluster, clock, 10.5)
    held = settled(restarted, policy_id)
    assert held["Outcome"] == "cooldown" and again.asked == []
    assert restarted.delete_policy(policy_id) == [policy_id]
    assert cluster.client.hlen(policies_key(NAMES.prefix)) == 0


def test_jobs_without_policies_are_not_held_and_a_policy_added_later_is_taken_up(
    cluster: Cluster,
) -> None:
    clock = Clock()
    service = new_autoscaler(cluster, clock)
    plain = plain_hcl()
    cluster.run_job(plain)
    system = plain.replace('job "plain" {', 'job "sys" {\n  type = "system"')
    cluster.run_job(system)
    evaluate(service, cluster, clock, 1)
    state = service.replica.store
    # Neither the policy-less service job nor its evaluations (none blocked) were decoded.
    assert state.job("default", "plain") is None
    assert state.evals_by_job("default", "plain") == []
    sys_job = state.job("default", "sys")  # held: its allocations may count as system ones
    assert sys_job is not None and sys_job.type == "system"
    # The same job registered again with a policy is read whole and its policy starts.
    cluster.run_job(web_hcl().replace('job "web"', 'job "plain"'))
    evaluate(service, cluster, clock, 1)
    held = state.job("default", "plain")
    assert held is not None and held.task_groups[0].scaling is not None
    assert service.policy(group_policy_id("default", "plain", "api")) is not None
    # Once held, an update that drops the policy is read whole too, and the policy stops.
    cluster.run_job(plain)
    evaluate(service, cluster, clock, 1)
    held = state.job("default", "plain")
    assert held is not None and held.task_groups[0].scaling is None
    assert service.policy(group_policy_id("default", "plain", "api")) is None


def never_sent(request: LeaderRequest) -> LeaderResponse:
    raise AssertionError("nothing is scaled here")


def test_the_replica_keeps_blocked_evaluations_and_follows_them_only(
    client: redis.Redis,
) -> None:
    """Cluster signals read blocked evaluations: those are decoded and stored, and so are
    their later versions (a blocked one that moved on stops counting); the rest are not."""
    service = AutoscalerService(client, StreamNames("asc-evals"), never_sent)
    job = Job(id="plain", name="plain")
    pending = Evaluation(id="e1", job_id="plain")
    blocked = Evaluation(id="e2", job_id="plain", status=EvalStatus.BLOCKED)
    moved_on = dataclasses.replace(blocked, status=EvalStatus.COMPLETE)
    entries = [
        LogEntry(1, 1, UpsertJob(job, (pending,))),
        LogEntry(
            2,
            1,
            UpsertAllocs((), (dataclasses.replace(pending, status=EvalStatus.COMPLETE), blocked)),
        ),
        LogEntry(3, 1, UpsertEvals((Evaluation(id="e3", job_id="plain"),))),
    ]
    store = service.replica.store
    for entry in entries:
        service.replica.apply_rows([(b"", {b"e": encode_entry(entry)})])
    assert store.latest_index() == 3
    assert store.eval("e1") is None and store.eval("e3") is None
    stored = store.eval("e2")
    assert stored is not None and stored.status is EvalStatus.BLOCKED

    service.replica.apply_rows(
        [(b"", {b"e": encode_entry(LogEntry(4, 1, UpsertEvals((moved_on,))))})]
    )

    stored = store.eval("e2")
    assert stored is not None and stored.status is EvalStatus.COMPLETE
    assert [e.id for e in store.evals()] == ["e2"]


FIXED_SIM_POLICY = """
scaling "sim" {
  enabled = true
  max     = 5
  policy {
    check "c" { strategy "fixed-value" { value = 2 } }
    target "fleet" { fleet = "sim" }
  }
}
"""


def test_with_no_policy_the_replica_dozes_and_a_policy_wakes_it(cluster: Cluster) -> None:
    """Nothing reads the replica without a policy: the log is passed over unread until a
    job with a scaling block comes (or a policy is applied), and then the replica is
    rebuilt, so that what it passed over counts (the allocations placed meanwhile)."""
    clock = Clock()
    service = new_autoscaler(cluster, clock)
    evaluate(service, cluster, clock, 1)
    assert service.replica.dozing()
    plain = plain_hcl()
    cluster.run_job(plain)
    cluster.wait_running(2, "plain")
    evaluate(service, cluster, clock, 1)
    store = service.replica.store
    assert service.replica.index == cluster.leader.store.latest_index()
    assert store.latest_index() < service.replica.index and store.job("default", "plain") is None
    assert service.alloc_counts.counts("default", "plain", "api") == (0, 0)

    cluster.run_job(web_hcl())  # a scaling block: the replica wakes and reads it all
    evaluate(service, cluster, clock, 1)
    assert not service.replica.dozing() and service.replica.rewinds == 1
    assert service.policy(WEB_ID) is not None
    assert service.alloc_counts.counts("default", "plain", "api")[0] == 2  # placed meanwhile

    purge = LeaderRequest(RequestKind.STOP_JOB, request_id="purge", job_id="web", purge=True)
    assert cluster.leader.submit(purge).ok
    evaluate(service, cluster, clock, 1)
    assert service.policy(WEB_ID) is None
    assert not service.replica.dozing()  # it woke (rebuilt) but seconds ago
    evaluate(service, cluster, clock, DOZE_AFTER_S)
    assert service.replica.dozing()

    (view,) = service.apply_policy("sim.hcl", FIXED_SIM_POLICY)  # applied: wakes it too
    evaluate(service, cluster, clock, 1)  # the turn asks the replica to wake...
    assert service.replica.dozing()
    assert service.evaluate_due(clock.now + 3600) == 0  # ...and reads nothing stale meanwhile
    service.replica.catch_up()  # the replica's thread: its next read rebuilds the store
    assert not service.replica.dozing() and service.replica.rewinds == 2
    assert service.alloc_counts.counts("default", "plain", "api")[0] == 2
    assert service.policy(view["ID"]) is not None


def test_a_wake_up_that_brings_no_policy_dozes_again_only_after_a_while(
    cluster: Cluster,
) -> None:
    """Every wake-up rebuilds the store: one that finds no policy (a driver config that
    only looks like a scaling block) is not followed by another before DOZE_AFTER_S."""
    clock = Clock()
    service = new_autoscaler(cluster, clock)
    evaluate(service, cluster, clock, 1)
    assert service.replica.dozing()
    service.replica.wake()  # what a false match does
    service.replica.catch_up()
    assert service.replica.rewinds == 1 and len(service.registry) == 0
    evaluate(service, cluster, clock, 1)  # the turn after a wake-up starts the wait again
    evaluate(service, cluster, clock, DOZE_AFTER_S - 1)
    assert not service.replica.dozing()
    evaluate(service, cluster, clock, 1)
    assert service.replica.dozing()
