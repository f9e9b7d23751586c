"""The agent endpoints, job validation, deregistering a missing job and boolean flags, as
Nomad answers them."""

from __future__ import annotations

import pytest

from actors.api.core.shapes import job_to_nomad
from contracts.jobspec import parse_job_file

from .conftest import Client


def test_the_agent_describes_its_one_server(call: Client) -> None:
    me = call("GET", "/v1/agent/self").body
    assert me["config"]["Region"] == "global" and me["config"]["ACL"]["Enabled"] is False
    assert me["member"]["Status"] == "alive" and me["member"]["Tags"]["region"] == "global"
    members = call("GET", "/v1/agent/members").body
    assert members["ServerRegion"] == "global" and members["Members"] == [me["member"]]
    # Where Nomad puts a server: its advertise host, gossip on 4648, RPC on 4647 (the port
    # the agent is configured with), the same address /v1/status/leader gives.
    assert (me["member"]["Addr"], me["member"]["Port"]) == ("127.0.0.1", 4648)
    assert call("GET", "/v1/agent/servers").body == ["127.0.0.1:4647"]
    assert call("GET", "/v1/status/leader").body == "127.0.0.1:4647"
    health = call("GET", "/v1/agent/health").body
    assert health["server"]["ok"] is True and health["client"]["ok"] is True


def test_validate_lists_the_problems_with_a_200(call: Client) -> None:
    job = job_to_nomad(parse_job_file("examples/web.nomad"))
    good = call("POST", "/v1/validate/job", {"Job": job})
    assert good.status == 200 and good.body["ValidationErrors"] is None
    assert good.body["Error"] == "" and good.body["DriverConfigValidated"] is True
    job["TaskGroups"][0]["Count"] = -3
    bad = call("POST", "/v1/validate/job", {"Job": job})
    assert bad.status == 200 and bad.body["ValidationErrors"]
    assert "Count" in bad.body["Error"] or "count" in bad.body["Error"]
    assert call("POST", "/v1/validate/job", {"Jobb": {}}).status == 400
    # Nothing was registered.
    assert call("GET", "/v1/jobs").body == []


def test_deregistering_a_missing_job_is_a_200_with_no_evaluation(call: Client) -> None:
    reply = call("DELETE", "/v1/job/never-was")
    assert reply.status == 200 and reply.body["EvalID"] == ""
    assert reply.body["JobModifyIndex"] == 0


@pytest.mark.parametrize("value", ["1", "t", "T", "TRUE", "true", "True"])
def test_purge_is_read_as_go_reads_a_boolean(call: Client, value: str) -> None:
    job = job_to_nomad(parse_job_file("examples/web.nomad"))
    assert call("POST", "/v1/jobs", {"Job": job}).status == 200
    assert call("DELETE", "/v1/job/web", purge=value).status == 200
    assert call("GET", "/v1/job/web").status == 404  # purged, not just stopped


@pytest.mark.parametrize("value", ["0", "f", "F", "FALSE", "false", "False", ""])
def test_false_forms_stop_without_purging(call: Client, value: str) -> None:
    job = job_to_nomad(parse_job_file("examples/web.nomad"))
    assert call("POST", "/v1/jobs", {"Job": job}).status == 200
    assert call("DELETE", "/v1/job/web", purge=value).status == 200
    stopped = call("GET", "/v1/job/web")
    assert stopped.status == 200 and stopped.body["Stop"] is True
    bad = call("DELETE", "/v1/job/web", purge="maybe")
    assert bad.status == 400 and "purge" in bad.body


def test_a_join_is_answered_as_nomad_answers_one_it_could_not_make(call: Client) -> None:
    joined = call("PUT", "/v1/agent/join", address="nope")
    assert joined.status == 200 and joined.body["num_joined"] == 0
    assert "nope" in joined.body["error"] and "single server" in joined.body["error"]
    missing = call("POST", "/v1/agent/join")
    assert (missing.status, missing.body) == (400, "missing address to join")


def test_force_leave_of_a_member_drover_does_not_have_is_a_200(call: Client) -> None:
    left = call("PUT", "/v1/agent/force-leave", node="nope")
    assert (left.status, left.body) == (200, None)
    assert call("PUT", "/v1/agent/force-leave", node="nope", prune="true").status == 200
    bad = call("PUT", "/v1/agent/force-leave", node="nope", prune="maybe")
    assert bad.status == 400 and "prune" in bad.body
    missing = call("POST", "/v1/agent/force-leave")
    assert (missing.status, missing.body) == (400, "missing node to force leave")
