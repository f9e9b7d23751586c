"""/v1/search and /v1/search/fuzzy through the API core, against the real leader core and
scheduler: Nomad's contexts, Matches and Truncations, its limits, and the ACL filtering."""

from __future__ import annotations

from actors.api.core import Api
from actors.api.core.search_routes import (
    CONTEXTS,
    FUZZY_LIMIT_QUERY,
    FUZZY_LIMIT_RESULTS,
    PREFIX_LIMIT,
)
from actors.api.core.shapes import job_to_nomad
from contracts.jobspec import parse_job_file

from .conftest import Client, MemoryBackend


def web_job(job_id: str = "web", count: int = 3) -> dict:
    job = job_to_nomad(parse_job_file("examples/web.nomad"))
    job["ID"] = job["Name"] = job_id
    job["TaskGroups"][0]["Count"] = count
    return job


def run(call: Client, backend: MemoryBackend, job: dict) -> str:
    reply = call("POST", "/v1/jobs", {"Job": job})
    assert reply.status == 200, reply.body
    backend.schedule_pending()
    return str(reply.body["EvalID"])


def test_prefix_search_finds_each_kind_of_record_by_its_id(
    call: Client, backend: MemoryBackend
) -> None:
    eval_id = run(call, backend, web_job())
    alloc_id = call("GET", "/v1/job/web/allocations").body[0]["ID"]
    node_id = call("GET", "/v1/nodes").body[0]["ID"]

    everything = call("POST", "/v1/search", {"Prefix": "", "Context": "all"}).body
    assert set(everything["Matches"]) == set(CONTEXTS) == set(everything["Truncations"])
    assert everything["Matches"]["namespaces"] == ["default"]
    assert everything["Matches"]["node_pools"] == ["all", "default"]
    # web.nomad's update block rolled its version out under a deployment.
    deployment_id = call("GET", "/v1/job/web/deployment").body["ID"]
    assert everything["Matches"]["deployment"] == [deployment_id]

    def only(prefix: str, context: str) -> list[str]:
        reply = call("POST", "/v1/search", {"Prefix": prefix, "Context": context})
        assert reply.status == 200 and list(reply.body["Matches"]) == [context], reply.body
        return list(reply.body["Matches"][context])

    assert only("we", "jobs") == ["web"]
    assert only(eval_id, "evals") == [eval_id]
    assert only(alloc_id, "allocs") == [alloc_id]
    assert only(node_id[:6], "nodes") == [node_id]
    assert only("def", "namespaces") == ["default"]
    assert only("zz", "jobs") == []
    # PUT answers too, and the namespace may come in the body or the query.
    assert call("PUT", "/v1/search", {"Prefix": "w", "Context": "jobs"}).body["Matches"] == {
        "jobs": ["web"]
    }
    other = call("POST", "/v1/search", {"Prefix": "w", "Context": "jobs", "Namespace": "prod"})
    assert other.body["Matches"] == {"jobs": []}
    assert call("POST", "/v1/search", {"Prefix": "w", "Context": "jobs"}, namespace="*").body[
        "Matches"
    ] == {"jobs": ["web"]}


def test_prefix_search_keeps_nomads_twenty_per_context_in_id_order(
    call: Client, backend: MemoryBackend
) -> None:
    for n in range(PREFIX_LIMIT + 5):
        run(call, backend, web_job(f"job-{n:02d}", count=1))
    body = call("POST", "/v1/search", {"Prefix": "job-", "Context": "jobs"}).body
    assert body["Matches"]["jobs"] == [f"job-{n:02d}" for n in range(PREFIX_LIMIT)]
    assert body["Truncations"]["jobs"] is True
    exact = call("POST", "/v1/search", {"Prefix": "job-24", "Context": "jobs"}).body
    assert exact == {"Matches": {"jobs": ["job-24"]}, "Truncations": {"jobs": False}}


def test_fuzzy_search_matches_job_group_and_task_names_with_their_scope(
    call: Client, backend: MemoryBackend
) -> None:
    run(call, backend, web_job())
    body = call("POST", "/v1/search/fuzzy", {"Text": "FRONT", "Context": "jobs"}).body
    assert body["Matches"] == {"groups": [{"ID": "frontend", "Scope": ["default", "web"]}]}
    assert body["Truncations"] == {"jobs": False}
    tasks = call("POST", "/v1/search/fuzzy", {"Text": "ngin", "Context": "all"}).body
    assert {"ID": "nginx", "Scope": ["default", "web", "frontend"]} in tasks["Matches"]["tasks"]
    allocs = call("POST", "/v1/search/fuzzy", {"Text": "web.frontend[", "Context": "allocs"}).body
    names = [m["ID"] for m in allocs["Matches"]["allocs"]]
    assert names == sorted(names) and len(names) == 3
    assert all(m["Scope"][0] == "default" for m in allocs["Matches"]["allocs"])
    # The best match first: the earliest, then the shortest.
    run(call, backend, web_job("aweb", count=1))
    run(call, backend, web_job("webster", count=1))
    jobs = call("POST", "/v1/search/fuzzy", {"Text": "web", "Context": "jobs"}).body
    assert [m["ID"] for m in jobs["Matches"]["jobs"]] == ["web", "webster", "aweb"]


def test_fuzzy_search_is_bounded_as_nomads_defaults_are(
    call: Client, backend: MemoryBackend
) -> None:
    short = call("POST", "/v1/search/fuzzy", {"Text": "w", "Context": "jobs"})
    assert short.status == 400 and "at least 2 characters, got 1" in short.body
    for n in range(FUZZY_LIMIT_QUERY + 2):
        run(call, backend, web_job(f"svc-{n:02d}", count=1))
    body = call("POST", "/v1/search/fuzzy", {"Text": "svc", "Context": "jobs"}).body
    # No more than limit_query jobs are looked at: the rest is reported truncated.
    assert len(body["Matches"]["jobs"]) == FUZZY_LIMIT_QUERY
    assert body["Truncations"]["jobs"] is True
    assert FUZZY_LIMIT_RESULTS >= FUZZY_LIMIT_QUERY


def test_bad_search_requests_name_the_field(call: Client) -> None:
    bad = call("POST", "/v1/search", {"Prefix": "a", "Context": "wrong"})
    assert bad.status == 400 and "Context" in bad.body and "'wrong'" in bad.body
    assert call("POST", "/v1/search", {"Prefix": 7, "Context": "jobs"}).status == 400
    assert call("POST", "/v1/search").status == 400


def test_with_acls_a_token_sees_only_the_contexts_it_may_read(
    call: Client, backend: MemoryBackend
) -> None:
    secured = MemoryBackend(acl_enabled=True)
    secured.store = backend.store  # the same cluster, seen with ACLs on
    run(call, backend, web_job())
    api = Api(secured)
    root_token = Client(api)("POST", "/v1/acl/bootstrap").body["SecretID"]
    root = Client(api, token=root_token)
    rules = 'namespace "default" { capabilities = ["read-job"] }'
    assert root("POST", "/v1/acl/policy/jobs", {"Name": "jobs", "Rules": rules}).status == 200
    made = root("POST", "/v1/acl/token", {"Name": "j", "Type": "client", "Policies": ["jobs"]})
    reader = Client(api, token=made.body["SecretID"])
    assert Client(api)("POST", "/v1/search", {"Prefix": "", "Context": "all"}).status == 403
    seen = reader("POST", "/v1/search", {"Prefix": "", "Context": "all"}).body["Matches"]
    assert "nodes" not in seen and "node_pools" not in seen and seen["jobs"] == ["web"]
    assert reader("POST", "/v1/search", {"Prefix": "", "Context": "nodes"}).status == 403
    assert "nodes" in root("POST", "/v1/search", {"Prefix": "", "Context": "all"}).body["Matches"]
