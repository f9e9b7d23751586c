"""Nomad's ACL system: policies of rules, tokens that hold policies, and what they allow.

A policy's rules are Nomad's (HCL, or the same as JSON):

    namespace "default" { policy = "read"  capabilities = ["submit-job"] }
    namespace "prod-*"  { policy = "deny" }
    node     { policy = "read" }
    agent    { policy = "write" }
    operator { policy = "read" }

A namespace rule's `policy` expands to capabilities (read: list-jobs, read-job...; write:
read's and submit-job, dispatch-job, read-logs...; scale: the scaling ones); `capabilities`
adds single ones; `deny` (as a policy or a capability) wins over everything. A namespace
is governed by the rule whose name matches it exactly, else by the matching glob closest to
it in length (Nomad's rule). node, agent and operator rules are `deny`, `read` or `write`
(write includes read). A token's ACL is the union of its policies' rules; a management
token may do anything.

Tokens are kept by the SHA-256 of their secret: the secret is shown when a token is made
and never again (Nomad shows it on every read; drover cannot).
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from contracts.errors import ValidationError
from contracts.fast_init import install_fast_inits
from contracts.jobspec.hcl import load, to_plain

DENY, READ, WRITE, SCALE, LIST = "deny", "read", "write", "scale", "list"

# Nomad's namespace capabilities (acl/policy.go), and what each policy disposition grants.
READ_CAPABILITIES = (
    "list-jobs",
    "parse-job",
    "read-job",
    "csi-list-volume",
    "csi-read-volume",
    "read-job-scaling",
    "list-scaling-policies",
    "read-scaling-policy",
)
WRITE_CAPABILITIES = (
    *READ_CAPABILITIES,
    "scale-job",
    "submit-job",
    "dispatch-job",
    "read-logs",
    "read-fs",
    "alloc-exec",
    "alloc-lifecycle",
    "csi-mount-volume",
    "csi-write-volume",
    "submit-recommendation",
)
SCALE_CAPABILITIES = (
    "list-scaling-policies",
    "read-scaling-policy",
    "read-job-scaling",
    "scale-job",
)
NAMESPACE_CAPABILITIES = frozenset(
    (*WRITE_CAPABILITIES, "deny", "alloc-node-exec", "csi-register-plugin", "list-jobs")
)
_DISPOSITIONS = {
    DENY: (),
    READ: READ_CAPABILITIES,
    WRITE: WRITE_CAPABILITIES,
    SCALE: SCALE_CAPABILITIES,
}
_LEVELS = {DENY: -1, "": 0, LIST: 0, READ: 1, WRITE: 2}  # node, agent, operator
_OTHER_BLOCKS = ("node", "agent", "operator")
_IGNORED_BLOCKS = ("quota", "host_volume", "plugin")  # Nomad's, nothing here to guard
POLICY_NAME = re.compile(r"^[a-zA-Z0-9-]{1,128}$")
TOKEN_TYPES = ("client", "management")


@dataclass(frozen=True, slots=True)
class NamespaceRule:
    name: str  # a namespace, or a glob of them ("prod-*", "*")
    capabilities: frozenset[str]  # "deny" among them denies everything


@dataclass(frozen=True, slots=True)
class PolicyRules:
    namespaces: tuple[NamespaceRule, ...] = ()
    node: str = ""  # "", "deny", "read" or "write"
    agent: str = ""
    operator: str = ""


@dataclass(frozen=True, slots=True)
class AclPolicy:
    name: str
    description: str = ""
    rules: str = ""  # as written (HCL or JSON)
    create_index: int = 0
    modify_index: int = 0


@dataclass(frozen=True, slots=True)
class AclToken:
    accessor_id: str
    secret_hash: str  # hash_secret(SecretID): the secret itself is never stored
    name: str = ""
    type: str = "client"
    policies: tuple[str, ...] = ()
    global_: bool = False
    create_time: int = 0  # unix ns
    create_index: int = 0
    modify_index: int = 0

    @property
    def management(self) -> bool:
        return self.type == "management"


def hash_secret(secret_id: str) -> str:
    return hashlib.sha256(secret_id.encode()).hexdigest()


# -- parsing rules --------------------------------------------------------------------------


def parse_rules(text: str) -> PolicyRules:
    """A policy's rules (HCL or JSON); ValidationError naming the block, field and value."""
    raw = _load(text)
    problems: list[str] = []
    namespaces: list[NamespaceRule] = []
    levels = {name: "" for name in _OTHER_BLOCKS}
    for key, value in raw.items():
        if key == "namespace":
            for name, body in _labelled(value, "namespace", problems):
                rule = _namespace_rule(name, body, problems)
                if rule is not None:
                    namespaces.append(rule)
        elif key in _OTHER_BLOCKS:
            for body in _bodies(value):
                levels[key] = _level(key, body, problems)
        elif key not in _IGNORED_BLOCKS:
            problems.append(f"{key}: unknown block (expected namespace, node, agent, operator)")
    if problems:
        raise ValidationError("; ".join(problems))
    return PolicyRules(tuple(namespaces), levels["node"], levels["agent"], levels["operator"])


def _load(text: str) -> dict[str, Any]:
    if text == "":
        return {}  # as Nomad's acl.Parse: empty rules are a policy that grants nothing
    if not isinstance(text, str) or not text.strip():
        raise ValidationError("Rules: expected a policy's rules, got nothing")
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            data = orjson.loads(stripped)
        except orjson.JSONDecodeError as exc:
            raise ValidationError(f"Rules: not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ValidationError("Rules: expected a JSON object")
        return data
    return to_plain(load(text))


def _bodies(value: Any) -> Iterable[dict[str, Any]]:
    items = value if isinstance(value, list) else [value]
    return [item for item in items if isinstance(item, dict)]


def _labelled(value: Any, block: str, problems: list[str]) -> list[tuple[str, dict[str, Any]]]:
    found: list[tuple[str, dict[str, Any]]] = []
    for item in _bodies(value):
        for name, body in item.items():
            if not isinstance(body, dict):
                problems.append(f'{block} "{name}": expected a block')
                continue
            found.append((str(name), body))
    if not found and value:
        problems.append(f'{block}: expected a labelled block, as {block} "default" {{ }}')
    return found


def _namespace_rule(name: str, body: dict[str, Any], problems: list[str]) -> NamespaceRule | None:
    where = f'namespace "{name}"'
    caps: set[str] = set()
    policy = body.get("policy", "")
    if policy:
        if policy not in _DISPOSITIONS:
            problems.append(f"{where}.policy: {policy!r} is not one of deny, read, write, scale")
            return None
        caps.update(_DISPOSITIONS[policy])
        if policy == DENY:
            caps.add(DENY)
    listed = body.get("capabilities", [])
    if not isinstance(listed, list):
        problems.append(f"{where}.capabilities: expected a list, got {listed!r}")
        return None
    for cap in listed:
        if cap not in NAMESPACE_CAPABILITIES:
            problems.append(f"{where}.capabilities: {cap!r} is not a namespace capability")
            return None
        caps.add(cap)
    for key in body:
        if key not in ("policy", "capabilities", "variables"):
            problems.append(f"{where}.{key}: unknown field")
    return NamespaceRule(name, frozenset(caps))


def _level(block: str, body: dict[str, Any], problems: list[str]) -> str:
    policy = body.get("policy", "")
    if policy not in (DENY, READ, WRITE) and not (block == "node" and policy == LIST):
        problems.append(f"{block}.policy: {policy!r} is not one of deny, read, write")
        return ""
    for key in body:
        if key != "policy":
            problems.append(f"{block}.{key}: unknown field")
    return READ if policy == LIST else str(policy)


# -- what a token may do --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Acl:
    """The union of a token's policies (management: everything)."""

    management: bool = False
    namespaces: dict[str, frozenset[str]] = field(default_factory=dict)  # name/glob -> caps
    node: str = ""
    agent: str = ""
    operator: str = ""

    @staticmethod
    def of(rules: Iterable[PolicyRules], management: bool = False) -> Acl:
        namespaces: dict[str, set[str]] = {}
        levels = {"node": "", "agent": "", "operator": ""}
        for policy in rules:
            for rule in policy.namespaces:
                namespaces.setdefault(rule.name, set()).update(rule.capabilities)
            for name in levels:
                levels[name] = _merge(levels[name], getattr(policy, name))
        frozen = {name: frozenset(caps) for name, caps in namespaces.items()}
        return Acl(management, frozen, levels["node"], levels["agent"], levels["operator"])

    def allows(self, namespace: str, capability: str) -> bool:
        if self.management:
            return True
        if namespace == "*":  # a listing across namespaces: allowed where any rule allows
            return any(DENY not in c and capability in c for c in self.namespaces.values())
        caps = self._rule_for(namespace)
        return caps is not None and DENY not in caps and capability in caps

    def _rule_for(self, namespace: str) -> frozenset[str] | None:
        exact = self.namespaces.get(namespace)
        if exact is not None:
            return exact
        matches = [
            (len(name) - name.count("*"), name)
            for name in self.namespaces
            if "*" in name and fnmatch.fnmatchcase(namespace, name)
        ]
        if not matches:
            return None
        # The closest glob: the one that matches with the fewest characters left to "*".
        _length, best = max(matches)
        return self.namespaces[best]

    def allows_level(self, block: str, write: bool) -> bool:
        if self.management:
            return True
        level = _LEVELS[getattr(self, block)]
        return level >= (_LEVELS[WRITE] if write else _LEVELS[READ])


def _merge(a: str, b: str) -> str:
    if DENY in (a, b):
        return DENY
    return a if _LEVELS[a] >= _LEVELS[b] else b


install_fast_inits(__name__)
