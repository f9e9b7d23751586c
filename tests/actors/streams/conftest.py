"""Two ways to drive Redis' own clocks instead of waiting them out: entries made idle (for
XAUTOCLAIM's min-idle-time) and blocked reads found and released (for XREAD's BLOCK). The
flushed `client` is tests/actors/conftest.py's."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import pytest
import redis

from actors.streams import StreamBus

MakeIdle = Callable[[str, str, str, Sequence[str]], None]
BlockedIn = Callable[[str], int]


@pytest.fixture
def bus(client: redis.Redis) -> StreamBus:
    return StreamBus(client)


@pytest.fixture
def make_idle(client: redis.Redis) -> MakeIdle:
    """`make_idle(stream, group, owner, ids)`: the owner's pending entries look delivered an
    hour ago, as a dead consumer's would. XCLAIM to the same owner with IDLE and JUSTID moves
    nothing and counts no delivery; it only sets the idle time."""

    def age(stream: str, group: str, owner: str, ids: Sequence[str]) -> None:
        claimed = client.xclaim(stream, group, owner, 0, list(ids), idle=3_600_000, justid=True)
        assert len(claimed) == len(ids), f"not all of {ids} pending for {owner}"

    return age


@pytest.fixture
def blocked_in(client: redis.Redis) -> BlockedIn:
    """`blocked_in(command)`: the id of a connection blocked in `command` (CLIENT LIST flag
    `b`), polled for with a deadline; `client.client_unblock(id)` then ends its block as if
    its timeout had passed."""

    def find(command: str) -> int:
        deadline = time.monotonic() + 30
        while True:
            for info in client.client_list():
                if info["cmd"] == command and "b" in info["flags"]:
                    return int(info["id"])
            assert time.monotonic() < deadline, f"no connection ever blocked in {command}"
            time.sleep(0.01)

    return find
