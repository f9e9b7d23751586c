"""`GET /v1/event/stream` through the API core (actors/api/core/event_routes.py): its
parameters, the ACL needs of each topic, and the stream it answers with."""

from __future__ import annotations

import orjson

from actors.api.core import Api, ApiRequest
from actors.api.core.event_broker import EventBroker, EventStream
from actors.api.core.events import job_event, node_event
from actors.api.core.streaming import MultiQuery
from contracts import Job, Node

from .conftest import Client, MemoryBackend


def with_broker(backend: MemoryBackend, **limits: int) -> EventBroker:
    broker = EventBroker(**limits)  # type: ignore[arg-type]
    backend.events = broker  # what the running agent's backend carries
    return broker


def stream_of(api: Api, pairs: list[tuple[str, str]], token: str = "") -> EventStream:
    request = ApiRequest("GET", "/v1/event/stream", MultiQuery(pairs), b"", token)
    response = api.handle(request)
    assert response.status == 200, response.body
    assert isinstance(response.body, EventStream)
    return response.body


def test_a_backend_without_events_answers_501(call: Client) -> None:
    reply = call("GET", "/v1/event/stream")
    assert (reply.status, reply.body) == (501, "this agent serves no event stream")


def test_bad_parameters_are_400s_naming_them(backend: MemoryBackend, call: Client) -> None:
    with_broker(backend)
    assert call("GET", "/v1/event/stream", topic="Job:a:b").status == 400
    reply = call("GET", "/v1/event/stream", topic="Widget")
    assert reply.status == 400 and reply.body.startswith("topic: unknown topic 'Widget'")
    reply = call("GET", "/v1/event/stream", index="x")
    assert (reply.status, reply.body) == (400, "index: expected a non-negative integer, got 'x'")


def test_repeated_topics_and_the_index_select_what_is_streamed(backend: MemoryBackend) -> None:
    broker = with_broker(backend)
    broker.publish(3, [job_event(Job(id="web"), "JobRegistered", 3)])
    broker.publish(4, [node_event(Node(id="n1"), "NodeRegistration", 4)])
    broker.publish(5, [job_event(Job(id="db"), "JobRegistered", 5)])
    api = Api(backend)
    both = stream_of(api, [("topic", "Job:web"), ("topic", "Node")])
    assert [orjson.loads(c)["Index"] for c in both.read() or []] == [3, 4]
    later = stream_of(api, [("topic", "Job"), ("index", "4")])
    [line] = later.read() or []
    assert orjson.loads(line)["Events"][0]["Key"] == "db"
    assert broker.subscribers == 2
    both.close()
    later.close()
    assert broker.subscribers == 0


def test_with_acls_each_topic_needs_what_nomad_asks() -> None:
    backend = MemoryBackend(acl_enabled=True)
    with_broker(backend)
    api = Api(backend)
    root = Client(api, Client(api)("POST", "/v1/acl/bootstrap").body["SecretID"])
    rules = 'namespace "default" { policy = "read" }'
    assert root("POST", "/v1/acl/policy/r", {"Name": "r", "Rules": rules}).status == 200
    reader = root("POST", "/v1/acl/token", {"Name": "r", "Policies": ["r"]}).body["SecretID"]
    as_reader = Client(api, reader)
    assert Client(api)("GET", "/v1/event/stream", topic="Job").status == 403  # no token
    assert stream_of(api, [("topic", "Job"), ("topic", "Allocation:web")], reader)
    for query in ({"topic": "Node"}, {}, {"topic": "Job", "namespace": "*"}):
        reply = as_reader("GET", "/v1/event/stream", **query)
        assert (reply.status, reply.body) == (403, "Permission denied"), query
    assert stream_of(api, [], root.token)  # every topic: the management token
