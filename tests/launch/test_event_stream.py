"""`/v1/event/stream` against a running agent over real HTTP (real Ray actors, the embedded
Redis, ACLs on): a client follows a job's registration, evaluation and allocations without
polling, filtered by topic and key, and resumes from an index; each topic's ACL need."""

from __future__ import annotations

import contextlib
import http.client
import queue
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import nomad
import orjson
import pytest

from actors.agent.core import FleetSpec
from actors.api.core.shapes import job_to_nomad
from contracts.jobspec import parse_hcl_with_warnings
from launch.system import DroverSystem, SystemConfig

TOKEN = "9c3b1a7e-2d4f-4e8a-b6c5-7d1e0f2a3b4c"

JOB = """
job "{job_id}" {{
  datacenters = ["dc1"]
  group "front" {{
    count = 2
    task "server" {{
      driver = "mock"
      config {{ run_for = "1h" }}
      resources {{
        cpu    = 40
        memory = 32
      }}
    }}
  }}
}}
"""


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DroverSystem]:
    config = SystemConfig(
        data_dir=Path(tmp_path_factory.mktemp("drover-events")),
        workers=1,
        num_cpus=2,
        fleets=[FleetSpec(name="sim", count=3, cpu_mhz=4000, memory_mb=8192, disk_mb=20_000)],
        http_addr="127.0.0.1:0",
        acl_enabled=True,
        acl_bootstrap_token=TOKEN,
    )
    with DroverSystem(config) as running:
        yield running


def call(
    system: DroverSystem, method: str, path: str, body: Any = None, token: str = TOKEN
) -> tuple[int, Any]:
    data = orjson.dumps(body) if body is not None else None
    request = urllib.request.Request(system.http_address + path, data=data, method=method)
    request.add_header("X-Nomad-Token", token)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, orjson.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode().strip()


def register(system: DroverSystem, job_id: str) -> dict[str, Any]:
    job = job_to_nomad(parse_hcl_with_warnings(JOB.format(job_id=job_id))[0])
    status, reply = call(system, "POST", "/v1/jobs", {"Job": job})
    assert status == 200, reply
    return dict(reply)


class Stream:
    """An open `/v1/event/stream`: its lines, parsed, as a reader thread receives them."""

    def __init__(self, system: DroverSystem, query: str, token: str = TOKEN) -> None:
        url = urlsplit(system.http_address)
        self.conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=120)
        self.conn.request("GET", f"/v1/event/stream?{query}", headers={"X-Nomad-Token": token})
        # Kept: http.client lets go of the socket once a response that will close has begun,
        # and closing the response then waits for the reader thread's blocked read.
        self.sock = self.conn.sock
        self.response = self.conn.getresponse()
        self.status = self.response.status
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        if self.status == 200:
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            while line := self.response.readline():
                self.lines.put(orjson.loads(line))
        except (OSError, ValueError, AttributeError, http.client.HTTPException):
            pass  # closed by the test (http.client drops its file under a blocked read)

    def next_line(self, timeout_s: float = 60.0) -> dict[str, Any]:
        return self.lines.get(timeout=timeout_s)

    def events_until(self, done: Any, timeout_s: float = 90.0) -> list[dict[str, Any]]:
        """Every event received until `done(events)` holds."""
        events: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout_s
        while not done(events):
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"stream ended its wait with {[e['Type'] for e in events]}"
            line = self.next_line(remaining)
            assert "Error" not in line, line
            for event in line.get("Events", ()):
                assert event["Index"] == line["Index"]
                events.append(event)
        return events

    def close(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_RDWR)
        self.response.close()
        self.conn.close()


def kinds(events: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(e["Topic"], e["Type"]) for e in events}


def test_a_client_follows_a_job_by_topic_and_key_and_resumes_from_an_index(
    system: DroverSystem,
) -> None:
    stream = Stream(system, "topic=Job:evweb&topic=Evaluation:evweb&topic=Allocation:evweb")
    try:
        assert stream.status == 200
        register(system, "evother")  # its events are filtered out
        reply = register(system, "evweb")

        def followed(events: list[dict[str, Any]]) -> bool:
            running = {
                e["Key"]
                for e in events
                if e["Type"] == "AllocationUpdated"
                and e["Payload"]["Allocation"]["ClientStatus"] == "running"
            }
            done = any(
                e["Type"] == "EvaluationUpdated"
                and e["Payload"]["Evaluation"]["Status"] == "complete"
                for e in events
            )
            return len(running) == 2 and done

        events = stream.events_until(followed)
    finally:
        stream.close()
    assert {("Job", "JobRegistered"), ("Evaluation", "EvaluationUpdated")} <= kinds(events)
    assert ("Allocation", "AllocationUpdated") in kinds(events)
    for event in events:  # only this job's, matched by key or by job ID filter key
        assert event["Key"] == "evweb" or event["FilterKeys"][0] == "evweb", event
        assert event["Namespace"] == "default"
    registered = next(e for e in events if e["Type"] == "JobRegistered" and e["Topic"] == "Job")
    assert registered["Index"] == reply["Index"]
    evaluation = next(e for e in events if e["Topic"] == "Evaluation")
    assert evaluation["Key"] == reply["EvalID"]
    # the payloads are the API's own GET shapes
    status, job = call(system, "GET", "/v1/job/evweb")
    assert status == 200 and set(registered["Payload"]["Job"]) == set(job)
    alloc_event = next(e for e in events if e["Topic"] == "Allocation")
    status, alloc = call(system, "GET", f"/v1/allocation/{alloc_event['Key']}")
    assert status == 200 and set(alloc_event["Payload"]["Allocation"]) == set(alloc)
    assert alloc_event["Payload"]["Allocation"]["Job"] is None  # left out, as Nomad does

    # resuming: events from the index asked for on (the registration's index itself first)
    again = Stream(system, f"topic=Job:evweb&index={registered['Index']}")
    try:
        line = again.next_line()
        assert line["Index"] == registered["Index"]
        assert [(e["Type"], e["Key"]) for e in line["Events"]] == [("JobRegistered", "evweb")]
    finally:
        again.close()
    after = Stream(system, f"topic=Job:evweb&topic=Job:evother&index={registered['Index'] + 1}")
    try:
        call(system, "DELETE", "/v1/job/evother")
        stopped = after.events_until(lambda es: ("Job", "JobDeregistered") in kinds(es))
        assert all(e["Index"] > registered["Index"] for e in stopped)
        assert {e["Key"] for e in stopped} <= {"evweb", "evother"}
    finally:
        after.close()


def test_node_events_and_each_topics_acl_need(system: DroverSystem) -> None:
    rules = 'namespace "default" { policy = "read" }'
    assert (
        call(system, "POST", "/v1/acl/policy/ev-reader", {"Name": "ev-reader", "Rules": rules})[0]
        == 200
    )
    made = call(system, "POST", "/v1/acl/token", {"Name": "r", "Policies": ["ev-reader"]})[1]
    reader = made["SecretID"]
    for query in ("topic=Node", "", "topic=Job&namespace=*"):
        refused = Stream(system, query, token=reader)
        assert refused.status == 403 and refused.response.read() == b"Permission denied"
        refused.close()
    assert Stream(system, "topic=Widget").status == 400
    allowed = Stream(system, "topic=Job", token=reader)
    allowed.close()
    assert allowed.status == 200

    nodes = Stream(system, "topic=Node")
    try:
        node_id = call(system, "GET", "/v1/nodes")[1][0]["ID"]
        call(system, "POST", f"/v1/node/{node_id}/eligibility", {"Eligibility": "ineligible"})
        events = nodes.events_until(lambda es: any(e["Key"] == node_id for e in es))
    finally:
        nodes.close()
    event = next(e for e in events if e["Key"] == node_id)
    assert (event["Topic"], event["Type"], event["Namespace"]) == ("Node", "NodeDrain", "")
    assert event["Payload"]["Node"]["SchedulingEligibility"] == "ineligible"
    call(system, "POST", f"/v1/node/{node_id}/eligibility", {"Eligibility": "eligible"})


def test_python_nomads_event_stream_reads_ours(system: DroverSystem) -> None:
    url = urlsplit(system.http_address)
    client = nomad.Nomad(host=url.hostname, port=url.port, token=TOKEN, timeout=30)
    # python-nomad sends a topic dict as `topic=Job` (requests encodes a dict's keys), so
    # the stream carries every Job event since the buffer's oldest (index 0), as Nomad's
    # would: other tests' jobs may come first.
    thread, stop, events = client.event.stream.get_stream(topic={"Job": "evpy"})
    thread.daemon = True  # it waits for the next line (a heartbeat at most 10 s away) to stop
    thread.start()
    seen: list[tuple[str, str, str]] = []
    try:
        register(system, "evpy")
        deadline = time.monotonic() + 60
        while ("Job", "JobRegistered", "evpy") not in seen:
            line = events.get(timeout=max(0.1, deadline - time.monotonic()))
            seen += [(e["Topic"], e["Type"], e["Key"]) for e in line.get("Events") or ()]
    finally:
        stop.set()
    assert {topic for topic, _, _ in seen} == {"Job"}
