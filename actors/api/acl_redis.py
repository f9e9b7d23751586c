"""ACL tokens and policies in Redis (the `AclStore` of a running system, core/acl.py).

Like fleet declarations, ACLs are not cluster state the leader schedules on, so they live
in hashes of their own, shared by every API replica: policies by name, tokens by accessor,
and the accessor of each secret's SHA-256 (the secret itself is never stored). Indexes come
from one counter. The bootstrap is guarded by SETNX, so it happens once however many agents
try.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import orjson
import redis

from actors.api.core.acl import stamped
from actors.streams.names import StreamNames
from contracts.acl import AclPolicy, AclToken, hash_secret


class RedisAclStore:
    def __init__(self, client: redis.Redis, names: StreamNames) -> None:
        self.client = client
        self.names = names

    def _next(self) -> int:
        return int(self.client.incr(self.names.acl_index))

    # -- policies -------------------------------------------------------------------------

    def policy(self, name: str) -> AclPolicy | None:
        raw = self.client.hget(self.names.acl_policies, name)
        return AclPolicy(**orjson.loads(raw)) if raw else None

    def policies(self) -> list[AclPolicy]:
        rows = self.client.hvals(self.names.acl_policies)
        return sorted((AclPolicy(**orjson.loads(r)) for r in rows), key=lambda p: p.name)

    def put_policy(self, policy: AclPolicy) -> AclPolicy:
        stored = stamped(policy, self.policy(policy.name), self._next())
        self.client.hset(self.names.acl_policies, policy.name, orjson.dumps(asdict(stored)))
        return stored

    def delete_policy(self, name: str) -> bool:
        return bool(self.client.hdel(self.names.acl_policies, name))

    # -- tokens ---------------------------------------------------------------------------

    def token(self, accessor_id: str) -> AclToken | None:
        raw = self.client.hget(self.names.acl_tokens, accessor_id)
        return _token(raw) if raw else None

    def token_by_hash(self, secret_hash: str) -> AclToken | None:
        accessor = self.client.hget(self.names.acl_secrets, secret_hash)
        if not accessor:
            return None
        token = self.token(accessor.decode() if isinstance(accessor, bytes) else accessor)
        return token if token is not None and token.secret_hash == secret_hash else None

    def tokens(self) -> list[AclToken]:
        rows = self.client.hvals(self.names.acl_tokens)
        return sorted((_token(r) for r in rows), key=lambda t: t.create_index)

    def put_token(self, token: AclToken) -> AclToken:
        stored = stamped(token, self.token(token.accessor_id), self._next())
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(self.names.acl_tokens, token.accessor_id, orjson.dumps(asdict(stored)))
        pipe.hset(self.names.acl_secrets, token.secret_hash, token.accessor_id)
        pipe.execute()
        return stored

    def delete_token(self, accessor_id: str) -> bool:
        token = self.token(accessor_id)
        if token is None:
            return False
        pipe = self.client.pipeline(transaction=True)
        pipe.hdel(self.names.acl_tokens, accessor_id)
        pipe.hdel(self.names.acl_secrets, token.secret_hash)
        pipe.execute()
        return True

    def migrate_plain_tokens(self) -> int:
        """Tokens an earlier drover kept by their plain secret (the `acl:tokens` hash of
        management tokens) are kept by hash instead, and the old hash goes. Returns how
        many were moved."""
        old_key = self.names.acl_legacy_tokens
        rows = self.client.hgetall(old_key)
        for secret, raw in rows.items():
            data = orjson.loads(raw)
            secret_id = secret.decode() if isinstance(secret, bytes) else str(secret)
            self.put_token(
                AclToken(
                    accessor_id=data["accessor_id"],
                    secret_hash=hash_secret(secret_id),
                    name=data.get("name", ""),
                    type=data.get("type", "management"),
                    global_=True,
                    create_time=data.get("create_time", 0),
                )
            )
        if rows:
            self.client.delete(old_key)
        return len(rows)

    def claim_bootstrap(self, accessor_id: str) -> bool:
        return bool(self.client.set(self.names.acl_bootstrap, accessor_id, nx=True))


def _token(raw: Any) -> AclToken:
    data = orjson.loads(raw)
    data["policies"] = tuple(data.get("policies") or ())
    return AclToken(**data)
