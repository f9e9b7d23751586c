"""The autoscaler actor in a running system (Ray, the embedded Redis, a simulated fleet),
with its two metric sources, on one system (a start costs seconds):

- drover's: usage reports published on the usage stream, as agents publish them, drive a
  real scale-up of a job group through the leader; the decision reads back through the HTTP
  API and `drover scaling policy explain`;
- Prometheus': a real Prometheus server scrapes the running drover's
  `/v1/metrics?format=prometheus`, and the `prometheus` source reads it back: a drover metric
  and `up` as points, Prometheus' own error for a bad query, and the one-series rule.

The server is `prometheus` on PATH, else Debian's package (`apt-get download prometheus`,
unpacked with `dpkg-deb -x`), else the official release tarball, both kept under the repo's
`.cache/prometheus/`. Without any of them its tests skip, and fail where CI=true."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tarfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from actors.agent.core import FleetSpec
from actors.autoscaler.core.registry import group_policy_id
from actors.autoscaler.sources import PrometheusSource
from actors.streams import StreamBus, connect
from actors.streams.names import StreamNames
from contracts import ClientStatus
from contracts.autoscaling import MetricQuery, MetricReadError
from contracts.jobspec import parse_hcl
from contracts.usage import REPORT_TYPE, USAGE_STREAM_MAXLEN, AllocUsage, UsageReport
from launch.cli import main as cli
from launch.system import DroverSystem, SystemConfig

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "prometheus"
RELEASE = "2.53.2"
TARBALL_URL = (
    f"https://github.com/prometheus/prometheus/releases/download/v{RELEASE}/"
    f"prometheus-{RELEASE}.linux-amd64.tar.gz"
)

SHOP = """
job "shop" {
  group "api" {
    count = 2
    task "server" {
      driver = "mock"
      config {
        load = { shape = "constant", base = 300 }
      }
      resources {
        cpu    = 250
        memory = 64
      }
    }
  }
}
"""


def find_prometheus() -> tuple[Path | None, list[str]]:
    """The server's binary, obtaining it into CACHE if needed; (None, why) if it cannot."""
    on_path = shutil.which("prometheus")
    if on_path:
        return Path(on_path), []
    debian, release = CACHE / "deb" / "usr" / "bin" / "prometheus", CACHE / "release" / "prometheus"
    for found in (debian, release):
        if found.is_file():
            return found, []
    CACHE.mkdir(parents=True, exist_ok=True)
    why: list[str] = []
    try:
        subprocess.run(
            ["apt-get", "download", "prometheus"],
            cwd=CACHE, check=True, capture_output=True, timeout=300,
        )  # fmt: skip
        (deb,) = CACHE.glob("prometheus_*.deb")
        subprocess.run(
            ["dpkg-deb", "-x", str(deb), str(CACHE / "deb")],
            check=True, capture_output=True, timeout=300,
        )  # fmt: skip
        deb.unlink()
        if debian.is_file():
            return debian, []
        why.append("the Debian package holds no usr/bin/prometheus")
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        why.append(f"apt-get download prometheus: {exc} {detail.decode(errors='replace')}")
    try:
        archive = CACHE / "release.tar.gz"
        urllib.request.urlretrieve(TARBALL_URL, archive)
        with tarfile.open(archive) as tar:
            member = tar.getmember(f"prometheus-{RELEASE}.linux-amd64/prometheus")
            source = tar.extractfile(member)
            assert source is not None
            release.parent.mkdir(parents=True, exist_ok=True)
            release.write_bytes(source.read())
        release.chmod(0o755)
        archive.unlink()
        return release, []
    except (OSError, KeyError, tarfile.TarError) as exc:
        why.append(f"{TARBALL_URL}: {exc}")
    return None, why


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def prometheus_address() -> str:
    """Chosen before the system starts: its autoscaler queries the server found there."""
    return f"127.0.0.1:{free_port()}"


@pytest.fixture(scope="module")
def system(
    tmp_path_factory: pytest.TempPathFactory, prometheus_address: str
) -> Iterator[DroverSystem]:
    config = SystemConfig(
        data_dir=tmp_path_factory.mktemp("drover-prometheus"),
        workers=1,
        num_cpus=2,
        fleets=[FleetSpec(name="sim", count=2, cpu_mhz=4000, memory_mb=8192)],
        http_addr="127.0.0.1:0",
        tracing=False,
        autoscaler_prometheus_address=f"http://{prometheus_address}",
    )
    with DroverSystem(config) as running:
        running.client().run_job(parse_hcl(SHOP))
        yield running


@pytest.fixture(scope="module")
def prometheus(
    system: DroverSystem, tmp_path_factory: pytest.TempPathFactory, prometheus_address: str
) -> Iterator[str]:
    """A Prometheus server scraping the system's API every second; its base URL."""
    binary, why = find_prometheus()
    if binary is None:
        reason = "no Prometheus server could be obtained: " + "; ".join(why)
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    work = tmp_path_factory.mktemp("prometheus")
    target = system.http_address.removeprefix("http://")
    (work / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        "  - job_name: drover\n"
        # drover's labels win over the target's (`job`: the allocation's job, as with Nomad)
        "    honor_labels: true\n"
        "    metrics_path: /v1/metrics\n"
        "    params: {format: [prometheus]}\n"
        f"    static_configs: [{{targets: ['{target}']}}]\n"
    )
    address = prometheus_address
    log = (work / "prometheus.log").open("wb")
    process = subprocess.Popen(
        [
            str(binary),
            f"--config.file={work / 'prometheus.yml'}",
            f"--storage.tsdb.path={work / 'data'}",
            f"--web.listen-address={address}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while not ready(f"http://{address}"):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    f"Prometheus did not start: {(work / 'prometheus.log').read_text()[-2000:]}"
                )
            time.sleep(0.2)
        yield f"http://{address}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def ready(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/-/ready", timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def poll(source: PrometheusSource, query: str, window_s: float = 10.0) -> list[tuple[float, float]]:
    """The points of a windowed query, once Prometheus has scraped some (30 s at most)."""
    deadline = time.monotonic() + 30
    while True:
        now = time.time()
        points = source.read(MetricQuery("prometheus", query, now - window_s, now))
        if points or time.monotonic() > deadline:
            return points
        time.sleep(0.5)


def test_prometheus_scrapes_drover_and_the_source_reads_it(prometheus: str) -> None:
    source = PrometheusSource(prometheus)
    up = poll(source, 'up{job="drover"}')
    assert up and all(value == 1.0 for _, value in up)
    # Each of the 2 allocations carries half of the group's 300 MHz: 150 MHz of 250 allocated.
    ticks = poll(source, 'sum(nomad_client_allocs_cpu_total_ticks{job="shop"})')
    assert ticks, "no usage of job shop scraped"
    assert ticks[-1][1] == pytest.approx(300.0, rel=0.01)
    now = time.time()
    ratio = source.read(
        MetricQuery(
            "prometheus",
            'avg(nomad_client_allocs_cpu_total_ticks{job="shop"}'
            ' / nomad_client_allocs_cpu_allocated{job="shop"}) * 100',
            now,
            now,
            instant=True,
        )
    )
    assert len(ratio) == 1 and ratio[0][1] == pytest.approx(60.0, rel=0.01)
    running = source.read(
        MetricQuery("prometheus", "nomad_nomad_job_status_running", now, now, instant=True)
    )
    assert len(running) == 1 and running[0][1] >= 1.0  # shop (and promscale if it ran first)


def test_the_source_reports_prometheus_errors(prometheus: str) -> None:
    source = PrometheusSource(prometheus)
    now = time.time()
    with pytest.raises(MetricReadError, match=r'query "sum\(" failed: bad_data: .*parse error'):
        source.read(MetricQuery("prometheus", "sum(", now - 10, now))
    poll(source, 'sum(nomad_client_allocs_cpu_total_percent{job="shop"})')
    now = time.time()  # after the wait: the window must hold the scrapes
    with pytest.raises(MetricReadError, match=r"returned 2 series, only 1 is expected"):
        source.read(
            MetricQuery(
                "prometheus", 'nomad_client_allocs_cpu_total_percent{job="shop"}', now - 5, now
            )
        )
    assert source.read(MetricQuery("prometheus", "no_such_metric", now - 10, now)) == []


SCALED = """
job "promscale" {
  group "api" {
    count = 2
    scaling {
      min = 1
      max = 8
      policy {
        evaluation_interval = "1s"
        cooldown            = "2s"
        check "cpu" {
          source       = "prometheus"
          query        = "avg(USED / ALLOCATED) * 100"
          query_window = "3s"
          strategy "target-value" { target = 60 }
        }
      }
    }
    task "server" {
      driver = "mock"
      config {
        load = { shape = "constant", base = 600 }
      }
      resources {
        cpu    = 250
        memory = 64
      }
    }
  }
}
"""


def test_a_policy_scales_from_a_promql_query(prometheus: str, system: DroverSystem) -> None:
    """600 MHz over 2 allocations of 250 is 120 % of what they were given: the policy,
    reading Prometheus, settles the group at 4 (150 MHz each, 60 %)."""
    client = system.client()
    metric = 'nomad_client_allocs_cpu_{}{{job=\\"promscale\\"}}'
    text = SCALED.replace("USED", metric.format("total_ticks"))
    client.run_job(parse_hcl(text.replace("ALLOCATED", metric.format("allocated"))))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job = client.job("promscale")
        if job is not None and job.task_groups[0].count == 4:
            break
        time.sleep(0.5)
    job = client.job("promscale")
    assert job is not None and job.task_groups[0].count == 4
    url = f"{system.http_address}/v1/job/promscale/scale"
    with urllib.request.urlopen(url, timeout=10) as response:
        events = json.loads(response.read())["TaskGroups"]["api"]["Events"]
    assert events[0]["Count"] == 4  # newest first, as Nomad lists them
    assert "scaling up because factor is 2" in events[0]["Message"]


FEEDER = """
job "feeder" {
  group "g" {
    count = 1
    task "t" {
      driver = "mock"
      config {
        load = { shape = "constant", base = 200 }
      }
      resources {
        cpu    = 250
        memory = 64
      }
    }
  }
}
"""

SLEEPER = """
job "sleeper" {
  group "api" {
    count = 0
    scaling {
      min = 0
      max = 4
      policy {
        evaluation_interval = "1s"
        cooldown            = "1s"
        check "demand" {
          source       = "prometheus"
          query        = "DEMAND"
          query_window = "2s"
          strategy "target-value" { target = 1 }
        }
      }
    }
    task "t" {
      driver = "mock"
      resources {
        cpu    = 100
        memory = 32
      }
    }
  }
}
"""


def test_a_group_scales_from_zero_and_back_on_a_demand_it_does_not_produce(
    prometheus: str, system: DroverSystem
) -> None:
    """The sleeper runs nothing while there is no demand; the feeder's load (an external
    signal, 200 MHz = 2 units) wakes it from 0 to 2, and it goes back to 0 when the feeder
    stops (`or vector(0)`: no series is no demand)."""
    client = system.client()
    demand = 'sum(nomad_client_allocs_cpu_total_ticks{job=\\"feeder\\"}) / 100 or vector(0)'
    client.run_job(parse_hcl(SLEEPER.replace("DEMAND", demand)))

    def count() -> int:
        job = client.job("sleeper")
        return job.task_groups[0].count if job is not None else -1

    time.sleep(3)
    assert count() == 0, "no demand: it stays at zero"
    client.run_job(parse_hcl(FEEDER))
    wait_until(lambda: count() == 2, "the sleeper to wake up at 2")
    client.stop_job("feeder")
    wait_until(lambda: count() == 0, "the sleeper to go back to 0")


def wait_until(check: Any, what: str, deadline_s: float = 60.0) -> None:
    deadline = time.monotonic() + deadline_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


# -- drover's own source: usage reports on the usage stream ---------------------------------

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
