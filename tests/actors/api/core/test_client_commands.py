"""`/v1/client/allocation/:id/signal`, `/v1/client/allocation/:id/gc` and `/v1/client/gc` on
the API core: what the API checks itself (the signal's name, the task, the allocation, its
node, the ACL in the allocation's namespace), the commands it sends the nodes' agents, how it
answers theirs, and the recorded events in the allocation's TaskStates."""

from __future__ import annotations

import dataclasses

import pytest

from actors.agent.core import FleetSpec
from actors.api.core import Api
from bench.python_nomad_files import example_job
from contracts.messages import LeaderRequest, RequestKind
from contracts.node_commands import (
    NodeCommandKind,
    NodeCommandReply,
    ReplyError,
    signaling_event,
)

from .conftest import Client, MemoryBackend


def placed(backend: MemoryBackend, call: Client) -> dict:
    assert call("POST", "/v1/jobs", example_job()).status == 200
    backend.schedule_pending()
    (alloc,) = call("GET", "/v1/job/example/allocations").body
    return dict(alloc)


def test_a_signal_is_sent_to_the_allocations_node_and_answered_as_nomad(
    backend: MemoryBackend, call: Client
) -> None:
    alloc = placed(backend, call)
    path = f"/v1/client/allocation/{alloc['ID']}/signal"
    reply = call("POST", path, {"Signal": "sigusr1", "Task": None})  # python-nomad's body
    assert (reply.status, reply.body) == (200, {"Index": 0})  # Nomad's GenericResponse
    (sent,) = backend.sent
    assert (sent.kind, sent.node_id, sent.alloc_id) == (
        NodeCommandKind.SIGNAL,
        alloc["NodeID"],
        alloc["ID"],
    )
    assert (sent.signal, sent.task) == ("SIGUSR1", "")  # Nomad's name; every task
    assert call("PUT", path, {"Signal": "SIGHUP", "Task": "redis"}).status == 200
    assert backend.sent[-1].task == "redis"


@pytest.mark.parametrize(
    ("body", "status", "text"),
    [
        ({"Signal": "INVALID-SIGNAL"}, 400, "Signal: invalid signal 'INVALID-SIGNAL'"),
        ({}, 400, "Signal: a signal name is required"),
        ({"Signal": 15}, 400, "Signal"),
        (
            {"Signal": "SIGHUP", "Task": "nope"},
            400,
            'Task: Task not found: "nope" is not a task of allocation',
        ),
    ],
)
def test_what_the_api_can_check_it_refuses_without_asking_the_node(
    backend: MemoryBackend, call: Client, body: dict, status: int, text: str
) -> None:
    alloc = placed(backend, call)
    reply = call("POST", f"/v1/client/allocation/{alloc['ID']}/signal", body)
    assert reply.status == status and text in reply.body
    assert backend.sent == []


def test_an_unknown_allocation_or_a_down_node_is_a_404(
    backend: MemoryBackend, call: Client
) -> None:
    missing = call("POST", "/v1/client/allocation/nope/signal", {"Signal": "SIGHUP"})
    assert (missing.status, missing.body) == (404, 'Unknown allocation "nope"')
    alloc = placed(backend, call)
    node = backend.store.node(alloc["NodeID"])
    assert node is not None
    backend.write(
        LeaderRequest(RequestKind.UPSERT_NODES, nodes=(dataclasses.replace(node, status="down"),))
    )
    down = call("POST", f"/v1/client/allocation/{alloc['ID']}/signal", {"Signal": "SIGHUP"})
    assert down.status == 404 and down.body.startswith(f'No path to node "{node.id}"')
    assert backend.sent == []


@pytest.mark.parametrize(
    ("answer", "status", "text"),
    [
        (None, 504, "did not answer in time"),
        (NodeCommandReply("c", "Task not running", ReplyError.INVALID), 400, "Task not running"),
        (NodeCommandReply("c", 'Unknown allocation "x"', ReplyError.NOT_FOUND), 404, "Unknown"),
        (NodeCommandReply("c", "EPERM", ReplyError.FAILED), 500, "EPERM"),
    ],
)
def test_the_agents_answer_becomes_the_status(
    backend: MemoryBackend,
    call: Client,
    answer: NodeCommandReply | None,
    status: int,
    text: str,
) -> None:
    alloc = placed(backend, call)
    backend.answer = lambda command: answer
    reply = call("POST", f"/v1/client/allocation/{alloc['ID']}/signal", {"Signal": "SIGTERM"})
    assert reply.status == status and text in reply.body


def test_recorded_events_show_in_the_allocations_task_states(
    backend: MemoryBackend, call: Client
) -> None:
    alloc = placed(backend, call)
    at = alloc["CreateTime"] + 5
    backend.events[alloc["ID"]] = [signaling_event("redis", "SIGUSR1", at)]
    state = call("GET", f"/v1/allocation/{alloc['ID']}").body["TaskStates"]["redis"]
    signaling = state["Events"][-1]
    assert signaling["Type"] == "Signaling" and signaling["Time"] == at
    assert signaling["DisplayMessage"] == "Task being sent signal SIGUSR1"
    assert signaling["Details"] == {"signal": "SIGUSR1"} and signaling["TaskSignal"] == "SIGUSR1"
    # Each task keeps its newest ten, as Nomad's client does.
    backend.events[alloc["ID"]] = [signaling_event("redis", "SIGHUP", at + n) for n in range(12)]
    events = call("GET", f"/v1/allocation/{alloc['ID']}").body["TaskStates"]["redis"]["Events"]
    assert len(events) == 10 and events[-1]["Time"] == at + 11


def test_gc_of_one_allocation_waits_for_it_to_stop(backend: MemoryBackend, call: Client) -> None:
    alloc = placed(backend, call)
    path = f"/v1/client/allocation/{alloc['ID']}/gc"
    running = call("GET", path)
    assert running.status == 400 and running.body.startswith(
        "No such allocation on client, or allocation not eligible for GC"
    )
    assert call("POST", f"/v1/allocation/{alloc['ID']}/stop").status == 200
    backend.schedule_pending()  # the scheduler stops it (and places its replacement)
    done = call("GET", path)
    assert (done.status, done.body) == (200, None)
    (sent,) = backend.sent
    assert (sent.kind, sent.alloc_id, sent.node_id) == (
        NodeCommandKind.GC_ALLOC,
        alloc["ID"],
        alloc["NodeID"],
    )
    assert call("GET", "/v1/client/allocation/nope/gc").status == 404


def test_gc_of_nodes_sends_each_its_terminal_allocations(
    backend: MemoryBackend, call: Client
) -> None:
    alloc = placed(backend, call)
    assert call("GET", "/v1/client/gc").status == 200
    assert backend.sent == []  # nothing terminal anywhere: no node is bothered
    assert call("PUT", "/v1/client/gc", node_id=alloc["NodeID"]).status == 200
    assert [(c.kind, c.node_id, c.alloc_ids) for c in backend.sent] == [
        (NodeCommandKind.GC, alloc["NodeID"], ())
    ]
    assert call("POST", f"/v1/allocation/{alloc['ID']}/stop").status == 200
    backend.schedule_pending()
    backend.sent.clear()
    assert call("GET", "/v1/client/gc").status == 200
    assert [(c.node_id, c.alloc_ids) for c in backend.sent] == [(alloc["NodeID"], (alloc["ID"],))]
    unknown = call("GET", "/v1/client/gc", node_id="nope")
    assert (unknown.status, unknown.body) == (404, 'Unknown node "nope"')
    backend.answer = lambda command: None
    silent = call("GET", "/v1/client/gc")
    assert silent.status == 504 and alloc["NodeID"] in silent.body


def test_acls_are_checked_in_the_allocations_namespace_as_nomads_client_does() -> None:
    backend = MemoryBackend(acl_enabled=True)
    backend.apply_fleet(FleetSpec(name="sim", count=1, cpu_mhz=4000, memory_mb=8192))
    api = Api(backend)
    root = Client(api, Client(api)("POST", "/v1/acl/bootstrap").body["SecretID"])
    alloc = placed(backend, root)

    def token(rules: str) -> Client:
        assert root("POST", "/v1/acl/policy/p", {"Name": "p", "Rules": rules}).status == 200
        secret = root("POST", "/v1/acl/token", {"Name": "t", "Policies": ["p"]}).body["SecretID"]
        return Client(api, secret)

    signal_path = f"/v1/client/allocation/{alloc['ID']}/signal"
    reader = token('namespace "default" { policy = "read" }')
    assert reader("POST", signal_path, {"Signal": "SIGHUP"}).status == 403
    # Its request names another namespace: the allocation's own is what counts.
    lifecycle = token('namespace "default" { capabilities = ["alloc-lifecycle"] }')
    assert lifecycle("POST", signal_path, {"Signal": "SIGHUP"}, namespace="other").status == 200
    assert lifecycle("GET", "/v1/client/gc").status == 403  # node write
    assert Client(api)("POST", signal_path, {"Signal": "SIGHUP"}).status == 403  # no token
    assert root("GET", "/v1/client/gc").status == 200
    # Only the permitted signal reached a node (nothing was terminal for the GC to send).
    assert [c.kind for c in backend.sent] == [NodeCommandKind.SIGNAL]
