"""Nomad's ACL rules: parsing (HCL and JSON, errors naming the block and value), how policies
combine, which namespace rule governs, and secrets kept only as hashes."""

from __future__ import annotations

import pytest

from contracts.acl import Acl, hash_secret, parse_rules
from contracts.errors import ValidationError

HCL = """
namespace "default" {
  policy       = "read"
  capabilities = ["submit-job"]
}
namespace "*" { policy = "scale" }
node { policy = "read" }
agent { policy = "write" }
operator { policy = "deny" }
"""


def test_hcl_and_json_rules_read_alike() -> None:
    rules = parse_rules(HCL)
    as_json = parse_rules(
        '{"namespace": {"default": {"policy": "read", "capabilities": ["submit-job"]},'
        ' "*": {"policy": "scale"}}, "node": {"policy": "read"}, "agent": {"policy": "write"},'
        ' "operator": {"policy": "deny"}}'
    )
    assert rules == as_json
    assert (rules.node, rules.agent, rules.operator) == ("read", "write", "deny")
    acl = Acl.of([rules])
    assert acl.allows("default", "read-job") and acl.allows("default", "submit-job")
    assert not acl.allows("default", "scale-job")  # the exact rule governs, not "*"
    assert acl.allows("other", "scale-job") and not acl.allows("other", "read-logs")
    assert acl.allows_level("node", write=False) and not acl.allows_level("node", write=True)
    assert acl.allows_level("agent", write=True)
    assert not acl.allows_level("operator", write=False)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('namespace "a" { policy = "admin" }', "namespace \"a\".policy: 'admin'"),
        ('namespace "a" { capabilities = ["fly"] }', "'fly' is not a namespace capability"),
        ('namespace "a" { colour = "red" }', 'namespace "a".colour: unknown field'),
        ('node { policy = "maybe" }', "node.policy: 'maybe'"),
        ("volume { }", "volume: unknown block"),
        ("{not json", "not valid JSON"),
        ("   ", "Rules"),
        ('namespace "a" {', "HCL syntax error"),
    ],
)
def test_bad_rules_name_the_block_field_and_value(text: str, says: str) -> None:
    with pytest.raises(ValidationError, match=None) as err:
        parse_rules(text)
    assert says in str(err.value), str(err.value)


def test_policies_combine_and_deny_wins() -> None:
    reader = parse_rules('namespace "web" { policy = "read" }\nnode { policy = "write" }')
    writer = parse_rules('namespace "web" { capabilities = ["submit-job"] }')
    denier = parse_rules('namespace "web" { policy = "deny" }\nnode { policy = "deny" }')
    both = Acl.of([reader, writer])
    assert both.allows("web", "read-job") and both.allows("web", "submit-job")
    assert both.allows_level("node", write=True)
    denied = Acl.of([reader, writer, denier])
    assert not denied.allows("web", "read-job") and not denied.allows_level("node", write=False)


def test_the_closest_glob_governs_a_namespace() -> None:
    acl = Acl.of(
        [
            parse_rules(
                'namespace "*" { policy = "read" }\n'
                'namespace "prod-*" { policy = "deny" }\n'
                'namespace "prod-web-*" { policy = "write" }'
            )
        ]
    )
    assert acl.allows("dev", "read-job")
    assert not acl.allows("prod-db", "read-job")
    assert acl.allows("prod-web-1", "submit-job")
    assert Acl(management=True).allows("anything", "submit-job")
    assert not Acl().allows("default", "read-job")


def test_secrets_are_kept_as_their_sha256() -> None:
    assert hash_secret("s") == hash_secret("s") != hash_secret("t")
    assert len(hash_secret("s")) == 64 and hash_secret("s") != "s"
