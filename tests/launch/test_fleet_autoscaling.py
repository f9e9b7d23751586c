"""Cluster scaling of a simulated fleet in a running system: a policy file scales the fleet
out while allocations are blocked for lack of capacity, and back in once the work is gone,
the instance it picked drained and removed."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import ray

from actors.agent.core import FleetSpec
from actors.autoscaler.core.registry import file_policy_id
from contracts import ClientStatus
from contracts.jobspec import parse_hcl
from contracts.share import FLEET_ATTRIBUTE
from launch.system import LEADER_NAME, DroverSystem, SystemConfig

POLICY = """
scaling "sim" {
  enabled = true
  min     = 1
  max     = 3
  policy {
    evaluation_interval = "1s"
    cooldown            = "1s"
    # One group: a check that does not fire (None) does not hold back the other's
    # scale-in, as it would outside a group ("safest wins": Up > None > Down).
    check "blocked" {
      group = "capacity"
      query = "blocked_allocs"
      strategy "threshold" {
        lower_bound           = 1
        delta                 = 1
        within_bounds_trigger = 1
      }
    }
    check "idle" {
      group = "capacity"
      query = "percentage-allocated_cpu"
      strategy "threshold" {
        upper_bound           = 1
        delta                 = -1
        within_bounds_trigger = 1
      }
    }
    target "fleet" {
      fleet                  = "sim"
      node_selector_strategy = "empty"
      node_drain_deadline    = "5s"
    }
  }
}
"""
# Two allocations of 800 MHz: one fits an instance of 1000 MHz, the other waits (blocked).
BIG = """
job "big" {
  group "g" {
    count = 2
    task "t" {
      driver = "mock"
      resources {
        cpu    = 800
        memory = 64
      }
    }
  }
}
"""
T = TypeVar("T")


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DroverSystem]:
    data = Path(tmp_path_factory.mktemp("drover-fleet-scaling"))
    policies = data / "policies"
    policies.mkdir()
    (policies / "sim.hcl").write_text(POLICY)
    config = SystemConfig(
        data_dir=data / "data",
        workers=1,
        num_cpus=2,
        tracing=False,
        autoscaler_policy_dir=policies,
    )
    with DroverSystem(config) as running:
        # Declared (stored), so that the count a policy sets is remembered.
        running.apply_fleet(FleetSpec(name="sim", count=1, cpu_mhz=1000, memory_mb=1024))
        yield running


def wait_until(probe: Callable[[], T | None], what: str, timeout_s: float = 30.0) -> T:
    deadline = time.monotonic() + timeout_s
    while (found := probe()) is None:
        assert time.monotonic() < deadline, what
        time.sleep(0.2)
    return found


def instances(system: DroverSystem) -> list[Any]:
    leader = ray.get_actor(LEADER_NAME, namespace=system.config.namespace)
    nodes = ray.get(leader.nodes.remote())
    return sorted(
        (n for n in nodes if n.attributes.get(FLEET_ATTRIBUTE) == "sim"), key=lambda n: n.name
    )


def test_a_fleet_grows_while_work_is_blocked_and_shrinks_once_it_is_gone(
    system: DroverSystem,
) -> None:
    policy_id = file_policy_id(str(system.config.autoscaler_policy_dir / "sim.hcl"), "sim")
    listed = {p["ID"]: p for p in ray.get(system.autoscaler.policies.remote())}
    assert listed[policy_id]["Evaluated"] and listed[policy_id]["Target"]["Fleet"] == "sim"
    client = system.client()
    client.run_job(parse_hcl(BIG))

    # Out: the blocked allocation makes the policy add one instance, where it then runs.
    client.wait_for_allocs("big", count=2, status=ClientStatus.RUNNING, timeout_s=30)
    assert [n.name for n in instances(system)] == ["sim-0000", "sim-0001"]

    def decided(outcome: str, count: int) -> dict[str, Any] | None:
        decisions = ray.get(system.autoscaler.decisions.remote(policy_id, 50))
        return next(
            (d for d in decisions if d["Outcome"] == outcome and d["Action"]["Count"] == count),
            None,
        )

    out = wait_until(lambda: decided("scale", 2), "no scale-out decision")
    assert out["CurrentCount"] == 1 and out["Winner"] == "blocked"
    counts = lambda: {f.name: f.count for f in system.fleets()}  # noqa: E731
    wait_until(lambda: counts()["sim"] == 2 or None, "the fleet's count to read 2")

    # In: with the job stopped nothing is allocated; one instance is drained and removed,
    # down to the policy's min of 1.
    client.stop_job("big")
    wait_until(lambda: len(instances(system)) == 1 or None, "no instance was removed")
    scaled_in = wait_until(lambda: decided("scale", 1), "no scale-in decision")
    assert scaled_in["CurrentCount"] == 2 and scaled_in["Winner"] == "idle"
    (left,) = instances(system)
    assert left.ready()
    wait_until(lambda: counts()["sim"] == 1 or None, "the fleet's count to read 1")
