"""Fixtures for the API core: the in-memory backend (actors/api/core/memory_backend.py: a state
store written by the real leader core, the real scheduler run on demand) on a simulated fleet,
and a client that calls the API the way the HTTP server does."""

from __future__ import annotations

import pytest

from actors.agent.core import FleetSpec
from actors.api.core import Api
from actors.api.core.memory_backend import Client, MemoryBackend

__all__ = ["Client", "MemoryBackend"]


@pytest.fixture
def backend() -> MemoryBackend:
    b = MemoryBackend()
    b.apply_fleet(FleetSpec(name="sim", count=4, cpu_mhz=4000, memory_mb=8192))
    return b


@pytest.fixture
def call(backend: MemoryBackend) -> Client:
    return Client(Api(backend))
