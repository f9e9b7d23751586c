"""Shared by the end-to-end modules: a local multi-node Ray cluster, the CLI against a running
system's API, and waiting for what it eventually shows."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
import ray
from ray.cluster_utils import Cluster

from launch.cli import main as cli

ROOT = str(Path(__file__).resolve().parents[2])
DEADLINE_S = 90.0

Drover = Callable[..., tuple[int, str, str]]


@contextlib.contextmanager
def ray_cluster(
    namespace: str, head: dict[str, Any], workers: Sequence[dict[str, Any]]
) -> Iterator[Cluster]:
    """A ray.cluster_utils cluster of a head and `workers` (add_node arguments each), this
    process connected to it; tasks' entrypoints in the tests are found from the project root."""
    if ray.is_initialized():  # left by another module: this one joins its own cluster
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args=head)
    for worker in workers:  # started together, then waited for at once
        cluster.add_node(wait=False, **worker)
    cluster.wait_for_nodes()
    ray.init(
        address=cluster.address,
        namespace=namespace,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": ROOT}},
    )
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


@pytest.fixture
def drover(
    system: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Drover:
    """`drover ARGS...` against the module's `system` API: (exit code, stdout, stderr)."""
    monkeypatch.setenv("DROVER_ADDR", system.http_address)

    def run(*argv: str) -> tuple[int, str, str]:
        code = cli(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def json_of(drover: Drover, *argv: str) -> Any:
    """`drover ARGS... -json`, parsed; the command must succeed."""
    code, out, err = drover(*argv, "-json")
    assert code == 0, err
    return orjson.loads(out)


def wait_for(check: Callable[[], Any], what: str, deadline_s: float = DEADLINE_S) -> Any:
    """The first truthy value of `check()`, polled until the deadline."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def e2e() -> Any:
    """The helpers above, for test modules (importlib mode: they cannot import conftest)."""
    return SimpleNamespace(json_of=json_of, wait_for=wait_for, free_port=free_port, root=ROOT)


@pytest.fixture(scope="session")
def cluster_of() -> Callable[..., Any]:
    """`ray_cluster`, for modules' own (module-scoped) cluster fixtures."""
    return ray_cluster
