"""The autoscaler actor in a running system (Ray, the embedded Redis, a simulated fleet):
usage reports published on the usage stream, as agents publish them, drive a real scale-up
of a job group through the leader; the decision reads back through the HTTP API and
`drover scaling policy explain`."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from actors.agent.core import FleetSpec
from actors.autoscaler.core.registry import group_policy_id
from actors.streams import StreamBus, connect
from actors.streams.names import StreamNames
from contracts import ClientStatus
from contracts.jobspec import parse_hcl
from contracts.usage import REPORT_TYPE, USAGE_STREAM_MAXLEN, AllocUsage, UsageReport
from launch.cli import main as cli
from launch.system import DroverSystem, SystemConfig

WEB = """
job "web" {
  group "api" {
    count = 2
    scaling {
      min = 1
      max = 6
      policy {
        evaluation_interval = "1s"
        cooldown            = "10m"
        check "cpu" {
          query        = "avg_cpu"
          query_window = "5s"
          strategy "target-value" { target = 50 }
        }
      }
    }
    task "t" {
      driver = "mock"
      resources {
        cpu    = 200
        memory = 64
      }
    }
  }
}
"""
POLICY_ID = group_policy_id("default", "web", "api")


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DroverSystem]:
    config = SystemConfig(
        data_dir=Path(tmp_path_factory.mktemp("drover-autoscaler")),
        workers=1,
        num_cpus=2,
        fleets=[FleetSpec(name="sim", count=2, cpu_mhz=4000, memory_mb=8192)],
        http_addr="127.0.0.1:0",
        tracing=False,
    )
    with DroverSystem(config) as running:
        yield running


def test_reported_usage_scales_a_group_up_through_the_autoscaler_actor(
    system: DroverSystem, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    client = system.client()
    client.run_job(parse_hcl(WEB))
    allocs = [a.id for a in client.wait_for_allocs("web", count=2, status="running")]
    bus = StreamBus(connect(system.redis_url))
    usage_stream = StreamNames(system.config.prefix).usage
    deadline = time.monotonic() + 60
    events: list[dict[str, Any]] = []
    while not events:  # reports at the agents' pace, each allocation at 100 % of a core
        assert time.monotonic() < deadline, "no scaling event"
        now_ns = time.time_ns()
        samples = tuple(
            AllocUsage(a, "default", "web", "api", "n", now_ns, 0.0, 100.0, 32.0) for a in allocs
        )
        report = UsageReport("test", samples)
        bus.publish(usage_stream, [(REPORT_TYPE, report)], trace={}, maxlen=USAGE_STREAM_MAXLEN)
        time.sleep(0.5)
        events = get(system, "/v1/job/web/scale")["TaskGroups"]["api"]["Events"]
    (event,) = events
    assert (event["Count"], event["PreviousCount"], event["Error"]) == (4, 2, False)
    assert event["Message"] == "scaling up because factor is 2.000000"
    assert event["Meta"]["nomad_policy_id"] == POLICY_ID
    job = client.job("web")
    assert job is not None and job.task_groups[0].count == 4
    client.wait_for_allocs("web", count=4, status=ClientStatus.RUNNING)

    # The decision, read back as a user reads it, once the leader's answer reached it.
    monkeypatch.setenv("DROVER_ADDR", system.http_address)

    def scaled() -> dict[str, Any] | None:
        code = cli(["scaling", "policy", "explain", "-json", "web", "api"])
        explained = orjson.loads(capsys.readouterr().out)
        assert code == 0
        calls = [d for d in explained["Decisions"] if d["Outcome"] == "scale"]
        return calls[0] if calls and calls[0]["Scale"]["Status"] != "pending" else None

    deadline = time.monotonic() + 30
    while (decision := scaled()) is None:
        assert time.monotonic() < deadline, "the Scale call was never answered"
        time.sleep(0.2)
    assert (decision["CurrentCount"], decision["Action"]["Count"]) == (2, 4)
    assert decision["Scale"]["Status"] == "ok"
    assert decision["Scale"]["EvalID"] == event["EvalID"]
    (check,) = decision["Checks"]
    assert (check["Query"]["Query"], check["Value"]) == ("avg_cpu", 100.0)


def get(system: DroverSystem, path: str) -> Any:
    with urllib.request.urlopen(system.http_address + path, timeout=10) as response:
        return orjson.loads(response.read())
