"""What the GPU check reads from the machine and what it concludes (bench/gpu_check.py):
`nvidia-smi -L` parsed, PyTorch's view (asked in a separate process), the problems each
stage's result shows, and the report. Nothing here starts drover or Ray."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from actors.agent.core.env import visible_device

# -- nvidia-smi -------------------------------------------------------------------------------

_SMI_GPU = re.compile(r"^GPU (\d+): (.+?) \(UUID: ([^)]+)\)\s*$")
_SMI_MIG = re.compile(r"^\s+MIG .+\(UUID: ([^)]+)\)\s*$")


@dataclass(frozen=True, slots=True)
class SmiGpu:
    index: int
    name: str
    uuid: str


def parse_nvidia_smi_l(text: str) -> tuple[list[SmiGpu], int]:
    """`nvidia-smi -L` -> (its GPUs, how many MIG devices it lists under them)."""
    gpus: list[SmiGpu] = []
    migs = 0
    for line in text.splitlines():
        found = _SMI_GPU.match(line.strip())
        if found:
            gpus.append(SmiGpu(int(found.group(1)), found.group(2).strip(), found.group(3)))
        elif _SMI_MIG.match(line):
            migs += 1
    return gpus, migs


def _squash(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _tokens(text: str) -> list[str]:
    return [t for t in (_squash(p) for p in re.split(r"[\s_-]+", text)) if t and t != "nvidia"]


def model_matches(ray_type: str, smi_name: str) -> bool:
    """Ray's accelerator type (`H100`, `A100`, `RTX-PRO-6000`) names the GPU nvidia-smi
    reports (`NVIDIA H100 80GB HBM3`): its words appear there, together and in order."""
    wanted, words = _tokens(ray_type), _tokens(smi_name)
    if not wanted:
        return False
    return any(words[i : i + len(wanted)] == wanted for i in range(len(words)))


def host_gpus(timeout_s: float = 30.0) -> dict[str, Any]:
    """What the machine says about its GPUs, before anything of drover's or Ray's runs."""
    facts: dict[str, Any] = {"host_cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
    smi = shutil.which("nvidia-smi")
    if smi is None:
        facts.update(nvidia_smi="not found", gpus_nvidia_smi=0, gpu_model_nvidia_smi="")
    else:
        try:
            done = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=timeout_s)
            text = done.stdout
            facts["nvidia_smi"] = text.strip() or done.stderr.strip()
        except (OSError, subprocess.TimeoutExpired) as exc:
            text = ""
            facts["nvidia_smi"] = f"failed: {exc}"
        gpus, migs = parse_nvidia_smi_l(text)
        facts.update(
            gpus_nvidia_smi=len(gpus),
            gpu_model_nvidia_smi=gpus[0].name if gpus else "",
            gpu_uuids_nvidia_smi=[g.uuid for g in gpus],
            mig_devices_nvidia_smi=migs,
        )
    facts.update(torch_facts(timeout_s=timeout_s * 4))
    return facts


_TORCH_PROBE = """
import json
try:
    import torch
    n = torch.cuda.device_count()
    print(json.dumps({"host_torch_version": torch.__version__,
        "host_torch_cuda": torch.version.cuda, "host_torch_device_count": n,
        "host_torch_device_name": torch.cuda.get_device_name(0) if n else ""}))
except Exception as exc:
    print(json.dumps({"host_torch_error": f"{type(exc).__name__}: {exc}"}))
"""


def torch_facts(timeout_s: float = 120.0) -> dict[str, Any]:
    """torch's view of the GPUs, in a child process (CUDA stays out of this one)."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _TORCH_PROBE], capture_output=True, text=True, timeout=timeout_s
        )
        lines = done.stdout.strip().splitlines()
        return dict(json.loads(lines[-1])) if lines else {"host_torch_error": done.stderr[-500:]}
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        return {"host_torch_error": f"{type(exc).__name__}: {exc}"}


def has_gpu(facts: Mapping[str, Any]) -> bool:
    return bool(facts.get("gpus_nvidia_smi")) or bool(facts.get("host_torch_device_count"))


# -- the checks' decisions (pure) -------------------------------------------------------------


def fingerprint_problems(r: Mapping[str, Any]) -> list[str]:
    """Check 1: Ray's GPU resource and type, and drover's device group, against nvidia-smi."""
    problems = []
    expected = r.get("gpus_nvidia_smi") or 0
    if r.get("host_cuda_visible_devices"):
        expected = r.get("host_torch_device_count") or expected  # Ray honours the variable
    if r.get("ray_gpu_resource") != expected:
        problems.append(f"Ray counts {r.get('ray_gpu_resource')} GPUs, the machine {expected}")
    accel = r.get("ray_accelerator_type") or ""
    if not model_matches(accel, r.get("gpu_model_nvidia_smi") or ""):
        problems.append(
            f"Ray's accelerator_type {accel!r} does not name {r.get('gpu_model_nvidia_smi')!r}"
        )
    group = f"nvidia/gpu/{accel}"
    for source in ("drover", "registered"):
        if r.get(f"{source}_device_group") != group:
            problems.append(f"{source} device group {r.get(f'{source}_device_group')!r} != {group}")
        if r.get(f"{source}_device_count") != r.get("ray_gpu_resource"):
            problems.append(
                f"{source} has {r.get(f'{source}_device_count')} GPU instances,"
                f" Ray {r.get('ray_gpu_resource')}"
            )
    return problems


def task_problems(r: Mapping[str, Any], prefix: str, gpus: int) -> list[str]:
    """What a task that held `gpus` GPUs must have seen (keys `<prefix>_...`)."""
    problems = []
    if r.get(f"{prefix}_error"):
        problems.append(f"{prefix}: {r[f'{prefix}_error']}")
    visible = r.get(f"{prefix}_cuda_visible_devices")
    count = len([v for v in (visible or "").split(",") if v.strip()])
    if count != gpus:
        problems.append(f"{prefix}: CUDA_VISIBLE_DEVICES={visible!r}, expected {gpus} GPU(s)")
    if r.get(f"{prefix}_torch_device_count") != gpus:
        problems.append(
            f"{prefix}: torch sees {r.get(f'{prefix}_torch_device_count')} GPUs, expected {gpus}"
        )
    if gpus:
        name = r.get(f"{prefix}_torch_device_name") or ""
        if not name or _squash(name) != _squash(r.get("gpu_model_nvidia_smi") or ""):
            problems.append(
                f"{prefix}: torch names {name!r}, nvidia-smi {r.get('gpu_model_nvidia_smi')!r}"
            )
        if r.get(f"{prefix}_matmul_ok") is not True:
            problems.append(f"{prefix}: the matmul on the GPU failed")
    return problems


def job_problems(r: Mapping[str, Any], gpus: int = 1) -> list[str]:
    """Check 2: the Nomad job's allocation completed, holding `gpus` of the node's GPUs."""
    problems = []
    if r.get("alloc_status") != "complete":
        problems.append(
            f"the job's allocation ended {r.get('alloc_status')!r}: {r.get('alloc_description')}"
        )
    ids = r.get("alloc_device_ids") or []
    if len(ids) != gpus:
        problems.append(f"the allocation holds GPUs {ids}, expected {gpus}")
    if not set(ids) <= set(r.get("registered_device_ids") or []):
        problems.append(f"GPUs {ids} are not the node's {r.get('registered_device_ids')}")
    if gpus and r.get("task_nvidia_visible_devices") != ",".join(visible_device(i) for i in ids):
        problems.append(
            f"NVIDIA_VISIBLE_DEVICES={r.get('task_nvidia_visible_devices')!r}, allocated {ids}"
        )
    return problems + task_problems(r, "task", gpus)


def share_problems(r: Mapping[str, Any], gpus: int = 1) -> list[str]:
    """Check 3: the run's rank held its share and saw as many GPUs as drover gave it."""
    problems = []
    if r.get("share_run_status") != "done":
        problems.append(f"the run ended {r.get('share_run_status')!r}")
    if r.get("share_alloc_gpus") != gpus:
        problems.append(f"the rank holds {r.get('share_alloc_gpus')} GPUs, expected {gpus}")
    if r.get("share_drover_gpus_per_node") != str(gpus):
        problems.append(f"DROVER_GPUS_PER_NODE={r.get('share_drover_gpus_per_node')!r}")
    if len(r.get("share_drover_gpu_indices") or []) != gpus:
        problems.append(f"drover's GPU indices {r.get('share_drover_gpu_indices')}")
    return problems + task_problems(r, "share_task", gpus)


def decide(r: Mapping[str, Any], gpus: int = 1) -> tuple[bool, list[str]]:
    """(ok, problems) of a run whose tasks asked for `gpus`: every stage ran and held."""
    problems = [f"stage {s} did not run" for s in ("ray", "job", "share") if s not in r["stages"]]
    problems += [f"stage {s}: {e}" for s, e in r.get("stage_errors", {}).items()]
    if "ray" in r["stages"]:
        problems += fingerprint_problems(r)
    if "job" in r["stages"]:
        problems += job_problems(r, gpus)
    if "share" in r["stages"]:
        problems += share_problems(r, gpus)
    return not problems, problems


# -- the report -------------------------------------------------------------------------------

SUMMARY_KEYS = (
    "ok",
    "no_gpu",
    "rehearsal",
    "gpus_nvidia_smi",
    "gpu_model_nvidia_smi",
    "host_torch_device_count",
    "host_torch_device_name",
    "ray_version",
    "ray_init",
    "ray_gpu_resource",
    "ray_accelerator_type",
    "drover_device_group",
    "drover_device_count",
    "registered_device_group",
    "registered_device_count",
    "alloc_status",
    "alloc_statuses_seen",
    "alloc_device_ids",
    "task_cuda_visible_devices",
    "task_nvidia_visible_devices",
    "task_ray_gpu_ids",
    "task_torch_device_count",
    "task_torch_device_name",
    "task_matmul_ok",
    "share_blocks",
    "share_run_status",
    "share_alloc_gpus",
    "share_alloc_device_ids",
    "share_drover_gpu_indices",
    "share_drover_cuda_visible_devices",
    "share_task_cuda_visible_devices",
    "share_indices_agree",
    "share_meaningful",
    "share_task_torch_device_count",
    "share_task_matmul_ok",
    "stages",
    "problems",
    "wall_s",
)


def render_report(r: Mapping[str, Any]) -> str:
    """A person's summary: the verdict, what each source said, then every field."""
    if r.get("no_gpu"):
        head = "NO NVIDIA GPU on this machine: nothing was checked"
        if r.get("rehearsal"):
            gpus = r.get("rehearsal_gpus") or 0
            head += (
                f" (rehearsal: the drover stages ran, Ray told of {gpus} FAKE GPU(s))"
                if gpus
                else " (rehearsal: the drover stages ran asking for no GPU)"
            )
    else:
        head = "OK: every GPU check held" if r.get("ok") else "FAILED"
    lines = [f"bench.gpu_check: {head}", ""]
    for problem in r.get("problems", []):
        lines.append(f"  problem: {problem}")
    if r.get("share_note"):
        lines += ["", f"share: {r['share_note']}"]
    lines += ["", "summary:"]
    lines += [f"  {k} = {json.dumps(r[k])}" for k in SUMMARY_KEYS if k in r]
    lines += ["", "everything:"]
    lines += [f"  {k} = {json.dumps(v)}" for k, v in sorted(r.items()) if k not in SUMMARY_KEYS]
    return "\n".join(lines) + "\n"


def summary_line(r: Mapping[str, Any]) -> str:
    """The one JSON line (bench convention): the summary fields."""
    return json.dumps({k: r[k] for k in SUMMARY_KEYS if k in r}, separators=(",", ":"))


def write_outputs(r: Mapping[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "result.json").write_text(json.dumps(r, indent=1, default=str))
    (out / "report.txt").write_text(render_report(r))
