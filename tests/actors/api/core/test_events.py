"""Log entries to Nomad's events (actors/api/core/events.py): entries applied to a real state
store, translated from the store as it stands right after each, as the API's replica does."""

from __future__ import annotations

import dataclasses

import orjson

from actors.api.core import shapes
from actors.api.core.event_broker import EventBroker
from actors.api.core.events import Event, EventSource, EventTranslator
from actors.state import StateStore
from contracts import (
    Allocation,
    ClientStatus,
    DrainStrategy,
    EvalStatus,
    Evaluation,
    Job,
    Node,
    Resources,
    Task,
    TaskGroup,
)
from contracts.deployment import Deployment, DeploymentState
from contracts.node import NodeEligibility, NodeStatus
from contracts.scaling import ScalingEvent
from contracts.state_log import (
    AppendScalingEvent,
    DeleteNodes,
    LogEntry,
    PurgeJob,
    StateChange,
    UpdateAllocsClientStatus,
    UpsertAllocs,
    UpsertDeployments,
    UpsertEvals,
    UpsertJob,
    UpsertNodes,
    client_update,
)


class Log:
    """A state store and a translator following it, entry by entry."""

    def __init__(self) -> None:
        self.store = StateStore()
        self.translator = EventTranslator()

    def apply(self, change: StateChange, request_id: str = "") -> list[Event]:
        index = self.store.latest_index() + 1
        entry = LogEntry(index, 1, self.store.stamped(change, index), request_id)
        self.store.apply(entry)
        return self.translator.events(entry, self.store)


def job(job_id: str = "web", namespace: str = "default") -> Job:
    task = Task(name="t", driver="mock", resources=Resources(cpu=100, memory_mb=64))
    return Job(
        id=job_id, name=job_id, namespace=namespace, task_groups=(TaskGroup("g", 1, tasks=(task,)),)
    )


def evaluation(eval_id: str, job_id: str = "web", **fields: object) -> Evaluation:
    return dataclasses.replace(Evaluation(id=eval_id, job_id=job_id), **fields)  # type: ignore[arg-type]


def alloc(alloc_id: str, job_id: str = "web", eval_id: str = "e1") -> Allocation:
    return Allocation(
        id=alloc_id, job_id=job_id, eval_id=eval_id, node_id="n1", task_group="g", name="web.g[0]"
    )


def summary(events: list[Event]) -> list[tuple[str, str, str]]:
    return [(e.topic, e.type, e.key) for e in events]


def test_a_registration_is_the_job_and_its_eval_as_JobRegistered_with_the_stored_records() -> None:
    log = Log()
    events = log.apply(UpsertJob(job(), (evaluation("e1"),)))
    assert summary(events) == [
        ("Job", "JobRegistered", "web"),
        ("Evaluation", "JobRegistered", "e1"),
    ]
    job_event, eval_event = events
    stored = log.store.job("default", "web")
    assert stored is not None and job_event.record is stored and stored.modify_index == 1
    assert (job_event.namespace, job_event.filter_keys, job_event.index) == ("default", None, 1)
    assert eval_event.filter_keys == ("web", "")
    wire = orjson.loads(job_event.encoded())
    assert wire == {
        "Topic": "Job",
        "Type": "JobRegistered",
        "Key": "web",
        "Namespace": "default",
        "FilterKeys": None,
        "Index": 1,
        "Payload": {"Job": shapes.job_to_nomad(stored)},  # what GET /v1/job/web serves
    }
    ev = log.store.eval("e1")
    assert ev is not None
    assert orjson.loads(eval_event.encoded())["Payload"] == {"Evaluation": shapes.evaluation(ev)}


def test_a_stop_is_JobDeregistered_and_a_purge_makes_only_its_eval_event() -> None:
    log = Log()
    log.apply(UpsertJob(job(), (evaluation("e1"),)))
    stopped = log.apply(UpsertJob(job().replace(stop=True), (evaluation("e2"),)))
    assert summary(stopped) == [
        ("Job", "JobDeregistered", "web"),
        ("Evaluation", "JobDeregistered", "e2"),
    ]
    assert orjson.loads(stopped[0].encoded())["Payload"]["Job"]["Stop"] is True
    purged = log.apply(PurgeJob("default", "web", (evaluation("e3"),)))
    assert summary(purged) == [("Evaluation", "JobDeregistered", "e3")]


def test_setting_a_version_stable_and_scaling_events_publish_nothing_as_in_nomad() -> None:
    log = Log()
    log.apply(UpsertJob(job(), (evaluation("e1"),)))
    assert log.apply(UpsertJob(job().replace(stable=True), keep_version=True)) == []
    event = ScalingEvent(time=1, count=None, previous_count=1, message="m")
    assert log.apply(AppendScalingEvent("default", "web", "g", event)) == []


def test_a_plan_is_PlanResult_for_allocs_and_EvaluationUpdated_for_the_evals_it_writes() -> None:
    log = Log()
    log.apply(UpsertJob(job(), (evaluation("e1"),)))
    done = evaluation("e1", status=EvalStatus.COMPLETE)
    events = log.apply(UpsertAllocs((alloc("a1"), alloc("a2")), (done,)), "plan/e1/tok/0")
    assert summary(events)[:3] == [
        ("Allocation", "PlanResult", "a1"),
        ("Allocation", "PlanResult", "a2"),
        ("Evaluation", "EvaluationUpdated", "e1"),
    ]
    payload = orjson.loads(events[0].encoded())["Payload"]["Allocation"]
    stored = log.store.alloc("a1")
    assert stored is not None and payload == shapes.alloc_full(stored, None)
    assert payload["Job"] is None and payload["CreateIndex"] == 2
    assert events[0].filter_keys == ("web", "")


def test_an_operator_mark_is_AllocationUpdateDesiredStatus_for_allocs_and_evals() -> None:
    log = Log()
    log.apply(UpsertJob(job(), (evaluation("e1"),)))
    log.apply(UpsertAllocs((alloc("a1"),)), "plan/e1/tok/0")
    marked = log.apply(UpsertAllocs((alloc("a1"),), (evaluation("e2"),)), "request-7")
    assert summary(marked)[:2] == [
        ("Allocation", "AllocationUpdateDesiredStatus", "a1"),
        ("Evaluation", "AllocationUpdateDesiredStatus", "e2"),
    ]


def test_client_reports_are_AllocationUpdated_with_the_merged_record_and_a_job_status_change() -> (
    None
):
    log = Log()
    log.apply(UpsertJob(job(), (evaluation("e1"),)))
    log.apply(
        UpsertAllocs((alloc("a1"),), (evaluation("e1", status=EvalStatus.COMPLETE),)),
        "plan/e1/tok/0",
    )
    running = client_update("a1", ClientStatus.RUNNING, "started", 5, "n1")
    events = log.apply(UpdateAllocsClientStatus((running,)))
    # the job was already running (since the plan): its record did not change
    assert summary(events) == [("Allocation", "AllocationUpdated", "a1")]
    payload = orjson.loads(events[0].encoded())["Payload"]["Allocation"]
    assert (payload["ClientStatus"], payload["ClientDescription"]) == ("running", "started")
    assert payload["TaskGroup"] == "g"  # the stored record, not the report alone
    finished = client_update("a1", ClientStatus.COMPLETE, "done", 6, "n1")
    done = log.apply(UpdateAllocsClientStatus((finished,)))
    dead = log.store.job("default", "web")
    assert dead is not None and dead.modify_index == done[0].index
    assert summary(done) == [
        ("Allocation", "AllocationUpdated", "a1"),
        ("Job", "AllocationUpdated", "web"),
    ]
    assert orjson.loads(done[1].encoded())["Payload"]["Job"]["Status"] == str(dead.status)


def test_an_eval_update_is_EvaluationUpdated_and_unknown_records_are_skipped() -> None:
    log = Log()
    log.apply(UpsertJob(job(), (evaluation("e1"),)))
    events = log.apply(UpsertEvals((evaluation("e1", status=EvalStatus.BLOCKED),)))
    assert summary(events)[0] == ("Evaluation", "EvaluationUpdated", "e1")
    report = client_update("nope", ClientStatus.RUNNING, "", 1, "n1")
    assert log.apply(UpdateAllocsClientStatus((report,))) == []


def test_node_events_are_told_apart_by_what_changed() -> None:
    log = Log()
    node = Node(id="n1", name="one")
    assert summary(log.apply(UpsertNodes((node,)))) == [("Node", "NodeRegistration", "n1")]
    drained = dataclasses.replace(
        node, drain_strategy=DrainStrategy(), scheduling_eligibility=NodeEligibility.INELIGIBLE
    )
    assert summary(log.apply(UpsertNodes((drained,))))[0][1] == "NodeDrain"
    down = dataclasses.replace(drained, status=NodeStatus.DOWN)
    events = log.apply(UpsertNodes((down,)))
    assert summary(events) == [("Node", "NodeStreamEvent", "n1")]
    assert events[0].namespace == "" and events[0].filter_keys is None
    stored = log.store.node("n1")
    assert stored is not None
    assert orjson.loads(events[0].encoded())["Payload"] == {"Node": shapes.node_full(stored)}
    assert summary(log.apply(UpsertNodes((down,))))[0][1] == "NodeRegistration"
    stored = log.store.node("n1")
    gone = log.apply(DeleteNodes(("n1", "unknown")))
    assert summary(gone) == [("Node", "NodeDeregistration", "n1")]
    assert gone[0].record is stored  # the last record known, now gone from the store


def test_a_translator_seeded_from_a_store_knows_its_nodes() -> None:
    log = Log()
    log.apply(UpsertNodes((Node(id="n1"),)))
    fresh = EventTranslator()
    fresh.seed(log.store)
    log.translator = fresh
    down = Node(id="n1", status=NodeStatus.DOWN)
    assert summary(log.apply(UpsertNodes((down,)))) == [("Node", "NodeStreamEvent", "n1")]


def test_the_source_publishes_entries_skips_a_restored_snapshot_and_survives_a_bad_entry() -> None:
    log = Log()
    broker = EventBroker()
    source = EventSource(broker.publish, broker.reset, log.translator)
    source.attach(log.store)

    def feed(change: StateChange, index: int | None = None) -> None:
        at = index if index is not None else log.store.latest_index() + 1
        entry = LogEntry(at, 1, log.store.stamped(change, at))
        log.store.apply(entry)
        source.on_entry(entry, log.store)

    feed(UpsertNodes((Node(id="n1"),)))
    assert broker.oldest_index() == 1
    source.reset()  # the replica reloads a snapshot at index 5: its chunks make no events
    assert broker.oldest_index() == 0
    feed(UpsertNodes((Node(id="n2"),)), index=5)
    feed(UpsertJob(job(), (evaluation("e1"),)), index=5)
    assert broker.oldest_index() == 0
    feed(UpsertNodes((Node(id="n2", status=NodeStatus.DOWN),)), index=6)
    assert broker.oldest_index() == 6  # after the snapshot: events again, n2 known

    class Broken:
        def nodes(self) -> list[Node]:
            return []

        def node(self, node_id: str) -> Node:
            raise RuntimeError("a bug")

    bad = LogEntry(7, 1, UpsertNodes((Node(id="n3"),)))
    source.on_entry(bad, Broken())  # type: ignore[arg-type]
    assert broker.oldest_index() == 6


def test_a_deployment_change_is_a_deployment_event_keyed_by_its_job() -> None:
    log = Log()
    log.apply(UpsertJob(job()))
    deployment = Deployment("d1", job_id="web", task_groups={"g": DeploymentState(desired_total=1)})
    [event] = log.apply(UpsertDeployments((deployment,)))
    assert (event.topic, event.type, event.key) == ("Deployment", "DeploymentStatusUpdate", "d1")
    assert event.filter_keys == ("web",)
    body = orjson.loads(event.encoded())
    assert body["Payload"]["Deployment"]["ID"] == "d1"
    assert body["Payload"]["Deployment"]["TaskGroups"]["g"]["DesiredTotal"] == 1
    assert body["Payload"]["Deployment"]["CreateIndex"] == event.index
