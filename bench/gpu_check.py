"""drover's GPU paths on a real NVIDIA GPU: `python -m bench.gpu_check --out DIR`.

Three checks, each against what the machine itself says (`nvidia-smi -L`, and PyTorch in a
separate process):

1. Ray's fingerprint: the local Ray's `GPU` and `accelerator_type:<X>` resources, and the
   node `nodes_from_ray` makes of them (device group `nvidia/gpu/<X>`, one instance per GPU),
   both as computed here and as the real agent registered it (`/v1/nodes`).
2. The whole path: drover started as `drover agent -dev -nodes 0 -workers 2` starts it
   (embedded Redis, local Ray, leader, workers, a real agent on the Ray node, the HTTP API),
   in this process; a Nomad job registered over the HTTP API whose `ray` task asks for
   `device "nvidia/gpu" { count = 1 }` and runs `task_probe` below, which writes what the
   task sees (CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES, drover's variables, torch's
   device count and name, a matmul on the GPU checked against the CPU). The allocation must
   complete, holding one GPU of the node by device ID.
3. A share: a `backend: ray` fleet (`blocks: auto`) and a one-node run asking `gpu: 1`: the
   CUDA_VISIBLE_DEVICES the rank saw (Ray's pick) against the GPU index drover computed
   for it (actors/agent/core/cluster.py). On one GPU the instance is a single block and the
   run holds all of it, so both can only be "0": the check says so.

Writes `report.txt` and `result.json` to `--out` (result.json after every stage, so a run
cut short still leaves what it found) and prints one JSON line. Exit 0: every check held;
1: a check failed; 2: the check itself broke or ran past `--deadline`; 3: no NVIDIA GPU here
(nothing is checked, nothing is made up). `--rehearse [N]` runs the drover stages on a
machine without a GPU to prove the plumbing, Ray told of N fake GPUs (model FAKE; default 0,
and no task asks for one); it still exits 3.

Ray is started by drover itself, unless its actors could not import `ray` (drover builds
before 12cffa7 gave them PYTHONPATH=<project root> alone, which hid a `pip install --target`
Ray): this check then starts Ray with the same options and the path kept (`ray_init` in
the result says which).

Other modes, for the device machine (which has no network): `--prepare-wheels DIR` downloads
the wheels drover needs for another Python (`--python-version`, default 3.12, manylinux
x86-64) and repacks Ray's without the parts drover never loads (Java jars, RLlib, Tune,
Train, Serve, Data, LLM, the dashboard's web client); `--unpack-wheels DIR TARGET` installs
wheels with the standard library alone, where pip is missing. This module imports nothing
beyond the standard library until a check runs. What it reads from the machine and
concludes is in gpu_findings.py, the wheels in gpu_wheels.py.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.gpu_findings import decide, has_gpu, host_gpus, summary_line, write_outputs
from bench.gpu_wheels import prepare_wheels, unpack_wheels

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BROKEN = 2
EXIT_NO_GPU = 3

JOB_ID = "gpu-check"
FLEET = "gpu-check"
RUN = "gpu-share"
DEFAULT_DEADLINE_S = 240.0
ALLOC_TIMEOUT_S = 75.0
HOLD_S = 2.0  # each task holds this long after its probe, so its allocation is seen running
ROOT = Path(__file__).resolve().parents[1]

# -- the task's side: a `ray` driver entrypoint -----------------------------------------------

_ENV_SEEN = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")


def task_probe(out: str = "", label: str = "", hold_s: float | None = None) -> None:
    """Runs as the `ray` task: writes `task_<label>.json` in `out` with what it sees, then
    holds `hold_s` seconds (so its allocation is seen running). The defaults come from
    $GPU_CHECK_OUT, $GPU_CHECK_LABEL and $GPU_CHECK_HOLD_S (a run's task takes no arguments).
    Never raises for a GPU that does not work: the file says so."""
    folder = Path(out or os.environ["GPU_CHECK_OUT"])
    name = label or os.environ.get("GPU_CHECK_LABEL", "task")
    hold = float(os.environ.get("GPU_CHECK_HOLD_S", "0")) if hold_s is None else hold_s
    seen: dict[str, Any] = {
        "pid": os.getpid(),
        "env": {
            k: v
            for k, v in sorted(os.environ.items())
            if k in _ENV_SEEN or k.startswith(("DROVER_", "DSTACK_"))
        },
    }
    try:
        import ray

        if ray.is_initialized():  # in a Ray task; elsewhere these calls would start a Ray
            seen["ray_gpu_ids"] = [str(g) for g in ray.get_gpu_ids()]
            seen["ray_node_id"] = ray.get_runtime_context().get_node_id()
    except Exception as exc:
        seen["ray_error"] = f"{type(exc).__name__}: {exc}"
    seen.update(torch_matmul())
    (folder / f"task_{name}.json").write_text(json.dumps(seen, indent=1))
    time.sleep(hold)


def torch_matmul(size: int = 1024) -> dict[str, Any]:
    """torch's devices and one matmul on cuda:0, compared with the same one on the CPU."""
    found: dict[str, Any] = {}
    try:
        import torch  # type: ignore[import-not-found, unused-ignore]
    except Exception as exc:
        return {"torch_error": f"{type(exc).__name__}: {exc}"}
    try:
        found["torch_version"] = torch.__version__
        found["torch_device_count"] = torch.cuda.device_count()
        found["torch_device_name"] = (
            torch.cuda.get_device_name(0) if found["torch_device_count"] else ""
        )
        if found["torch_device_count"]:
            generator = torch.Generator().manual_seed(0)
            a = torch.randn(size, size, generator=generator, dtype=torch.float32)
            b = torch.randn(size, size, generator=generator, dtype=torch.float32)
            started = time.perf_counter()
            on_gpu = (a.cuda() @ b.cuda()).float()
            torch.cuda.synchronize()
            found["matmul_ms"] = round((time.perf_counter() - started) * 1000, 2)
            found["matmul_device"] = str(on_gpu.device)
            error = (on_gpu.cpu() - a @ b).abs().max().item()
            found["matmul_max_abs_error"] = error
            # TF32 (if enabled) is good to ~1e-3 relative; these sums are ~sqrt(size) big.
            found["matmul_ok"] = bool(on_gpu.is_cuda and error < 0.5)
        else:
            found["matmul_ok"] = False
    except Exception as exc:
        found["torch_error"] = f"{type(exc).__name__}: {exc}"
        found["matmul_ok"] = False
    return found


# -- the drover side --------------------------------------------------------------------------


def http(base: str, method: str, path: str, body: Any = None, timeout_s: float = 30.0) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as reply:
            return json.loads(reply.read() or b"null")
    except urllib.error.HTTPError as exc:
        raise RuntimeError(f"{method} {path}: {exc.code} {exc.read()[:500]!r}") from None


def wait_for(what: str, check: Callable[[], Any], timeout_s: float, every_s: float = 0.25) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not after {timeout_s:.0f} s")
        time.sleep(every_s)


def job_hcl(out: Path, gpus: int) -> str:
    device = f'        device "nvidia/gpu" {{ count = {gpus} }}\n' if gpus else ""
    return (
        f'job "{JOB_ID}" {{\n  type = "batch"\n  group "probe" {{\n    task "probe" {{\n'
        '      driver = "ray"\n      config {\n'
        '        entrypoint = "bench.gpu_check:task_probe"\n'
        f'        kwargs = {{\n          out = "{out}"\n          label = "job"\n'
        f"          hold_s = {HOLD_S}\n        }}\n"
        "      }\n      resources {\n        cpu = 1000\n        memory = 512\n"
        f"{device}      }}\n    }}\n  }}\n}}\n"
    )


def run_body(out: Path, gpus: int) -> dict[str, Any]:
    return {
        "Run": {
            "name": RUN,
            "nodes": 1,
            "fleets": [FLEET],
            "retry": False,
            "resources": {"cpu": "1..", "memory": "1GB..", "disk": "1GB..", "gpu": gpus},
            "entrypoint": "bench.gpu_check:task_probe",
            "env": {
                "GPU_CHECK_OUT": str(out),
                "GPU_CHECK_LABEL": "share",
                "GPU_CHECK_HOLD_S": str(HOLD_S),
            },
        },
        "WorkingDir": "",
    }


def ray_workers_import_ray() -> bool:
    """Whether a Python started without PYTHONPATH imports ray: drover's ray.init gives its
    workers PYTHONPATH=<project root> alone, so Ray installed through PYTHONPATH (the device's
    `pip install --target`) would not be found there."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    try:
        done = subprocess.run(
            [sys.executable, "-c", "import ray"], env=env, capture_output=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def task_fields(seen: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    env = seen.get("env", {})
    return {
        f"{prefix}_cuda_visible_devices": env.get("CUDA_VISIBLE_DEVICES"),
        f"{prefix}_nvidia_visible_devices": env.get("NVIDIA_VISIBLE_DEVICES"),
        f"{prefix}_drover_gpus_per_node": env.get("DROVER_GPUS_PER_NODE"),
        f"{prefix}_drover_gpus_num": env.get("DROVER_GPUS_NUM"),
        f"{prefix}_ray_gpu_ids": seen.get("ray_gpu_ids"),
        f"{prefix}_torch_device_count": seen.get("torch_device_count"),
        f"{prefix}_torch_device_name": seen.get("torch_device_name"),
        f"{prefix}_matmul_ok": seen.get("matmul_ok"),
        f"{prefix}_matmul_max_abs_error": seen.get("matmul_max_abs_error"),
        f"{prefix}_torch_error": seen.get("torch_error"),
        f"{prefix}_env": env,
    }


class Check:
    """The stages against one running drover; `r` is the result, saved after each stage."""

    def __init__(self, out: Path, gpus: int, r: dict[str, Any], fake_gpus: int = 0) -> None:
        """`fake_gpus`: a rehearsal's; Ray is told it has that many (no real GPU)."""
        self.out, self.gpus, self.r, self.fake_gpus = out, gpus, r, fake_gpus
        self.system: Any = None
        self.own_ray = False
        self.base = ""

    def save(self) -> None:
        write_outputs(self.r, self.out)

    def start(self, data_dir: Path) -> None:
        import ray

        from launch.system import DroverSystem, SystemConfig

        cpus = len(os.sched_getaffinity(0))
        r = self.r
        r["ray_version"] = ray.__version__
        r["num_cpus"] = cpus
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        if ray_workers_import_ray() and not self.fake_gpus:
            r["ray_init"] = "drover (launch/system.py)"
        else:
            # Ray comes from PYTHONPATH here: start Ray as drover does, keeping that path.
            paths = [str(ROOT), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
            fake: dict[str, Any] = {}
            if self.fake_gpus:
                fake = {"num_gpus": self.fake_gpus, "resources": {"accelerator_type:FAKE": 1}}
            ray.init(
                address="local",
                num_cpus=cpus,
                namespace="drover",
                include_dashboard=False,
                log_to_driver=False,
                runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}},
                **fake,
            )
            self.own_ray = True
            r["ray_init"] = "gpu_check (drover's runtime_env would drop PYTHONPATH)"
            if self.fake_gpus:
                r["ray_init"] = f"gpu_check, rehearsal: Ray told of {self.fake_gpus} FAKE GPU(s)"
        # `drover agent -dev -nodes 0 -workers 2` (launch/cli/__init__.py _agent), in process.
        config = SystemConfig(
            data_dir=data_dir,
            workers=2,
            num_cpus=cpus,
            real_agents=True,
            raw_exec=True,
            http_addr="127.0.0.1:0",
        )
        started = time.monotonic()
        self.system = DroverSystem(config).start()
        self.base = self.system.http_address
        r["drover_start_s"] = round(time.monotonic() - started, 1)
        r["stages"].append("drover")

    def stop(self) -> None:
        if self.system is not None:
            self.system.stop()
            self.system = None
        if self.own_ray:
            import ray

            ray.shutdown()

    def fingerprint(self) -> None:
        import ray

        from actors.agent.core import nodes_from_ray

        r = self.r
        ray_nodes = [n for n in ray.nodes() if n.get("Alive")]  # type: ignore[no-untyped-call]
        resources = ray_nodes[0]["Resources"] if len(ray_nodes) == 1 else {}
        r["ray_nodes"] = len(ray_nodes)
        r["ray_resources"] = resources
        r["ray_gpu_resource"] = int(resources.get("GPU", 0))
        types = [k.split(":", 1)[1] for k in resources if k.startswith("accelerator_type:")]
        r["ray_accelerator_type"] = types[0] if types else None
        nodes = nodes_from_ray(ray_nodes, drivers=("mock", "ray", "raw_exec"))
        gpu_groups = [d for n in nodes for d in n.node_resources.devices if d.type == "gpu"]
        r["drover_device_group"] = gpu_groups[0].id if gpu_groups else None
        r["drover_device_count"] = sum(len(d.instances) for d in gpu_groups)
        r.update(self._registered_node())
        r["stages"].append("ray")

    def _registered_node(self) -> dict[str, Any]:
        stubs = http(self.base, "GET", "/v1/nodes")
        real = [s for s in stubs if "ray" in (s.get("Drivers") or {})]
        if len(real) != 1:
            return {"registered_nodes": [s.get("Name") for s in stubs]}
        node = http(self.base, "GET", f"/v1/node/{real[0]['ID']}")
        devices = node.get("NodeResources", {}).get("Devices") or []
        gpus = [d for d in devices if d.get("Type") == "gpu"]
        ids = [i["ID"] for d in gpus for i in d.get("Instances") or []]
        return {
            "registered_node_id": node.get("ID"),
            "registered_node_name": node.get("Name"),
            "registered_device_group": (
                f"{gpus[0]['Vendor']}/{gpus[0]['Type']}/{gpus[0]['Name']}" if gpus else None
            ),
            "registered_device_count": len(ids),
            "registered_device_ids": ids,
            "registered_cpu_mhz": node.get("NodeResources", {}).get("Cpu", {}).get("CpuShares"),
        }

    def _wait_alloc(self, job_id: str, prefix: str, eval_id: str) -> dict[str, Any]:
        """The job's first allocation once terminal, with every status seen on the way; an
        evaluation that placed nothing ends the wait, saying why."""
        seen: list[str] = []

        def ended() -> dict[str, Any] | None:
            allocs = http(self.base, "GET", f"/v1/job/{job_id}/allocations")
            if not allocs:
                evaluation = http(self.base, "GET", f"/v1/evaluation/{eval_id}")
                failed = evaluation.get("FailedTGAllocs")
                if evaluation.get("Status") != "pending" and failed:
                    raise RuntimeError(f"nothing placed: {json.dumps(failed)[:1500]}")
                return None
            first = min(allocs, key=lambda a: a["CreateIndex"])
            if not seen or seen[-1] != first["ClientStatus"]:
                seen.append(first["ClientStatus"])
            terminal = first["ClientStatus"] in ("complete", "failed", "lost")
            return dict(first) if terminal else None

        try:
            stub = wait_for(f"{job_id}'s allocation", ended, ALLOC_TIMEOUT_S)
        finally:
            self.r[f"{prefix}_statuses_seen"] = seen
        alloc = http(self.base, "GET", f"/v1/allocation/{stub['ID']}")
        flat = alloc["AllocatedResources"]["Flattened"]["Devices"]
        gpus = [i for d in flat if d["Type"] == "gpu" for i in d["DeviceIDs"]]
        blocks = [i for d in flat if d["Type"] == "block" for i in d["DeviceIDs"]]
        states = alloc.get("TaskStates") or {}
        events = [
            f"{e.get('Type')}: {e.get('DisplayMessage') or e.get('Message') or ''}".strip()
            for s in states.values()
            for e in s.get("Events") or []
        ]
        return {
            f"{prefix}_id": stub["ID"],
            f"{prefix}_status": stub["ClientStatus"],
            f"{prefix}_description": stub.get("ClientDescription"),
            f"{prefix}_device_ids": gpus,
            f"{prefix}_block_ids": blocks,
            f"{prefix}_task_resources": alloc["AllocatedResources"].get("Tasks"),
            f"{prefix}_events": events,
        }

    def job(self) -> None:
        r = self.r
        hcl = job_hcl(self.out, self.gpus)
        r["job_hcl"] = hcl
        job = http(self.base, "POST", "/v1/jobs/parse", {"JobHCL": hcl, "Canonicalize": True})
        reply = http(self.base, "POST", "/v1/jobs", {"Job": job})
        r["job_eval_id"] = reply.get("EvalID")
        r.update(self._wait_alloc(JOB_ID, "alloc", reply["EvalID"]))
        probe = self.out / "task_job.json"
        if probe.exists():
            r.update(task_fields(json.loads(probe.read_text()), "task"))
        else:
            r["task_error"] = "the task wrote no task_job.json"
        r["stages"].append("job")

    def share(self) -> None:
        import ray

        from actors.agent.core.cluster import cluster_env, cluster_info

        r = self.r
        fleet = {"name": FLEET, "backend": "ray", "placement": "cluster", "blocks": "auto"}
        r["share_fleet_reply"] = http(self.base, "POST", "/v1/fleets", {"Fleet": fleet})
        instance = http(self.base, "GET", f"/v1/fleet/{FLEET}")["Instances"]
        r["share_blocks"] = [i.get("Busy") for i in instance]
        r["share_instance_status"] = [i.get("StatusDescription") for i in instance]
        reply = http(self.base, "POST", "/v1/runs", run_body(self.out, self.gpus))
        r["share_eval_id"] = reply.get("EvalID")
        r.update(self._wait_alloc(RUN, "share_alloc", reply["EvalID"]))
        wait_for(
            "the run's end",
            lambda: http(self.base, "GET", f"/v1/run/{RUN}")["Status"] in ("done", "failed"),
            30,
        )
        run = http(self.base, "GET", f"/v1/run/{RUN}")
        r["share_run_status"] = run.get("Status")
        r["share_ranks"] = run.get("Ranks")
        r["share_alloc_gpus"] = len(r.get("share_alloc_device_ids") or [])
        # What drover computes for the rank (cluster.py), from the leader's own records.
        client = self.system.client()
        allocs = client.allocs(RUN)
        nodes = {n.id: n for n in ray.get(self.system.leader.nodes.remote())}
        mine = next(a for a in allocs if a.id == r["share_alloc_id"])
        info = cluster_info(mine, allocs, nodes.get)
        r["share_drover_gpu_indices"] = list(info.gpu_indices)
        r["share_drover_cuda_visible_devices"] = cluster_env(info, "")["CUDA_VISIBLE_DEVICES"]
        probe = self.out / "task_share.json"
        if probe.exists():
            r.update(task_fields(json.loads(probe.read_text()), "share_task"))
        else:
            r["share_task_error"] = "the rank wrote no task_share.json"
        r["share_drover_gpus_per_node"] = r.get("share_task_drover_gpus_per_node")
        r["share_indices_agree"] = (
            r.get("share_task_cuda_visible_devices") == r["share_drover_cuda_visible_devices"]
        )
        node_gpus = r.get("registered_device_count") or 0
        r["share_meaningful"] = node_gpus > 1
        if node_gpus <= 1:
            r["share_note"] = (
                f"the node has {node_gpus} GPU(s): blocks auto (min(CPUs, GPUs)) leaves it one"
                " block, the run holds the whole instance, and drover's GPU index and Ray's"
                " pick can only both be 0; splitting GPUs between blocks is not exercised"
            )
        r["stages"].append("share")


def run_checks(out: Path, gpus: int, r: dict[str, Any], fake_gpus: int = 0) -> None:
    check = Check(out, gpus, r, fake_gpus)
    data_dir = Path(tempfile.mkdtemp(prefix="drover-gpu-check-"))
    try:
        check.start(data_dir / "data")
        check.save()
        for name, stage in (("ray", check.fingerprint), ("job", check.job), ("share", check.share)):
            try:
                stage()
            except Exception as exc:
                r.setdefault("stage_errors", {})[name] = f"{type(exc).__name__}: {exc}"
                r.setdefault("tracebacks", {})[name] = traceback.format_exc()
            check.save()
    finally:
        try:
            check.stop()
        finally:
            shutil.rmtree(data_dir, ignore_errors=True)


# -- main -------------------------------------------------------------------------------------


def kill_children() -> None:
    """SIGKILL every process this one started (and theirs)."""
    try:
        import psutil

        children = psutil.Process().children(recursive=True)
    except Exception:
        return
    for child in children:
        with contextlib.suppress(Exception):
            child.kill()


def new_result(rehearsal: bool) -> dict[str, Any]:
    return {"ok": False, "no_gpu": False, "rehearsal": rehearsal, "stages": [], "problems": []}


def check_gpus(out: Path, *, rehearse: int | None, deadline_s: float) -> int:
    started = time.monotonic()
    r = new_result(rehearse is not None)
    lock = threading.Lock()

    def finish(code: int) -> int:
        with lock:
            r["wall_s"] = round(time.monotonic() - started, 1)
            r["exit_code"] = code
            write_outputs(r, out)
            print(summary_line(r), flush=True)
            return code

    def watchdog() -> None:
        time.sleep(deadline_s)
        r["problems"].append(f"ran past the deadline of {deadline_s:.0f} s: stages {r['stages']}")
        finish(EXIT_BROKEN)
        kill_children()  # Ray's and Redis's processes, which os._exit would leave running
        os._exit(EXIT_BROKEN)

    threading.Thread(target=watchdog, daemon=True).start()
    out.mkdir(parents=True, exist_ok=True)
    r.update(host_gpus())
    write_outputs(r, out)
    if not has_gpu(r):
        r["no_gpu"] = True
        r["problems"].append(
            "no NVIDIA GPU: nvidia-smi lists none and torch sees none; no check was made"
        )
        if rehearse is not None:
            # Plumbing only: Ray is told of `rehearse` GPUs of model FAKE; none is used.
            r["rehearsal_gpus"] = rehearse
            run_checks(out, min(rehearse, 1), r, fake_gpus=rehearse)
            r["rehearsal_problems"] = decide(r, min(rehearse, 1))[1]
        return finish(EXIT_NO_GPU)
    try:
        run_checks(out, 1, r)
    except Exception as exc:
        r["problems"].append(f"the check broke: {type(exc).__name__}: {exc}")
        r["traceback"] = traceback.format_exc()
        return finish(EXIT_BROKEN)
    r["ok"], problems = decide(r)
    r["problems"] += problems
    return finish(EXIT_OK if r["ok"] else EXIT_FAILED)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, help="where report.txt and result.json go")
    parser.add_argument("--deadline", type=float, default=DEFAULT_DEADLINE_S, help="seconds")
    parser.add_argument(
        "--rehearse",
        type=int,
        nargs="?",
        const=0,
        metavar="GPUS",
        help="without a GPU: run the drover stages anyway, asking for GPUS (default 0)",
    )
    parser.add_argument("--prepare-wheels", type=Path, metavar="DIR")
    parser.add_argument("--python-version", default="3.12")
    parser.add_argument("--unpack-wheels", nargs=2, type=Path, metavar=("DIR", "TARGET"))
    args = parser.parse_args(argv)
    if args.prepare_wheels is not None:
        print(json.dumps(prepare_wheels(args.prepare_wheels, args.python_version)))
        return EXIT_OK
    if args.unpack_wheels is not None:
        folder, target = args.unpack_wheels
        print(json.dumps({"installed": unpack_wheels(folder.glob("*.whl"), target)}))
        return EXIT_OK
    if args.out is None:
        parser.error("--out DIR is required")
    return check_gpus(args.out, rehearse=args.rehearse, deadline_s=args.deadline)


if __name__ == "__main__":
    sys.exit(main())
