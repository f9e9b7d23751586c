"""python-nomad's own test suite against drover: `python -m bench.python_nomad --sdist DIR`.

DIR is python-nomad 2.1.0's source distribution, unpacked (its `tests/` are what run):

    pip download python-nomad==2.1.0 --no-binary :all: --no-deps -d /tmp/pynomad
    tar -xzf /tmp/pynomad/python_nomad-2.1.0.tar.gz -C /tmp/pynomad

The tests need `responses`, `flaky` and `mock` besides pytest (`pip install responses flaky
mock`); python-nomad itself is one of drover's dev dependencies. Nothing here needs the
network: the agent listens on loopback.

As python-nomad's CI runs them (`nomad agent -dev -node pynomad1 -acl-enabled`, NOMAD_IP,
NOMAD_PORT, NOMAD_VERSION, `nomad init`'s example job, `py.test tests/`), the harness

1. starts `drover agent -dev -node pynomad1 -acl-enabled -nodes 0` (Nomad's dev agent has one
   node, its own) on a free loopback port with a temporary data directory;
2. copies the sdist's `tests/` into a temporary directory and writes the files the sdist
   lacks (bench/python_nomad_files.py: common.py, conftest.py, example.json, example.nomad,
   example_batch_parameterized.json);
3. runs pytest on each test file in alphabetical order, each file its own run in that
   directory (test_acl.py first bootstraps ACLs; its token is handed to the later files);
4. prints one JSON line per file, {"bench": "python_nomad", "file", "passed", "failed",
   "skipped", "errors", "deselected", "excluded"}, then a total line.

The files share the agent's state, as in CI (test_deployments.py counts the deployments
the earlier files made). Files and tests left out, and why, are in EXCLUDED and DESELECTED.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from bench.python_nomad_files import (
    COMMON_PY,
    CONFTEST_PY,
    EXAMPLE_NOMAD,
    example_batch_parameterized_job,
    example_job,
)

ROOT = Path(__file__).resolve().parents[1]
# The Nomad version python-nomad's skipif markers compare against: its CI's newest.
NOMAD_VERSION = "1.9.5"

ENTERPRISE = "needs Nomad Enterprise (Sentinel policies)"
VARIABLES = "Nomad Variables, out of drover's scope"
RAFT = "Raft operator endpoints (/v1/operator/raft/*), out of drover's scope"
EXCLUDED: dict[str, str] = {
    "test_sentinel.py": ENTERPRISE,
    "test_variable.py": VARIABLES,
    "test_variables.py": VARIABLES,
    "test_operator.py": RAFT,
}
CLIENT_FS = "the client's file-system endpoints (/v1/client/fs/*), out of drover's scope"
# Two of python-nomad's mock-only tests (the `responses` library answers them; no request
# reaches drover) need opposite query-string matching from responses: test_jobs.py's
# namespace override passes only if a mocked `?namespace=admin` does not match the request's
# `?namespace=should-raise` (responses >= 0.17 matches a URL's query string exactly), while
# test_deployments.py's passes only if it matches `?prefix=&namespace=admin` (responses
# <= 0.9, python-nomad's old pin, ignored query strings unless asked). No responses version
# passes both; the one the newer responses cannot pass is left out, saying why.
MOCK_CONFLICT = (
    "mock-only (no request reaches drover): passes only with responses <= 0.9's query-string"
    " matching, under which test_jobs.py's namespace-override mock test fails instead"
)
DESELECTED: dict[str, tuple[list[str], str]] = {
    "test_client.py": (
        ["test_ls_list_files", "test_stat_stat_file", "test_streamfile_fail"],
        CLIENT_FS,
    ),
    "test_deployments.py": (["test_get_deployments_with_namespace"], MOCK_CONFLICT),
}

_COUNT = re.compile(
    r"(\d+) (passed|failed|skipped|errors?|deselected|xfailed|xpassed|rerun|warnings?)\b"
)
_SUMMARY_LINE = re.compile(r"\b(passed|failed|skipped|errors?|deselected|no tests ran)\b.* in ")


@dataclass(slots=True)
class FileResult:
    file: str
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    errors: int = 0
    deselected: int = 0
    excluded: str | None = None

    def line(self) -> dict[str, Any]:
        return {"bench": "python_nomad", **asdict(self)}


def parse_summary(output: str) -> FileResult:
    """The counts in pytest's last summary line ("3 passed, 1 failed, 2 skipped in 4.1s";
    xfailed counts as skipped, xpassed as passed). ValueError when there is no such line."""
    summary = next(
        (line for line in reversed(output.splitlines()) if _SUMMARY_LINE.search(line)), None
    )
    if summary is None:
        raise ValueError(f"no pytest summary line in: {output[-500:]!r}")
    result = FileResult(file="")
    for number, word in _COUNT.findall(summary):
        n = int(number)
        if word == "passed" or word == "xpassed":
            result.passed += n
        elif word == "failed":
            result.failed += n
        elif word in ("skipped", "xfailed"):
            result.skipped += n
        elif word.startswith("error"):
            result.errors += n
        elif word == "deselected":
            result.deselected += n
    return result


def suite_files(tests_dir: Path) -> list[str]:
    """The sdist's test files, in the alphabetical order pytest collects them in."""
    return sorted(p.name for p in tests_dir.glob("test_*.py"))


def prepare(sdist: Path, work: Path) -> Path:
    """A copy of the sdist's tests/ under `work`, with the files the sdist lacks; returns the
    directory the tests run in (where example.json is opened)."""
    source = sdist / "tests"
    if not source.is_dir():
        raise SystemExit(f"--sdist: {sdist} has no tests/ directory")
    shutil.copytree(source, work / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    # A regular package, so that `import tests.common` finds this one before any other
    # `tests` on sys.path.
    (work / "tests" / "__init__.py").write_text("")
    (work / "tests" / "common.py").write_text(COMMON_PY)
    (work / "tests" / "conftest.py").write_text(CONFTEST_PY)
    (work / "example.nomad").write_text(EXAMPLE_NOMAD)
    (work / "example.json").write_bytes(orjson.dumps(example_job(), option=orjson.OPT_INDENT_2))
    (work / "example_batch_parameterized.json").write_bytes(
        orjson.dumps(example_batch_parameterized_job(), option=orjson.OPT_INDENT_2)
    )
    # Its own pytest settings, so that drover's pyproject.toml is not picked up.
    (work / "pytest.ini").write_text("[pytest]\n")
    return work


@contextlib.contextmanager
def dev_agent(data_dir: Path, timeout_s: float = 180.0) -> Iterator[str]:
    """`drover agent -dev -node pynomad1 -acl-enabled` on a free loopback port; yields the
    API's `host:port`."""
    command = [
        sys.executable,
        *("-m", "launch.cli", "agent", "-dev", "-data-dir", str(data_dir)),
        *("-http-addr", "127.0.0.1:0", "-node", "pynomad1", "-acl-enabled"),
        *("-nodes", "0", "-workers", "1"),
    ]
    process = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines: queue.Queue[str] = queue.Queue()
    log: list[str] = []
    assert process.stdout is not None
    stdout = process.stdout

    def read() -> None:
        for line in stdout:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    try:
        deadline = time.monotonic() + timeout_s
        address = None
        while address is None:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("drover agent did not start:\n" + "".join(log))
            with contextlib.suppress(queue.Empty):
                log.append(lines.get(timeout=1.0))
                found = re.search(r"API https?://([\d.]+:\d+)", log[-1])
                address = found.group(1) if found else None
        yield address
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                process.kill()


def run_file(
    work: Path, name: str, env: dict[str, str], timeout_s: float
) -> tuple[FileResult, str]:
    """pytest on one test file in `work`; its counts and its output."""
    if name in EXCLUDED:
        return FileResult(file=name, excluded=EXCLUDED[name]), ""
    command = [sys.executable, "-m", "pytest", f"tests/{name}", "-p", "no:randomly"]
    command += ["-p", "no:cacheprovider", "-rfE", "--tb=short", "--runxfail"]
    for test in DESELECTED.get(name, ([], ""))[0]:
        command += ["--deselect", f"tests/{name}::{test}"]
    try:
        done = subprocess.run(
            command, cwd=work, env=env, capture_output=True, text=True, timeout=timeout_s
        )
        output = done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        partial = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        output = f"{partial}\ntimed out after {timeout_s}s"
        return FileResult(file=name, errors=1), output
    try:
        result = parse_summary(output)
    except ValueError:
        result = FileResult(errors=1, file="")
    result.file = name
    if name in DESELECTED:
        result.excluded = f"{result.deselected} tests: {DESELECTED[name][1]}"
    return result, output


def total(results: list[FileResult]) -> dict[str, Any]:
    line: dict[str, Any] = {"bench": "python_nomad", "file": "total"}
    for key in ("passed", "failed", "skipped", "errors", "deselected"):
        line[key] = sum(getattr(r, key) for r in results)
    line["excluded"] = sum(1 for r in results if r.excluded and r.deselected == 0)
    return line


def missing_packages() -> list[str]:
    """What python-nomad's tests import that this Python lacks."""
    import importlib.util

    needed = ("nomad", "responses", "flaky", "mock")
    return [name for name in needed if importlib.util.find_spec(name) is None]


def run(args: argparse.Namespace) -> list[FileResult]:
    if not (args.sdist / "tests").is_dir():
        raise SystemExit(f"--sdist: {args.sdist} has no tests/ directory")
    missing = missing_packages()
    if missing:
        raise SystemExit(f"python-nomad's tests need: pip install {' '.join(missing)}")
    results: list[FileResult] = []
    with tempfile.TemporaryDirectory(prefix="drover-pynomad-") as temp:
        work = prepare(args.sdist, Path(temp) / "run")
        token_file = Path(temp) / "token"
        with dev_agent(Path(temp) / "data") as address:
            host, port = address.rsplit(":", 1)
            env = {**os.environ, "NOMAD_IP": host, "NOMAD_PORT": port}
            env |= {"NOMAD_VERSION": NOMAD_VERSION, "PYNOMAD_TOKEN_FILE": str(token_file)}
            env.pop("NOMAD_TOKEN", None)
            for name in suite_files(work / "tests"):
                if args.only and name not in args.only and name != "test_acl.py":
                    continue  # test_acl.py always runs: it bootstraps the token
                if token_file.exists():
                    env["NOMAD_TOKEN"] = token_file.read_text()
                result, output = run_file(work, name, env, args.timeout)
                results.append(result)
                print(orjson.dumps(result.line()).decode(), flush=True)
                if args.verbose and (result.failed or result.errors):
                    print(output, file=sys.stderr, flush=True)
    print(orjson.dumps(total(results)).decode(), flush=True)
    return results


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sdist", type=Path, required=True, help="python-nomad's sdist, unpacked")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per test file")
    parser.add_argument("--only", nargs="*", default=[], help="run only these test files")
    parser.add_argument("-v", "--verbose", action="store_true", help="failures' output")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    run(parse_args(argv))


if __name__ == "__main__":
    main()
