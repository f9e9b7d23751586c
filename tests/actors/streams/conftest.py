"""A client of the module's real redis-server (tests/conftest.py), flushed between tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from actors.streams import StreamBus, connect
from launch.redis_server import EmbeddedRedis


@pytest.fixture
def client(redis_server: EmbeddedRedis) -> Iterator[redis.Redis]:
    r = connect(redis_server.url)
    r.flushall()
    yield r
    r.close()


@pytest.fixture
def bus(client: redis.Redis) -> StreamBus:
    return StreamBus(client)
