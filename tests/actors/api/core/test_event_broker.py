"""The event buffer, its subscribers and their filters (actors/api/core/event_broker.py,
event_topics.py): what a subscriber reads, from which index, and how the buffer stays bounded
whatever its subscribers do."""

from __future__ import annotations

import orjson
import pytest

from actors.api.core.errors import ApiError
from actors.api.core.event_broker import EventBroker, EventStream
from actors.api.core.event_topics import EventFilter, parse_index, parse_topics
from actors.api.core.events import Event, alloc_event, eval_event, job_event, node_event
from contracts import Allocation, Evaluation, Job, Node
from contracts.acl import Acl

ALL = parse_topics([])


def job_ev(index: int, job_id: str = "web", namespace: str = "default") -> Event:
    return job_event(Job(id=job_id, namespace=namespace), "JobRegistered", index)


def alloc_ev(index: int, alloc_id: str, job_id: str = "web") -> Event:
    return alloc_event(Allocation(id=alloc_id, job_id=job_id), "AllocationUpdated", index)


def lines(stream: EventStream) -> list[dict[str, object]]:
    chunks = stream.read()
    assert chunks is not None
    return [orjson.loads(c) for c in chunks]


def indexes(stream: EventStream) -> list[object]:
    return [line["Index"] for line in lines(stream)]


# -- filters -------------------------------------------------------------------------------------


def test_topics_parse_as_nomad_parses_them_and_bad_ones_are_named() -> None:
    assert parse_topics([]) == {"*": frozenset({"*"})}
    assert parse_topics(["Job", "Job:web", "Node:n1"]) == {
        "Job": frozenset({"*", "web"}),
        "Node": frozenset({"n1"}),
    }
    for raw, word in [("Job:a:b", "Job:a:b"), (":x", ":x"), ("Jobs", "Jobs")]:
        with pytest.raises(ApiError) as bad:
            parse_topics([raw])
        assert bad.value.status == 400 and "topic" in bad.value.message
        assert word in bad.value.message
    assert parse_index("") == 0 and parse_index("17") == 17
    with pytest.raises(ApiError, match="index: expected a non-negative integer, got '-1'"):
        parse_index("-1")


def test_events_match_by_key_filter_key_and_namespace() -> None:
    web_alloc = alloc_ev(3, "a1", job_id="web")
    node = node_event(Node(id="n1"), "NodeRegistration", 4)
    other_ns = job_ev(5, namespace="batch")
    by_job = EventFilter(parse_topics(["Allocation:web", "Evaluation:web"]))
    assert by_job.matches(web_alloc)  # the job ID is an allocation's filter key
    assert not by_job.matches(alloc_ev(3, "a2", job_id="db"))
    assert by_job.matches(eval_event(Evaluation(id="e1", job_id="web"), "EvaluationUpdated", 1))
    assert not by_job.matches(node) and not by_job.matches(job_ev(1))
    assert EventFilter(parse_topics(["Allocation:a1"])).matches(web_alloc)  # its own key
    everything = EventFilter(ALL)
    assert everything.matches(node) and not everything.matches(other_ns)
    assert EventFilter(ALL, "batch").matches(other_ns) and EventFilter(ALL, "*").matches(other_ns)
    assert EventFilter(ALL, "batch").matches(node)  # nodes have no namespace
    assert EventFilter(parse_topics(["*:web"])).matches(job_ev(1))
    assert EventFilter(parse_topics(["Job:*", "Job:db"])).matches(job_ev(1))


def test_what_each_topic_needs_of_a_token() -> None:
    reader = Acl(namespaces={"default": frozenset({"read-job"})})
    node_reader = Acl(node="read")
    every_ns = Acl(namespaces={"*": frozenset({"read-job"})})
    jobs = EventFilter(parse_topics(["Job", "Allocation", "Evaluation", "Deployment", "Service"]))
    assert jobs.allowed(reader) and not jobs.allowed(node_reader)
    assert not EventFilter(jobs.topics, "batch").allowed(reader)
    assert not EventFilter(jobs.topics, "*").allowed(reader)  # "*" needs a "*" policy
    assert EventFilter(jobs.topics, "*").allowed(every_ns)
    nodes = EventFilter(parse_topics(["Node"]))
    assert nodes.allowed(node_reader) and not nodes.allowed(reader)
    for topics in (ALL, parse_topics(["ACLToken"]), parse_topics(["Job", "NodePool"])):
        assert not EventFilter(topics).allowed(every_ns)
        assert EventFilter(topics).allowed(Acl(management=True))


# -- the buffer and its subscribers -------------------------------------------------------------


def test_a_subscriber_reads_from_the_index_it_asks_for_and_the_filter_skips_the_rest() -> None:
    broker = EventBroker()
    broker.publish(2, [job_ev(2)])
    broker.publish(3, [alloc_ev(3, "a1"), alloc_ev(3, "a2", job_id="db")])
    broker.publish(5, [job_ev(5, job_id="db")])
    assert indexes(broker.subscribe(EventFilter(ALL))) == [2, 3, 5]  # 0: what is held
    assert indexes(broker.subscribe(EventFilter(ALL), index=3)) == [3, 5]  # from 3 on
    assert indexes(broker.subscribe(EventFilter(ALL), index=4)) == [5]
    web = broker.subscribe(EventFilter(parse_topics(["Allocation:web"])))
    [line] = lines(web)
    assert line == {"Index": 3, "Events": [orjson.loads(alloc_ev(3, "a1").encoded())]}
    assert web.cursor == 5 and lines(web) == []  # read past what it skipped
    broker.publish(6, [alloc_ev(6, "a3")])
    assert indexes(web) == [6]
    assert web.heartbeat() == b"{}\n"


def test_the_buffer_keeps_its_last_items_and_events_and_starts_late_subscribers_there() -> None:
    broker = EventBroker(max_items=3, max_events=5)
    for index in range(1, 6):
        broker.publish(index, [job_ev(index)])
    assert broker.oldest_index() == 3  # three items
    assert indexes(broker.subscribe(EventFilter(ALL), index=1)) == [3, 4, 5]  # the closest
    broker.publish(6, [alloc_ev(6, f"a{n}") for n in range(4)])
    assert broker.oldest_index() == 5  # four events more: five at most
    broker.publish(7, [alloc_ev(7, f"b{n}") for n in range(9)])
    assert broker.oldest_index() == 7  # the newest index is kept whole
    broker.publish(7, [job_ev(7)])  # an index already published is not published again
    assert [len(line["Events"]) for line in lines(broker.subscribe(EventFilter(ALL)))] == [9]  # type: ignore[arg-type]


def test_a_subscriber_that_falls_behind_the_buffer_ends_with_an_error_line() -> None:
    broker = EventBroker(max_items=2)
    broker.publish(1, [job_ev(1)])
    slow = broker.subscribe(EventFilter(ALL))
    assert indexes(slow) == [1]
    for index in range(2, 5):  # 2 leaves the buffer before the subscriber read it
        broker.publish(index, [job_ev(index)])
    [error] = lines(slow)
    assert error == {
        "Error": "event dropped from buffer: this subscriber fell too far behind (read up to "
        "index 1, the buffer now starts after 2); resubscribe with index=2"
    }
    assert slow.read() is None and broker.dropped_subscribers == 1
    slow.close()
    assert broker.subscribers == 0


def test_subscribers_are_bounded_and_each_place_is_freed_once() -> None:
    broker = EventBroker(max_subscribers=2)
    first = broker.subscribe(EventFilter(ALL))
    broker.subscribe(EventFilter(ALL))
    with pytest.raises(ApiError) as full:
        broker.subscribe(EventFilter(ALL))
    assert full.value.status == 429 and "too many event stream subscribers (2)" in str(full.value)
    first.close()
    first.close()
    assert broker.subscribers == 1 and first.read() is None
    broker.subscribe(EventFilter(ALL))
    assert broker.refused == 1


def test_a_reset_ends_every_subscriber_and_new_ones_start_after_it() -> None:
    broker = EventBroker()
    broker.publish(4, [job_ev(4)])
    before = broker.subscribe(EventFilter(ALL))
    assert indexes(before) == [4]
    broker.reset()
    [error] = lines(before)
    assert "reloaded a snapshot; resubscribe with index=5" in str(error["Error"])
    broker.publish(9, [job_ev(9)])
    assert indexes(broker.subscribe(EventFilter(ALL), index=2)) == [9]


def test_a_token_that_loses_its_rights_ends_the_stream_at_the_next_heartbeat() -> None:
    now = [0.0]
    broker = EventBroker(heartbeat_s=10.0, clock=lambda: now[0])
    rights = [True]
    stream = broker.subscribe(EventFilter(ALL), allowed=lambda: rights[0])
    broker.publish(1, [job_ev(1)])
    rights[0] = False
    assert indexes(stream) == [1]  # not asked again before a heartbeat's time
    now[0] = 10.0
    [error] = lines(stream)
    assert error == {"Error": "Permission denied: the token no longer allows this stream"}
    assert stream.read() is None
