"""Redis key names for drover's streams, consumer groups and the leader's fencing keys.

Every key carries the prefix as a hash tag (`{drover}:log`) so that all of them fall into one
cluster slot: the leader's commit script touches the log stream, the index and the delivery
tokens in one Lua call, and Lua may only touch keys of one slot (ecosystem notes 2.3).
"""

from __future__ import annotations

from dataclasses import dataclass

WORKERS_GROUP = "workers"
LEADER_GROUP = "leader"
BROKER_GROUP = "broker"


@dataclass(frozen=True, slots=True)
class StreamNames:
    """Key names under one prefix; separate prefixes give separate clusters in one Redis."""

    prefix: str = "drover"

    def __post_init__(self) -> None:
        if not self.prefix or any(c in self.prefix for c in "{}: \t\n"):
            raise ValueError(f"stream prefix must be a plain non-empty word, got {self.prefix!r}")

    def _key(self, *parts: str) -> str:
        return ":".join((f"{{{self.prefix}}}", *parts))

    # -- streams ------------------------------------------------------------------------------

    @property
    def log(self) -> str:
        """The replicated state log (LogEntry), tailed by replicas without a group."""
        return self._key("log")

    @property
    def deliveries(self) -> str:
        """EvalDelivery, broker -> workers (group WORKERS_GROUP)."""
        return self._key("deliveries")

    @property
    def acks(self) -> str:
        """EvalAck, workers -> broker (group BROKER_GROUP)."""
        return self._key("acks")

    @property
    def plans(self) -> str:
        """PlanSubmission, workers -> leader (group LEADER_GROUP)."""
        return self._key("plans")

    @property
    def requests(self) -> str:
        """LeaderRequest, API and agents -> leader (group LEADER_GROUP)."""
        return self._key("requests")

    @property
    def usage(self) -> str:
        """UsageReport, agents -> autoscaler and API (tailed without a group; capped)."""
        return self._key("usage")

    @property
    def dead_letter(self) -> str:
        """DeadLetter, from any consumer."""
        return self._key("dead-letter")

    def plan_results(self, worker_id: str) -> str:
        """PlanResponse for one worker."""
        return self._key("plan-results", _id("worker_id", worker_id))

    def responses(self, client_id: str) -> str:
        """LeaderResponse for one API client or agent."""
        return self._key("responses", _id("client_id", client_id))

    # -- the API's commands to one node's agent (contracts/node_commands.py) ----------------

    def node_commands(self, node_id: str) -> str:
        """NodeCommand, API -> the agent hosting the node (tailed without a group; capped)."""
        return self._key("node-commands", _id("node_id", node_id))

    def command_reply(self, command_id: str) -> str:
        """List: the agent's NodeCommandReply to one command (BLPOPed by the API; expires)."""
        return self._key("node-replies", _id("command_id", command_id))

    def task_events(self, alloc_id: str) -> str:
        """List: TaskEvent JSON recorded by the agent for one allocation (capped; expires)."""
        return self._key("task-events", _id("alloc_id", alloc_id))

    # -- the leader's fencing keys ------------------------------------------------------------

    @property
    def index_key(self) -> str:
        """String: the last committed state-log index."""
        return self._key("leader", "index")

    @property
    def term_key(self) -> str:
        """String: the current leader term."""
        return self._key("leader", "term")

    @property
    def tokens_key(self) -> str:
        """Hash: eval_id -> outstanding delivery token."""
        return self._key("leader", "tokens")

    @property
    def snapshot_key(self) -> str:
        """String: the id of the latest state snapshot (actors/runtime/snapshots.py)."""
        return self._key("leader", "snapshot")

    def snapshot_data(self, snapshot_id: str) -> str:
        """List: a snapshot's header, then its chunks."""
        return self._key("leader", "snapshot", snapshot_id)

    # -- the HTTP API's own keys ----------------------------------------------------------------

    @property
    def acl_tokens(self) -> str:
        """Hash: ACL token accessor ID -> token JSON (with its secret's hash, never the
        secret; actors/api/acl_redis.py)."""
        return self._key("acl", "token-records")

    @property
    def acl_legacy_tokens(self) -> str:
        """Hash of an earlier drover: ACL secret -> token JSON (moved at start, then gone)."""
        return self._key("acl", "tokens")

    @property
    def acl_secrets(self) -> str:
        """Hash: SHA-256 of an ACL secret -> the accessor ID of its token."""
        return self._key("acl", "secrets")

    @property
    def acl_policies(self) -> str:
        """Hash: ACL policy name -> policy JSON."""
        return self._key("acl", "policies")

    @property
    def acl_index(self) -> str:
        """Counter: the create and modify indexes of ACL tokens and policies."""
        return self._key("acl", "index")

    @property
    def acl_bootstrap(self) -> str:
        """String: the accessor ID of the bootstrap token; its presence ends bootstrapping."""
        return self._key("acl", "bootstrap")

    @property
    def fleets(self) -> str:
        """Hash: fleet name -> declared fleet JSON (what `drover fleet apply` declared)."""
        return self._key("fleets")


def _id(what: str, value: str) -> str:
    if not value:
        raise ValueError(f"{what} must not be empty")
    return value
