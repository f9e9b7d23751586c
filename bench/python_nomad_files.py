"""The files python-nomad's sdist leaves out of its `tests/`, written for drover.

python-nomad's test suite imports `tests.common` (where the agent is, its ACL token, the test
namespace) and uses the fixtures `nomad_setup` and `nomad_setup_with_namespace` from
`tests/conftest.py`; its CI writes `example.json` and `example.nomad` with `nomad init` and
`nomad run -output`, and keeps `example_batch_parameterized.json` (a parameterized batch
job) in the repository. None of these ship in the sdist, so `bench.python_nomad` writes the
ones below, our own, into its temporary copy of the tests.

The example job is `nomad init`'s (job "example", group "cache" of 1, task "redis", 500 MHz
and 256 MB, an update block, 300 MB of ephemeral disk) with one change: its `docker` driver
is drover's `mock` driver with no config (drover has no docker driver; a mock task with no
`run_for` runs until it is stopped, as the redis container does).
"""

from __future__ import annotations

from typing import Any

# The namespace python-nomad's tests use where they need one ("admin"); those tests are
# answered by the `responses` mock, never by the agent.
TEST_NAMESPACE = "admin"

COMMON_PY = f'''"""Where the agent under test is (written by drover's bench.python_nomad)."""

import os

IP = os.environ.get("NOMAD_IP", "127.0.0.1")
NOMAD_PORT = os.environ.get("NOMAD_PORT", "4646")
# test_acl.py bootstraps ACLs and stores the bootstrap secret here; conftest.py hands it
# on to the harness, which passes it to the next test files in NOMAD_TOKEN.
NOMAD_TOKEN = os.environ.get("NOMAD_TOKEN") or None
NOMAD_NAMESPACE = "{TEST_NAMESPACE}"
'''

CONFTEST_PY = '''"""python-nomad's fixtures (written by drover's bench.python_nomad)."""

import os

import nomad
import pytest

import tests.common as common


def _client(**extra):
    return nomad.Nomad(
        host=common.IP, port=int(common.NOMAD_PORT), verify=False, token=common.NOMAD_TOKEN, **extra
    )


@pytest.fixture
def nomad_setup():
    return _client()


@pytest.fixture
def nomad_setup_with_namespace():
    return _client(namespace=common.NOMAD_NAMESPACE)


def pytest_sessionfinish(session, exitstatus):
    """Hand the token test_acl.py bootstrapped on to the harness (each file is its own run)."""
    path = os.environ.get("PYNOMAD_TOKEN_FILE")
    if path and common.NOMAD_TOKEN:
        with open(path, "w") as out:
            out.write(common.NOMAD_TOKEN)
'''

# `nomad init`'s example job (Nomad 1.9, comments left out), the docker task on the mock driver.
EXAMPLE_NOMAD = """job "example" {
  update {
    max_parallel      = 1
    min_healthy_time  = "10s"
    healthy_deadline  = "3m"
    progress_deadline = "10m"
    auto_revert       = false
    canary            = 0
  }

  migrate {
    max_parallel     = 1
    health_check     = "checks"
    min_healthy_time = "10s"
    healthy_deadline = "5m"
  }

  group "cache" {
    count = 1

    restart {
      attempts = 2
      interval = "30m"
      delay    = "15s"
      mode     = "fail"
    }

    ephemeral_disk {
      size = 300
    }

    task "redis" {
      driver = "mock"

      resources {
        cpu    = 500
        memory = 256
      }
    }
  }
}
"""

S = 1_000_000_000  # Nomad JSON durations are nanoseconds
MINUTE = 60 * S


def example_job() -> dict[str, Any]:
    """EXAMPLE_NOMAD as `nomad run -output` writes it: `{"Job": {...}}` in Nomad's JSON."""
    update = {
        "Stagger": 30 * S,
        "MaxParallel": 1,
        "HealthCheck": "checks",
        "MinHealthyTime": 10 * S,
        "HealthyDeadline": 3 * MINUTE,
        "ProgressDeadline": 10 * MINUTE,
        "AutoRevert": False,
        "AutoPromote": False,
        "Canary": 0,
    }
    group = {
        "Name": "cache",
        "Count": 1,
        "Update": update,
        "Migrate": {
            "MaxParallel": 1,
            "HealthCheck": "checks",
            "MinHealthyTime": 10 * S,
            "HealthyDeadline": 5 * MINUTE,
        },
        "RestartPolicy": {"Attempts": 2, "Interval": 30 * MINUTE, "Delay": 15 * S, "Mode": "fail"},
        "EphemeralDisk": {"Sticky": False, "SizeMB": 300, "Migrate": False},
        "Tasks": [
            {
                "Name": "redis",
                "Driver": "mock",
                "Config": {},
                "Resources": {"CPU": 500, "MemoryMB": 256},
                "KillTimeout": 5 * S,
            }
        ],
    }
    job = {
        "ID": "example",
        "Name": "example",
        "Type": "service",
        "Priority": 50,
        "Datacenters": ["*"],
        "Update": update,
        "TaskGroups": [group],
    }
    return {"Job": job}


def example_batch_parameterized_job() -> dict[str, Any]:
    """A parameterized batch job ("example-batch") that needs the meta key `time`; each
    dispatched child's mock task runs for a few seconds."""
    task = {
        "Name": "example-task",
        "Driver": "mock",
        "Config": {"run_for": "5s"},
        "Resources": {"CPU": 100, "MemoryMB": 200},
    }
    job = {
        "ID": "example-batch",
        "Name": "example-batch",
        "Type": "batch",
        "Priority": 100,
        "Datacenters": ["*"],
        "ParameterizedJob": {"Payload": "optional", "MetaRequired": ["time"], "MetaOptional": []},
        "TaskGroups": [{"Name": "example-task-group", "Count": 1, "Tasks": [task]}],
    }
    return {"Job": job}
