"""A Ray-backed fleet scaled through Ray's autoscaler on a local autoscaling cluster
(Ray's fake multi-node provider, as `ray.cluster_utils.AutoscalingCluster` starts it): the
fleet target's ask really launches worker nodes, and lowering it lets Ray remove them once
idle. No drover agent runs on the new nodes (launch/system.py starts agents only for the
nodes alive at start), so the fleet reports them as starting.

Not AutoscalingCluster itself: its start and shutdown run `ray stop --force`, which kills
every Ray process on the machine (other sessions' clusters too), and Ray 2.60's wheel lacks
the fake_multi_node/example.yaml it reads. The same cluster is started here from its own
config, on its own port and temp dir, and only its own processes are stopped."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray

from actors.autoscaler.ray_fleet import LiveRayCluster, RayFleets

WORKER_TYPE = {"resources": {"CPU": 2}, "node_config": {}, "min_workers": 0, "max_workers": 2}
DEADLINE_S = 120.0  # the fake provider starts a node in seconds; 2 cores are slow


def config(gcs_address: str) -> dict[str, Any]:
    return {
        "cluster_name": "drover-ray-fleet",
        "max_workers": 2,
        "provider": {
            "type": "fake_multinode",
            "use_node_id_as_ip": True,
            "disable_node_updaters": True,
            "disable_launch_config_check": True,
            "gcs_address": gcs_address,  # the provider's default is port 6379 (Redis')
        },
        "available_node_types": {
            "ray.head.default": {"resources": {"CPU": 0}, "node_config": {}, "max_workers": 0},
            "ray.worker.drover": WORKER_TYPE,
        },
        "head_node_type": "ray.head.default",
        "upscaling_speed": 1.0,
        "idle_timeout_minutes": 0.05,
        **{key: {} for key in ("auth", "docker", "file_mounts")},
        **{
            key: []
            for key in (
                "initialization_commands",
                "setup_commands",
                "head_setup_commands",
                "worker_setup_commands",
                "head_start_ray_commands",
                "worker_start_ray_commands",
                "cluster_synced_files",
                "rsync_exclude",
                "rsync_filter",
            )
        },
        "file_mounts_sync_continuously": False,
    }


def own_processes(marks: tuple[str, ...]) -> list[int]:
    """The PIDs whose command line names this cluster's temp dir or GCS address."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if any(mark in cmdline for mark in marks):
            found.append(int(entry.name))
    return found


def unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":  # the repo's rule: CI runs what the README promises
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def autoscaling_cluster(e2e: Any) -> Iterator[str]:
    if ray.is_initialized():
        ray.shutdown()
    port = e2e.free_port()
    address = f"{ray.util.get_node_ip_address()}:{port}"
    temp = tempfile.mkdtemp(prefix="drover-ray-autoscaling-")
    path = Path(temp) / "autoscaling.json"
    path.write_text(json.dumps(config(address)))
    bin_dir = Path(sys.executable).parent
    env = {
        **os.environ,
        "RAY_FAKE_CLUSTER": "1",
        "AUTOSCALER_UPDATE_INTERVAL_S": "1",
        # `ray start` turns token auth on by default, ray.init does not: one rule for both
        "RAY_AUTH_MODE": "disabled",
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    command = [
        str(bin_dir / "ray"),
        "start",
        "--head",
        f"--port={port}",
        "--num-cpus=0",
        f"--autoscaling-config={path}",
        f"--temp-dir={temp}",
        "--include-dashboard=false",
        "--disable-usage-stats",
    ]
    marks = (temp, f"--gcs-address={address}", f"--gcs_address={address}")
    try:
        started = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        if started.returncode != 0:
            unavailable(f"ray start --autoscaling-config failed: {started.stderr[-1000:]}")
        ray.init(address=address, namespace="drover-ray-fleet", log_to_driver=False)
        yield address
    finally:
        if ray.is_initialized():
            ray.shutdown()
        for pid in own_processes(marks):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)  # SIGTERM leaves gcs_server and raylets up


def alive_workers() -> list[dict[str, Any]]:
    return [n for n in ray.nodes() if n["Alive"] and "node:__internal_head__" not in n["Resources"]]


def test_asking_for_two_instances_launches_two_worker_nodes_and_lowering_removes_them(
    autoscaling_cluster: str, e2e: Any
) -> None:
    assert alive_workers() == []
    fleets = RayFleets(LiveRayCluster("drover-ray-fleet"), time.time)
    extras = {"ray_instance_cpu": "2"}  # no worker yet to take the shape from
    note = fleets.scale("ray", 2, "least_busy", 60, None, extras)
    assert note == "asked Ray's autoscaler for 2 instance(s) of {'CPU': 2.0}"
    workers = e2e.wait_for(lambda: len(alive_workers()) == 2 and alive_workers(), "2 workers")
    assert all(w["Resources"]["CPU"] == 2.0 for w in workers)
    # Up in Ray but not registered by a drover agent: starting, and the policy waits.
    status = fleets.status("ray", None)
    assert (status.ready, status.count, status.starting) == (False, 0, 2)
    fleets.scale("ray", 0, "least_busy", 60, None, extras)
    e2e.wait_for(lambda: not alive_workers(), "Ray to remove the idle workers", DEADLINE_S)
    status = fleets.status("ray", None)
    assert (status.ready, status.count, status.starting) == (True, 0, 0)
