"""Constraint operators and target resolution, ported from Nomad's feasible_test.go
(TestCheckConstraint, TestCheckLexicalOrder, TestCheckVersionConstraint,
TestCheckSemverConstraint, TestCheckRegexpConstraint, TestResolveConstraintTarget), the
go-version constraint tests behind the `version` operator, and Nomad's own semver
constraint tests (helper/constraints/semver) behind `semver`.
"""

from __future__ import annotations

import pytest

from actors.worker.core.scheduler.constraints import (
    check_constraint,
    is_escaped,
    parse_quantity,
    resolve_device_target,
    resolve_node_target,
    version_matches,
)

MISSING = None


def check(op, lval, rval):
    """Values given as None are "not found"."""
    return check_constraint(op, lval, rval, lval is not None, rval is not None)


# -- operators --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "lval", "rval", "expected"),
    [
        # =, ==, is: both sides found and equal
        ("=", "foo", "foo", True),
        ("is", "foo", "foo", True),
        ("==", "foo", "foo", True),
        ("==", "foo", "bar", False),
        ("==", "foo", MISSING, False),
        ("==", MISSING, "foo", False),
        ("==", MISSING, MISSING, False),
        # !=, not: true when a side is missing
        ("!=", "foo", "foo", False),
        ("!=", MISSING, "foo", True),
        ("!=", "foo", MISSING, True),
        ("not", "foo", "bar", True),
        ("!=", MISSING, MISSING, False),
        # regexp: search semantics
        ("regexp", "foobarbaz", r"[\w]+", True),
        ("regexp", "foobarbaz", "bar", True),
        ("regexp", "foobarbaz", "^bar", False),
        ("regexp", MISSING, r"[\w]+", False),
        ("regexp", "foo", "[", False),  # an invalid pattern never matches
        # set_contains / set_contains_all: LHS contains every RHS item (trimmed)
        ("set_contains", "foo,bar,baz", "foo,  bar  ", True),
        ("set_contains", "foo,bar,baz", "foo,bam", False),
        ("set_contains_all", "foo, bar, baz", "baz,foo", True),
        ("set_contains_all", MISSING, "foo", False),
        # set_contains_any
        ("set_contains_any", "foo,bar,baz", "bam, baz", True),
        ("set_contains_any", "foo,bar,baz", "bam,boo", False),
        ("set_contains_any", MISSING, "foo", False),
        # is_set / is_not_set look only at the LHS
        ("is_set", "foo", "", True),
        ("is_set", MISSING, "", False),
        ("is_not_set", MISSING, "", True),
        ("is_not_set", "foo", "", False),
        # distinct_* are enforced by their own iterators
        ("distinct_hosts", MISSING, MISSING, True),
        ("distinct_property", "x", "2", True),
        # an unknown operand never matches
        ("~=", "foo", "foo", False),
        ("", "foo", "foo", False),
    ],
)
def test_check_constraint(op, lval, rval, expected):
    """TestCheckConstraint."""
    assert check(op, lval, rval) is expected


@pytest.mark.parametrize(
    ("op", "lval", "rval", "expected"),
    [
        # lexical when either side is not a number (TestCheckLexicalOrder)
        ("<", "bar", "foo", True),
        ("<=", "foo", "foo", True),
        (">", "bar", "foo", False),
        (">=", "bar", "bar", True),
        ("<", "foo", "bar", False),
        ("<", MISSING, "foo", False),
        (">", "foo", MISSING, False),
        # int64 when both parse: "10" > "9", unlike the lexical order
        (">", "10", "9", True),
        ("<", "10", "9", False),
        (">=", "-1", "-2", True),
        ("<=", "100", "100", True),
        # float when both parse as floats
        (">", "10", "9.5", True),
        ("<", "1.5", "1.25", False),
        (">=", "2.0", "2", True),
        # a number against a word: lexical
        ("<", "10", "abc", True),
    ],
)
def test_check_order(op, lval, rval, expected):
    assert check(op, lval, rval) is expected


# -- version / semver -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "constraint", "expected"),
    [
        # TestCheckVersionConstraint
        ("1.2.3", "~> 1.0", True),
        ("1.2.3", ">= 1.0, < 1.4", True),
        ("2.0.1", "~> 1.0", False),
        ("1.4", ">= 1.0, < 1.4", False),
        ("1", "~> 1.0", True),
        ("1.3.0-beta1", ">= 0.6.1", False),  # prereleases never match a release range
        ("1.7.0-alpha1", ">= 1.6.0-beta1", False),  # prerelease X.Y.Z must match
        ("1.3.0-beta1+ent", "= 1.3.0-beta1", True),  # metadata is ignored
        ("v1.2.3", ">= 1.2", True),
        ("not-a-version", ">= 1.0", False),
        ("1.2.3", "garbage", False),
        # go-version TestConstraintCheck
        ("1.1.5", ">= 1.0, < 1.2", True),
        ("1.1.5", "< 1.0, < 1.2", False),
        ("1.1.5", "= 1.0", False),
        ("1.0.0", "= 1.0", True),
        ("1.0.0", "1.0", True),
        ("2.0", "~> 1.0", False),
        ("1.1", "~> 1.0", True),
        ("1.2.3", "~> 1.0", True),
        ("1.2.3", "~> 1.0.0", False),
        ("1.0.7", "~> 1.0.0", True),
        ("1.1.0", "~> 1.0.0", False),
        ("1.0.4", "~> 1.0.7", False),
        ("1.0.7", "~> 1.0.7", True),
        ("1.0.8", "~> 1.0.7", True),
        ("1.0.7.5", "~> 1.0.7", True),
        ("1.0.6.99", "~> 1.0.7", False),
        ("1.0.8.0", "~> 1.0.7", True),
        ("1.0.9.5", "~> 1.0.9.5", True),
        ("1.0.9.4", "~> 1.0.9.5", False),
        ("1.0.9.6", "~> 1.0.9.5", True),
        ("1.0.9.5.0", "~> 1.0.9.5", True),
        ("1.0.9.5.1", "~> 1.0.9.5", True),
        ("2.1.0-beta", "~> 2.0", False),
        ("2.2.0", "~> 2.1.0-a", False),
        ("2.1.0", "~> 2.1.0-a", False),
        ("2.1.0-beta", "~> 2.1.0-a", True),
        ("2.2.0-alpha", "~> 2.1.0-a", False),
        ("2.1.0-beta", "> 2.0", False),
        ("2.1.0-beta", ">= 2.1.0-a", True),
        ("2.1.1-beta", ">= 2.1.0-a", False),
        ("2.1.0-beta", ">= 2.0.0", False),
        ("2.1.1", ">= 2.1.0-a", True),
        ("2.1.0", ">= 2.1.0-a", True),
        ("2.0.0", "<= 2.1.0-a", True),
    ],
)
def test_version_constraint(value, constraint, expected):
    assert check("version", value, constraint) is expected


@pytest.mark.parametrize(
    ("value", "constraint", "expected"),
    [
        # TestCheckSemverConstraint
        ("1.2.3", "~> 1.0", False),  # no pessimistic operator in semver
        ("1.2.3", ">= 1.0, < 1.4", True),
        ("2.0.1", "~> 1.0", False),
        ("1.4", ">= 1.0, < 1.4", False),
        ("1", "~> 1.0", False),
        ("1.3.0-beta1", ">= 0.6.1", True),  # semver 2.0 ordering of prereleases
        ("1.7.0-alpha1", ">= 1.6.0-beta1", True),
        ("1.3.0-beta1+ent", "= 1.3.0-beta1", True),
        # helper/constraints/semver TestConstraintCheck
        ("1.1.5", ">= 1.0, < 1.2", True),
        ("1.1.5", "< 1.0, < 1.2", False),
        ("1.1.5", "= 1.0", False),
        ("1.0.0", "= 1.0", True),
        ("1.0.0", "1.0", True),
        ("8", "> 10", False),  # numbers are not compared lexically
        ("2.1.0-beta", "> 2.0", True),
        ("2.1.0-beta", "> 2.1.0-a", True),
        ("2.1.1-beta", "> 2.1.0-a", True),
        ("2.1.0-beta", "> 2.0.0", True),
        ("2.1.1", "> 2.1.0-a", True),
        ("2.1.0", "> 2.1.0-a", True),
        ("2.0.0", "<= 2.1.0-a", True),
        ("1.3.0-beta1", ">= 0.6.1", True),
        ("1.0-rc1", "> 1.0-beta1", True),
        ("1.3.0-beta1+ent", ">= 0.6.1", True),
        ("1.3.0-beta1+ent", ">= 1.3.0-beta1", True),
        ("1.3.0-beta1+ent", "> 1.3.0-beta1+cgo", False),
        ("1.3.0-beta1+ent", "= 1.3.0-beta1+cgo", True),
        ("1.0.0", ">= 1.0beta1", False),  # semver needs the dash: malformed, never matches
    ],
)
def test_semver_constraint(value, constraint, expected):
    assert check("semver", value, constraint) is expected


@pytest.mark.parametrize(
    ("lower", "higher"),
    [
        ("1.0.0-alpha", "1.0.0-alpha.1"),
        ("1.0.0-alpha.1", "1.0.0-alpha.beta"),
        ("1.0.0-alpha.beta", "1.0.0-beta"),
        ("1.0.0-beta", "1.0.0-beta.2"),
        ("1.0.0-beta.2", "1.0.0-beta.11"),
        ("1.0.0-beta.11", "1.0.0-rc.1"),
        ("1.0.0-rc.1", "1.0.0"),
    ],
)
def test_semver_prerelease_ordering(lower, higher):
    """The semver.org precedence example, item 11."""
    assert version_matches(lower, f"< {higher}", strict=True)
    assert version_matches(higher, f"> {lower}", strict=True)
    assert not version_matches(higher, f"<= {lower}", strict=True)


def test_version_missing_sides():
    assert not check_constraint("version", None, ">= 1.0", False, True)
    assert not check_constraint("semver", "1.0.0", None, True, False)


# -- units ------------------------------------------------------------------------------------


def test_parse_quantity():
    assert parse_quantity("40 GiB") == (40 * 1024**3, "bytes")
    assert parse_quantity("1.5GHz") == (1.5e9, "hertz")
    assert parse_quantity("300 W") == (300, "watts")
    assert parse_quantity("40") is None
    assert parse_quantity("40 parsecs") is None


@pytest.mark.parametrize(
    ("op", "lval", "rval", "expected"),
    [
        (">=", "80 GiB", "40 GiB", True),
        (">=", "40960 MiB", "40 GiB", True),
        (">", "40960 MiB", "40 GiB", False),
        ("<", "16 GB", "16 GiB", True),
        (">", "1.5 GHz", "1200 MHz", True),
        ("<=", "250 W", "0.3 kW", True),
        # different kinds of unit are not comparable (Nomad's Attribute.Compare): never true
        (">=", "80 GiB", "1 GHz", False),
        ("<", "80 GiB", "1 GHz", False),
    ],
)
def test_unit_aware_order(op, lval, rval, expected):
    assert check(op, lval, rval) is expected


# -- targets ----------------------------------------------------------------------------------


def test_resolve_node_target(build):
    """TestResolveConstraintTarget."""
    node = build.node(
        "node-1",
        datacenter="dc2",
        node_class="large",
        node_pool="gpu",
        attributes={"kernel.name": "linux", "unique.hostname": "h1"},
        meta={"rack": "r7"},
    )
    assert resolve_node_target("${node.unique.id}", node) == ("node-1", True)
    assert resolve_node_target("${node.unique.name}", node) == ("node-1", True)
    assert resolve_node_target("${node.datacenter}", node) == ("dc2", True)
    assert resolve_node_target("${node.class}", node) == ("large", True)
    assert resolve_node_target("${node.pool}", node) == ("gpu", True)
    assert resolve_node_target("${attr.kernel.name}", node) == ("linux", True)
    assert resolve_node_target("${attr.unique.hostname}", node) == ("h1", True)
    assert resolve_node_target("${meta.rack}", node) == ("r7", True)
    # missing is "not found", never an error
    assert resolve_node_target("${attr.missing}", node) == (None, False)
    assert resolve_node_target("${meta.missing}", node) == (None, False)
    assert resolve_node_target("${node.bogus}", node) == (None, False)
    assert resolve_node_target("${attr.kernel.name", node) == (None, False)
    # anything else is a literal
    assert resolve_node_target("linux", node) == ("linux", True)
    assert resolve_node_target("", node) == ("", True)


def test_resolve_device_target(build):
    gpus = build.gpus(2, attributes={"memory": "80 GiB", "cuda_cores": "6912"})
    assert resolve_device_target("${device.vendor}", gpus) == ("nvidia", True)
    assert resolve_device_target("${device.type}", gpus) == ("gpu", True)
    assert resolve_device_target("${device.model}", gpus) == ("A100", True)
    assert resolve_device_target("${device.ids}", gpus) == ("gpu-0,gpu-1", True)
    assert resolve_device_target("${device.attr.memory}", gpus) == ("80 GiB", True)
    assert resolve_device_target("${device.attr.missing}", gpus) == (None, False)
    assert resolve_device_target("40 GiB", gpus) == ("40 GiB", True)


@pytest.mark.parametrize(
    ("target", "escaped"),
    [
        ("${node.unique.id}", True),
        ("${node.unique.name}", True),
        ("${attr.unique.hostname}", True),
        ("${meta.unique.serial}", True),
        ("${unique.thing}", True),
        ("${node.datacenter}", False),
        ("${attr.kernel.name}", False),
        ("${meta.rack}", False),
        ("unique", False),
    ],
)
def test_is_escaped(target, escaped):
    assert is_escaped(target) is escaped
