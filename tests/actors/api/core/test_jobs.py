"""Job endpoint checks Nomad makes (jobs.py): the eval priority override on register and
deregister, a node pool that must exist, and the JobModifyIndex a scale names."""

from __future__ import annotations

from actors.agent.core import FleetSpec
from actors.api.core.shapes import job_to_nomad
from contracts.jobspec import parse_job_file

from .conftest import Client, MemoryBackend


def web_job() -> dict:
    return job_to_nomad(parse_job_file("examples/web.nomad"))


def test_eval_priority_sets_the_created_evals_priority(call: Client) -> None:
    job = web_job()
    reply = call("POST", "/v1/jobs", {"Job": job, "EvalPriority": 90})
    assert call("GET", f"/v1/evaluation/{reply.body['EvalID']}").body["Priority"] == 90
    plain = call("POST", "/v1/jobs", {"Job": job, "EvalPriority": 0})  # 0: the job's own
    assert call("GET", f"/v1/evaluation/{plain.body['EvalID']}").body["Priority"] == job["Priority"]
    stopped = call("DELETE", "/v1/job/web", eval_priority="15")
    assert call("GET", f"/v1/evaluation/{stopped.body['EvalID']}").body["Priority"] == 15
    for bad in (101, -3, "high", True):
        refused = call("POST", "/v1/jobs", {"Job": job, "EvalPriority": bad})
        assert refused.status == 400 and "EvalPriority" in refused.body, bad
    refused = call("DELETE", "/v1/job/web", eval_priority="soon")
    assert refused.status == 400 and "eval_priority" in refused.body and "soon" in refused.body
    assert call("DELETE", "/v1/job/web", eval_priority="500").status == 400


def test_a_job_in_a_node_pool_that_does_not_exist_is_refused(
    call: Client, backend: MemoryBackend
) -> None:
    job = web_job()
    job["NodePool"] = "gpu"
    refused = call("POST", "/v1/jobs", {"Job": job})
    assert (refused.status, refused.body) == (400, 'job "web" is in nonexistent node pool "gpu"')
    assert call("POST", "/v1/job/web/plan", {"Job": job}).status == 400
    assert call("GET", "/v1/job/web").status == 404
    for pool in ("default", "all"):
        job["NodePool"] = pool
        assert call("POST", "/v1/jobs", {"Job": job}).status == 200, pool
    # A pool exists once a node is in it (Nomad creates it when the node registers).
    backend.apply_fleet(
        FleetSpec(name="gpus", count=1, cpu_mhz=4000, memory_mb=8192, node_pool="gpu")
    )
    job["NodePool"] = "gpu"
    assert call("POST", "/v1/jobs", {"Job": job}).status == 200


def test_scale_with_a_stale_job_modify_index_is_refused(call: Client) -> None:
    call("POST", "/v1/jobs", {"Job": web_job()})
    current = call("GET", "/v1/job/web").body["JobModifyIndex"]
    stale = call(
        "POST",
        "/v1/job/web/scale",
        {"Count": 4, "Target": {"Group": "api"}, "JobModifyIndex": current + 7},
    )
    assert stale.status == 400
    assert stale.body == (
        f"Enforcing job modify index {current + 7}: job exists with conflicting job modify"
        f" index: {current}"
    )
    assert call("GET", "/v1/job/web").body["TaskGroups"][1]["Count"] == 2
    ok = call(
        "POST",
        "/v1/job/web/scale",
        {"Count": 4, "Target": {"Group": "api"}, "JobModifyIndex": current},
    )
    assert ok.status == 200
    unchecked = call("POST", "/v1/job/web/scale", {"Count": 3, "Target": {"Group": "api"}})
    assert unchecked.status == 200
    bad = call(
        "POST", "/v1/job/web/scale", {"Count": 3, "Target": {"Group": "api"}, "JobModifyIndex": "x"}
    )
    assert bad.status == 400 and "JobModifyIndex" in bad.body


def test_a_templates_summary_counts_its_children_by_status(call: Client) -> None:
    """Nomad's JobSummary.Children: a parameterized job's dispatched jobs by status, in its
    summary and in its stub in the job list; other jobs' stay zero."""
    template = job_to_nomad(parse_job_file("examples/parameterized.nomad"))
    assert call("POST", "/v1/jobs", {"Job": template}).status == 200
    assert call("POST", "/v1/jobs", {"Job": web_job()}).status == 200
    for name in ("a", "b"):
        body = {"Meta": {"input": name}}
        assert call("POST", "/v1/job/convert/dispatch", body).status == 200
    children = call("GET", "/v1/job/convert/summary").body["Children"]
    assert children == {"Pending": 2, "Running": 0, "Dead": 0}
    stubs = {j["ID"]: j for j in call("GET", "/v1/jobs").body}
    assert stubs["convert"]["JobSummary"]["Children"] == children
    assert stubs["web"]["JobSummary"]["Children"] == {"Pending": 0, "Running": 0, "Dead": 0}
    listed = call("GET", "/v1/jobs", prefix="convert/dispatch-").body
    assert len(listed) == 2 and {j["ParentID"] for j in listed} == {"convert"}
