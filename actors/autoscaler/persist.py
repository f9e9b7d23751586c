"""What the autoscaler keeps in Redis besides the state log:

- applied policy files (core/applied.py), a hash `{prefix}:scaling-policies` (name -> HCL
  text; the key is built from the stream prefix here, not in StreamNames);
- a fleet's last scaling, in its declared spec (the hash `StreamNames.fleets` that
  launch/system.py keeps): `count` becomes the scaled count, so a restarted system hosts
  the fleet at it, and `last_scaled_s` is when, from which a restarted autoscaler resumes
  the fleet policy's cooldown.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import orjson
import redis

from contracts.autoscaling import DRY_RUN_COUNT, Decision

log = logging.getLogger(__name__)


class RedisPolicyStore:
    def __init__(self, client: redis.Redis, key: str) -> None:
        self.client = client
        self.key = key

    def load(self) -> dict[str, str]:
        raw: Any = self.client.hgetall(self.key)
        return {_text(k): _text(v) for k, v in raw.items()}

    def save(self, name: str, text: str) -> None:
        self.client.hset(self.key, name, text)

    def drop(self, name: str) -> None:
        self.client.hdel(self.key, name)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def record_fleet_scaled(client: redis.Redis, key: str, fleet: str, count: int, at_s: float) -> bool:
    """Write the scaled count and its time into the fleet's stored spec (optimistically
    locked against a `fleet apply` writing it meanwhile). False when the fleet has no stored
    spec (one configured at start) or is being deleted: nothing is written."""

    written: list[bool] = []

    def update(pipe: Any) -> None:
        written.clear()
        raw = pipe.hget(key, fleet)
        if not raw:
            return
        spec = orjson.loads(raw)
        if spec.get("deleting") or spec.get("backend", "simulated") != "simulated":
            return
        spec["count"] = count
        spec["last_scaled_s"] = at_s
        pipe.multi()
        pipe.hset(key, fleet, orjson.dumps(spec))
        written.append(True)

    client.transaction(update, key)
    return bool(written)


def last_scaled_s(spec: dict[str, Any] | None) -> float | None:
    """When the fleet was last scaled by a policy, from its stored spec."""
    value = spec.get("last_scaled_s") if spec is not None else None
    return float(value) if isinstance(value, int | float) else None


class FleetScalings:
    """The fleet scalings sent and not answered yet, recorded in the specs once done."""

    def __init__(self, client: redis.Redis, key: str, clock: Callable[[], float]) -> None:
        self.client = client
        self.key = key
        self.clock = clock
        self._sent: dict[str, tuple[str, int]] = {}  # decision id -> (fleet, count)

    def sent(self, fleet: str, decision: Decision) -> None:
        action = decision.action
        if action is not None and not action.error and action.count != DRY_RUN_COUNT:
            self._sent[decision.decision_id] = (fleet, action.count)

    def answered(self, decision_id: str, ok: bool) -> None:
        scaled = self._sent.pop(decision_id, None)
        if scaled is None or not ok:
            return
        try:
            record_fleet_scaled(self.client, self.key, *scaled, self.clock())
        except redis.RedisError as exc:  # the scaling stands; only its memory is lost
            log.warning("fleet %s: scaling not recorded: %s", scaled[0], exc)
