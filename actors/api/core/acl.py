"""ACL tokens and policies for the API: issuing, resolving and checking (contracts/acl.py).

`AclService` is the pure part: secrets are made here and only their SHA-256 is handed to
the store; a request's secret resolves to its token and the compiled union of its
policies, cached for `cache_s` (a change made through this service is seen at once, one
made by another API replica within `cache_s`). `AclStore` is where tokens and policies are
kept: `MemoryAclStore` here, `RedisAclStore` (actors/api/acl_redis.py) in a running system.
"""

from __future__ import annotations

import secrets
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from actors.api.core.errors import ApiError
from contracts.acl import (
    POLICY_NAME,
    TOKEN_TYPES,
    Acl,
    AclPolicy,
    AclToken,
    PolicyRules,
    hash_secret,
    parse_rules,
)
from contracts.errors import ValidationError

CACHE_S = 2.0


class AclStore(Protocol):
    def policy(self, name: str) -> AclPolicy | None: ...
    def policies(self) -> list[AclPolicy]: ...
    def put_policy(self, policy: AclPolicy) -> AclPolicy:
        """Store it with its create index kept (or set) and a new modify index."""
        ...

    def delete_policy(self, name: str) -> bool: ...
    def token(self, accessor_id: str) -> AclToken | None: ...
    def token_by_hash(self, secret_hash: str) -> AclToken | None: ...
    def tokens(self) -> list[AclToken]: ...
    def put_token(self, token: AclToken) -> AclToken:
        """Store it (by accessor and by secret hash) with indexes as put_policy does."""
        ...

    def delete_token(self, accessor_id: str) -> bool: ...
    def claim_bootstrap(self, accessor_id: str) -> bool:
        """True the first time only: the bootstrap token may be issued once."""
        ...


Record = TypeVar("Record", AclPolicy, AclToken)


def stamped(record: Record, old: Record | None, index: int) -> Record:
    """`record` as a store keeps it at `index`: the create index of the one it replaces (or
    `index`), and `index` as its modify index."""
    return replace(record, create_index=old.create_index if old else index, modify_index=index)


class MemoryAclStore:
    def __init__(self) -> None:
        self._policies: dict[str, AclPolicy] = {}
        self._tokens: dict[str, AclToken] = {}  # accessor -> token
        self._hashes: dict[str, str] = {}  # secret hash -> accessor
        self._index = 0
        self._bootstrapped = False
        self._lock = threading.Lock()

    def _next(self) -> int:
        self._index += 1
        return self._index

    def policy(self, name: str) -> AclPolicy | None:
        return self._policies.get(name)

    def policies(self) -> list[AclPolicy]:
        return sorted(self._policies.values(), key=lambda p: p.name)

    def put_policy(self, policy: AclPolicy) -> AclPolicy:
        with self._lock:
            stored = stamped(policy, self._policies.get(policy.name), self._next())
            self._policies[policy.name] = stored
            return stored

    def delete_policy(self, name: str) -> bool:
        with self._lock:
            return self._policies.pop(name, None) is not None

    def token(self, accessor_id: str) -> AclToken | None:
        return self._tokens.get(accessor_id)

    def token_by_hash(self, secret_hash: str) -> AclToken | None:
        accessor = self._hashes.get(secret_hash)
        return self._tokens.get(accessor) if accessor else None

    def tokens(self) -> list[AclToken]:
        return sorted(self._tokens.values(), key=lambda t: t.create_index)

    def put_token(self, token: AclToken) -> AclToken:
        with self._lock:
            stored = stamped(token, self._tokens.get(token.accessor_id), self._next())
            self._tokens[token.accessor_id] = stored
            self._hashes[token.secret_hash] = token.accessor_id
            return stored

    def delete_token(self, accessor_id: str) -> bool:
        with self._lock:
            token = self._tokens.pop(accessor_id, None)
            if token is None:
                return False
            self._hashes.pop(token.secret_hash, None)
            return True

    def claim_bootstrap(self, accessor_id: str) -> bool:
        with self._lock:
            if self._bootstrapped:
                return False
            self._bootstrapped = True
            return True


@dataclass(frozen=True, slots=True)
class Issued:
    """A token as made: the only time its secret is known."""

    token: AclToken
    secret_id: str


def new_secret() -> str:
    return str(uuid.UUID(bytes=secrets.token_bytes(16)))


class AclService:
    def __init__(
        self,
        store: AclStore,
        *,
        clock: Callable[[], float] = time.monotonic,
        now_ns: Callable[[], int] = time.time_ns,
        cache_s: float = CACHE_S,
    ) -> None:
        self.store = store
        self.clock = clock
        self.now_ns = now_ns
        self.cache_s = cache_s
        self._resolved: dict[str, tuple[float, AclToken | None, Acl | None]] = {}
        self._rules: dict[tuple[str, int], PolicyRules] = {}  # (name, modify index) -> rules
        self._lock = threading.Lock()

    # -- resolving ------------------------------------------------------------------------

    def resolve(self, secret_id: str) -> tuple[AclToken, Acl] | None:
        """The token of a secret and what it may do; None for an unknown secret."""
        if not secret_id:
            return None
        key = hash_secret(secret_id)
        now = self.clock()
        with self._lock:
            cached = self._resolved.get(key)
        if cached is None or now - cached[0] > self.cache_s:
            token = self.store.token_by_hash(key)
            acl = self._acl_of(token) if token is not None else None
            cached = (now, token, acl)
            with self._lock:
                if len(self._resolved) > 10_000:
                    self._resolved.clear()
                self._resolved[key] = cached
        _at, token, acl = cached
        return (token, acl) if token is not None and acl is not None else None

    def _acl_of(self, token: AclToken) -> Acl:
        if token.management:
            return Acl(management=True)
        rules = []
        for name in token.policies:
            policy = self.store.policy(name)
            if policy is None:
                continue  # deleted since: grants nothing
            key = (policy.name, policy.modify_index)
            parsed = self._rules.get(key)
            if parsed is None:
                parsed = self._rules[key] = parse_rules(policy.rules)
            rules.append(parsed)
        return Acl.of(rules)

    def _changed(self) -> None:
        with self._lock:
            self._resolved.clear()

    # -- tokens ---------------------------------------------------------------------------

    def bootstrap(self, secret_id: str | None = None) -> Issued:
        secret = secret_id or new_secret()
        token = AclToken(
            accessor_id=str(uuid.uuid4()),
            secret_hash=hash_secret(secret),
            name="Bootstrap Token",
            type="management",
            global_=True,
            create_time=self.now_ns(),
        )
        if not self.store.claim_bootstrap(token.accessor_id):
            raise ApiError(400, "ACL bootstrap already done")
        stored = self.store.put_token(token)
        self._changed()
        return Issued(stored, secret)

    def create_token(
        self, name: str, type: str, policies: Sequence[str], global_: bool = False
    ) -> Issued:
        self._check_token(type, policies)
        secret = new_secret()
        token = AclToken(
            accessor_id=str(uuid.uuid4()),
            secret_hash=hash_secret(secret),
            name=name,
            type=type,
            policies=tuple(policies),
            global_=global_,
            create_time=self.now_ns(),
        )
        stored = self.store.put_token(token)
        self._changed()
        return Issued(stored, secret)

    def update_token(
        self, accessor_id: str, name: str, type: str, policies: Sequence[str]
    ) -> AclToken:
        old = self.store.token(accessor_id)
        if old is None:
            raise ApiError(404, f"ACL token {accessor_id} not found")
        self._check_token(type, policies)
        stored = self.store.put_token(replace(old, name=name, type=type, policies=tuple(policies)))
        self._changed()
        return stored

    def delete_token(self, accessor_id: str) -> None:
        if not self.store.delete_token(accessor_id):
            raise ApiError(404, f"ACL token {accessor_id} not found")
        self._changed()

    def _check_token(self, type: str, policies: Sequence[str]) -> None:
        if type not in TOKEN_TYPES:
            raise ApiError(400, f"Type: {type!r} is not one of client, management")
        if type == "client" and not policies:
            raise ApiError(400, "Policies: a client token needs at least one policy")
        if type == "management" and policies:
            raise ApiError(400, "Policies: a management token takes no policies")
        # As Nomad: a token may name policies that do not exist (yet); they grant nothing
        # until they do (`_acl_of`).
        for name in policies:
            if not isinstance(name, str) or not name:
                raise ApiError(400, f"Policies: expected policy names, got {name!r}")

    # -- policies -------------------------------------------------------------------------

    def put_policy(self, name: str, description: str, rules: str) -> AclPolicy:
        if not POLICY_NAME.match(name):
            raise ApiError(400, f"Name: {name!r} must be 1-128 letters, digits and dashes")
        try:
            parse_rules(rules)
        except ValidationError as exc:
            raise ApiError(400, f"Rules: {exc}") from None
        stored = self.store.put_policy(AclPolicy(name, description, rules))
        self._changed()
        return stored

    def delete_policy(self, name: str) -> None:
        if not self.store.delete_policy(name):
            raise ApiError(404, f"ACL policy {name} not found")
        self._changed()
