"""ACL policies and tokens through the API core: the /v1/acl endpoints as python-nomad calls
them, and, for every route, a token whose policy grants exactly what the route needs gets
past the check while one granted everything else is refused with Nomad's 403."""

from __future__ import annotations

import re

import pytest

from actors.api.core import Api
from actors.api.core.acl_routes import MANAGEMENT, NEEDS, need_of
from contracts.acl import NAMESPACE_CAPABILITIES

from .conftest import Client, MemoryBackend

ALL_CAPS = sorted(NAMESPACE_CAPABILITIES - {"deny"})


@pytest.fixture
def secured() -> MemoryBackend:
    return MemoryBackend(acl_enabled=True)


def management(backend: MemoryBackend) -> Client:
    token = Client(Api(backend))("POST", "/v1/acl/bootstrap").body
    return Client(Api(backend), token=token["SecretID"])


def client_token(root: Client, rules: str, name: str) -> Client:
    assert root("POST", f"/v1/acl/policy/{name}", {"Name": name, "Rules": rules}).status == 200
    made = root("POST", "/v1/acl/token", {"Name": name, "Type": "client", "Policies": [name]})
    assert made.status == 200, made.body
    return Client(root.api, token=made.body["SecretID"])


def test_policies_and_tokens_are_made_read_updated_and_deleted(secured: MemoryBackend) -> None:
    root = management(secured)
    rules = 'namespace "default" {\n  policy = "read"\n}\nnode {\n  policy = "read"\n}\n'
    reply = root("POST", "/v1/acl/policy/readonly", {"Name": "readonly", "Rules": rules})
    assert reply.status == 200
    listed = root("GET", "/v1/acl/policies").body
    assert [(p["Name"], "Rules" in p) for p in listed] == [("readonly", False)]
    assert root("GET", "/v1/acl/policy/readonly").body["Rules"] == rules
    made = root("POST", "/v1/acl/token", {"Name": "ci", "Type": "client", "Policies": ["readonly"]})
    token = made.body
    assert token["Type"] == "client" and token["Policies"] == ["readonly"] and token["SecretID"]
    ci = Client(root.api, token=token["SecretID"])
    assert ci("GET", "/v1/acl/token/self").body["AccessorID"] == token["AccessorID"]
    assert ci("GET", "/v1/acl/policy/readonly").status == 200  # a policy it holds
    assert ci("GET", "/v1/acl/tokens").status == 403
    read = root("GET", f"/v1/acl/token/{token['AccessorID']}").body
    assert read["Name"] == "ci" and read["SecretID"] == ""  # the secret is shown once
    assert {t["AccessorID"] for t in root("GET", "/v1/acl/tokens").body} >= {token["AccessorID"]}
    updated = root(
        "POST",
        f"/v1/acl/token/{token['AccessorID']}",
        {
            "AccessorID": token["AccessorID"],
            "Name": "ci-2",
            "Type": "client",
            "Policies": ["readonly"],
        },
    )
    assert updated.status == 200 and updated.body["Name"] == "ci-2"
    assert root("DELETE", f"/v1/acl/token/{token['AccessorID']}").status == 200
    assert ci("GET", "/v1/jobs").status == 403  # a deleted token is refused at once
    assert root("DELETE", "/v1/acl/policy/readonly").status == 200
    assert root("GET", "/v1/acl/policy/readonly").status == 404


@pytest.mark.parametrize(
    ("path", "body", "status", "says"),
    [
        (
            "/v1/acl/policy/x",
            {"Name": "x", "Rules": 'namespace "d" { policy = "fly" }'},
            400,
            "fly",
        ),
        ("/v1/acl/policy/x", {"Name": "x", "Rules": "bogus { }"}, 400, "bogus"),
        ("/v1/acl/policy/x", {"Name": "y", "Rules": 'node { policy = "read" }'}, 400, "Name"),
        ("/v1/acl/policy/a b", {"Rules": 'node { policy = "read" }'}, 400, "Name"),
        ("/v1/acl/policy/x", {"Name": "x", "Rules": "  "}, 400, "Rules"),
        ("/v1/acl/token", {"Type": "client", "Policies": [""]}, 400, "Policies"),
        ("/v1/acl/token", {"Type": "client"}, 400, "Policies"),
        ("/v1/acl/token", {"Type": "root", "Policies": []}, 400, "root"),
        ("/v1/acl/token", {"Type": "client", "Policies": "p"}, 400, "Policies"),
    ],
)
def test_bad_policies_and_tokens_are_400s_naming_the_field(
    secured: MemoryBackend, path: str, body: dict, status: int, says: str
) -> None:
    reply = management(secured)("POST", path, body)
    assert reply.status == status and says in reply.body, reply.body


def test_a_token_may_name_a_policy_made_later_and_empty_rules_grant_nothing(
    secured: MemoryBackend,
) -> None:
    """As Nomad: a token's policies are not looked up when it is made (a missing one grants
    nothing until it exists), and a policy with empty rules is valid and grants nothing
    (acl.Parse's empty-rules path); python-nomad's test_acl.py relies on both."""
    root = management(secured)
    made = root("POST", "/v1/acl/token", {"Name": "ro", "Type": "client", "Policies": ["later"]})
    assert made.status == 200 and made.body["Policies"] == ["later"], made.body
    later = Client(root.api, token=made.body["SecretID"])
    assert later("GET", "/v1/jobs").status == 403
    empty = root("POST", "/v1/acl/policy/later", {"Name": "later", "Rules": ""})
    assert empty.status == 200, empty.body
    assert root("GET", "/v1/acl/policy/later").body["Rules"] == ""
    assert later("GET", "/v1/jobs").status == 403  # empty rules grant nothing
    rules = 'namespace "default" { policy = "read" }'
    assert root("POST", "/v1/acl/policy/later", {"Name": "later", "Rules": rules}).status == 200
    assert later("GET", "/v1/jobs").status == 200


def concrete(path: str) -> str:
    return re.sub(r":\w+", "x", path)


def test_every_route_outside_the_acl_endpoints_says_what_it_needs() -> None:
    routes = Api(MemoryBackend()).endpoints()
    undecided = [
        (method, path)
        for method, path in routes
        if not path.startswith("/v1/acl/") and (method, path) not in NEEDS
    ]
    assert undecided == []
    # The ACL endpoints themselves are for management tokens, but for these.
    assert need_of("POST", "/v1/acl/token") is MANAGEMENT


def _granting(need_kind: str, capability: str, write: bool, exactly: bool) -> str:
    """Rules that grant exactly the need (exactly=True), or everything but it."""
    if need_kind == "namespace":
        caps = [capability] if exactly else [c for c in ALL_CAPS if c != capability]
        listed = ", ".join(f'"{c}"' for c in caps)
        return f'namespace "default" {{ capabilities = [{listed}] }}\n' + "".join(
            f'{b} {{ policy = "write" }}\n' for b in ("node", "agent", "operator")
        )
    everything = 'namespace "*" { policy = "write" }\n'
    levels = {b: "write" for b in ("node", "agent", "operator")}
    if need_kind in levels:
        levels[need_kind] = (
            ("write" if write else "read") if exactly else ("read" if write else "deny")
        )
    return everything + "".join(f'{b} {{ policy = "{p}" }}\n' for b, p in levels.items())


def test_a_token_passes_the_check_of_every_route_only_with_what_its_policy_grants(
    secured: MemoryBackend,
) -> None:
    root = management(secured)
    anonymous = Client(root.api)
    for n, (method, path) in enumerate(Api(secured).endpoints()):
        need = need_of(method, path)
        url = concrete(path)
        if need.kind == "open":
            assert anonymous(method, url).status != 403, (method, path)
            continue
        assert anonymous(method, url).status == 403, (method, path)
        if need.kind in ("token", "management"):
            full = client_token(root, _granting("node", "", True, exactly=True), f"all-{n}")
            if need.kind == "management":
                assert full(method, url).status == 403, (method, path)
                assert root(method, url).status != 403, (method, path)
            continue
        allowed = client_token(
            root, _granting(need.kind, need.capability, need.write, True), f"yes-{n}"
        )
        refused = client_token(
            root, _granting(need.kind, need.capability, need.write, False), f"no-{n}"
        )
        assert allowed(method, url).status != 403, (method, path, need)
        assert refused(method, url).status == 403, (method, path, need)


def test_namespaces_follow_the_closest_rule_and_deny_wins(secured: MemoryBackend) -> None:
    root = management(secured)
    rules = (
        'namespace "*" { policy = "read" }\n'
        'namespace "prod-*" { policy = "deny" }\n'
        'namespace "prod-web" { policy = "write" }\n'
    )
    token = client_token(root, rules, "mixed")
    assert token("GET", "/v1/jobs", namespace="dev").status == 200
    assert token("GET", "/v1/jobs", namespace="prod-db").status == 403
    assert token("GET", "/v1/jobs", namespace="prod-web").status == 200
    assert token("POST", "/v1/jobs/parse", {"JobHCL": ""}, namespace="prod-web").status != 403
    job = {"Job": {"ID": "j", "Name": "j", "Namespace": "prod-db", "TaskGroups": []}}
    # A registration is checked in the job's own namespace, not the query's.
    assert token("POST", "/v1/jobs", job, namespace="prod-web").status == 403
