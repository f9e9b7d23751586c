"""Fixtures of the actors' tests: a client of the module's real redis-server
(tests/conftest.py), flushed before each test, so that every test starts from an empty
Redis whatever ran before it."""

from __future__ import annotations

import pytest
import redis

from actors.streams import connect
from launch.redis_server import EmbeddedRedis


@pytest.fixture
def client(redis_server: EmbeddedRedis) -> redis.Redis:
    # Not closed after the test: a service thread a test leaves blocked on it would then
    # fail on a closed socket (it is a daemon, gone with the process).
    r = connect(redis_server.url)
    r.flushall()
    return r
