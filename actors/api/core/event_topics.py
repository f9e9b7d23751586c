"""What an event stream subscriber asked for: its topics and keys (`?topic=Topic:Key`, as
Nomad parses them in command/agent/event_endpoint.go), which events match, and what its
token needs to hold (nomad/stream/event_broker.go `aclAllowsSubscription`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from actors.api.core.acl_routes import MANAGEMENT, NODE_READ, Need, permits
from actors.api.core.errors import bad_request
from actors.api.core.events import (
    TOPIC_ALLOCATION,
    TOPIC_DEPLOYMENT,
    TOPIC_EVALUATION,
    TOPIC_JOB,
    TOPIC_NODE,
    Event,
)
from contracts.acl import DENY, Acl

ALL = "*"

# Nomad's topics. drover publishes Job, Allocation, Evaluation and Node events; the others
# are accepted (a subscriber written for Nomad may ask for them) and stay silent.
TOPICS = (
    ALL,
    TOPIC_JOB,
    TOPIC_ALLOCATION,
    TOPIC_EVALUATION,
    TOPIC_NODE,
    TOPIC_DEPLOYMENT,
    "NodePool",
    "Service",
    "ACLToken",
    "ACLPolicy",
    "ACLRole",
    "ACLAuthMethod",
    "ACLBindingRule",
    "Operator",
    "HostVolume",
    "CSIVolume",
    "CSIPlugin",
    "Variable",
)
_READ_JOB_TOPICS = frozenset(
    {TOPIC_JOB, TOPIC_ALLOCATION, TOPIC_EVALUATION, TOPIC_DEPLOYMENT, "Service"}
)
_READ_JOB = "read-job"


@dataclass(frozen=True, slots=True)
class EventFilter:
    """Topic -> the keys asked for ("*": any); namespace "*": every namespace."""

    topics: Mapping[str, frozenset[str]]
    namespace: str = "default"

    def matches(self, event: Event) -> bool:
        """Nomad's filter: the namespace (events without one, such as nodes', pass any), then
        the event's key or one of its filter keys (a job ID for evaluations and allocations)
        among the keys of its topic or of "*". Unlike Nomad, "*" matches whatever other keys
        were asked for beside it (Nomad's filter lets it match only when alone)."""
        if self.namespace != ALL and event.namespace and event.namespace != self.namespace:
            return False
        keys = self.topics.get(event.topic, frozenset()) | self.topics.get(ALL, frozenset())
        if ALL in keys or event.key in keys:
            return True
        return any(key in keys for key in event.filter_keys or ())

    def needs(self) -> list[Need]:
        """What a token must grant: read-job in the namespace for job-scoped topics (and
        Service), node read for Node, management for "*" and every other topic."""
        out: list[Need] = []
        for topic in self.topics:
            if topic in _READ_JOB_TOPICS:
                out.append(Need("namespace", _READ_JOB))
            elif topic == TOPIC_NODE:
                out.append(NODE_READ)
            else:
                out.append(MANAGEMENT)
        return out

    def allowed(self, acl: Acl) -> bool:
        for need in self.needs():
            if need.kind == "namespace" and self.namespace == ALL:
                # Every namespace: a policy written for "*" itself, as Nomad requires (not
                # just some namespace's, which is enough to list them).
                caps = acl.namespaces.get(ALL, frozenset())
                if not (acl.management or (need.capability in caps and DENY not in caps)):
                    return False
            elif not permits(acl, need, self.namespace):
                return False
        return True


def parse_topics(values: Sequence[str]) -> dict[str, frozenset[str]]:
    """`topic` parameters to topic -> keys; none: every topic ("*:*"). A bare topic means
    all its keys. 400 naming the value for a malformed or unknown topic."""
    if not values:
        return {ALL: frozenset({ALL})}
    keys: dict[str, set[str]] = {}
    for raw in values:
        parts = raw.split(":")
        if len(parts) > 2 or not parts[0]:
            raise bad_request(f"topic: expected Topic or Topic:Key, got {raw!r}")
        topic, key = parts[0], parts[1] if len(parts) == 2 else ALL
        if topic not in TOPICS:
            expected = ", ".join(TOPICS)
            raise bad_request(f"topic: unknown topic {topic!r} (expected one of {expected})")
        keys.setdefault(topic, set()).add(key)
    return {topic: frozenset(k) for topic, k in keys.items()}


def parse_index(raw: str) -> int:
    """`index`: events from this log index on (Nomad starts at the closest one still held)."""
    raw = raw or "0"
    if not raw.isdigit():
        raise bad_request(f"index: expected a non-negative integer, got {raw!r}")
    return int(raw)
