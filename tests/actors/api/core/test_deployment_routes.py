"""The deployment endpoints' request bodies and error texts as python-nomad meets them: body
fields matched as Go's encoding/json matches them (ignoring case), and Nomad's exact texts
for changes to a terminal deployment."""

from __future__ import annotations

from actors.api.core.call import body_field
from bench.python_nomad_files import example_job

from .conftest import Client, MemoryBackend


def test_body_fields_are_found_ignoring_case_as_go_decodes_them() -> None:
    body = {"UnHealthyAllocationIDs": ["a"], "pause": True, "All": False}
    assert body_field(body, "UnhealthyAllocationIDs") == ["a"]
    assert body_field(body, "Pause") is True
    assert body_field(body, "All") is False
    assert body_field(body, "Groups") is None
    assert body_field({"ALL": 1, "All": 2}, "All") == 2  # the exact key first


def test_python_nomads_unhealthy_ids_fail_the_deployment_and_terminal_ones_refuse_changes(
    backend: MemoryBackend, call: Client
) -> None:
    assert call("POST", "/v1/jobs", example_job()).status == 200
    backend.schedule_pending()
    (deployment,) = call("GET", "/v1/deployments").body
    assert deployment["JobID"] == "example" and deployment["Status"] == "running"
    (alloc,) = call("GET", "/v1/job/example/allocations").body
    deployment_id = deployment["ID"]
    # The body python-nomad's deployment_allocation_health sends.
    body = {
        "HealthyAllocationIDs": [],
        "UnHealthyAllocationIDs": [alloc["ID"]],
        "DeploymentID": deployment_id,
    }
    reply = call("POST", f"/v1/deployment/allocation-health/{deployment_id}", body)
    assert reply.status == 200, reply.body
    assert call("GET", f"/v1/deployment/{deployment_id}").body["Status"] == "failed"
    for path, sent, says in (
        ("allocation-health", {"UnHealthyAllocationIDs": [alloc["ID"]]}, "can't set health of "),
        ("fail", None, "can't fail "),
        ("pause", {"Pause": False}, "can't resume "),
        ("pause", {"Pause": True}, "can't pause "),
        ("promote", {"All": True}, "can't promote "),
    ):
        refused = call("POST", f"/v1/deployment/{path}/{deployment_id}", sent)
        assert refused.status == 400, (path, refused.body)
        what = "allocations for a terminal deployment" if path == "allocation-health" else ""
        assert refused.body == says + (what or "terminal deployment"), refused.body
