"""bench.python_nomad's own logic, without python-nomad's sdist: pytest's summary read into
counts, the files it writes into the copy of the tests (the example jobs valid for drover's
parser, the fixtures importable), and the left-out files reported as such."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from bench.python_nomad import (
    DESELECTED,
    EXCLUDED,
    FileResult,
    parse_summary,
    prepare,
    run_file,
    suite_files,
    total,
)
from bench.python_nomad_files import example_batch_parameterized_job, example_job
from contracts.jobspec import parse_hcl_with_warnings, parse_json_with_warnings


@pytest.mark.parametrize(
    ("output", "want"),
    [
        ("....\n4 passed in 0.52s\n", (4, 0, 0, 0, 0)),
        (
            "FAILED tests/test_x.py::test_y - KeyError\n"
            "==== 3 failed, 10 passed, 2 skipped, 1 error in 1.21s ====\n",
            (10, 3, 2, 1, 0),
        ),
        ("== 4 passed, 3 deselected, 2 warnings in 9.0s ==\n", (4, 0, 0, 0, 3)),
        ("1 xfailed, 1 xpassed, 2 errors in 3s\n", (1, 0, 1, 2, 0)),
        ("============ no tests ran in 0.01s ============\n", (0, 0, 0, 0, 0)),
    ],
)
def test_pytests_summary_line_becomes_counts(
    output: str, want: tuple[int, int, int, int, int]
) -> None:
    got = parse_summary("collected 9 items\n1 passed earlier\n" + output)
    assert (got.passed, got.failed, got.skipped, got.errors, got.deselected) == want


def test_output_without_a_summary_is_refused() -> None:
    with pytest.raises(ValueError, match="no pytest summary"):
        parse_summary("ImportError while loading conftest\n")


def test_the_example_jobs_are_valid_for_drover() -> None:
    job, _warnings = parse_json_with_warnings(example_job())
    (group,) = job.task_groups
    assert (job.id, job.type, group.name, group.count) == ("example", "service", "cache", 1)
    (task,) = group.tasks
    assert (task.name, task.driver, task.resources.cpu, task.resources.memory_mb) == (
        "redis",
        "mock",
        500,
        256,
    )
    assert group.update is not None and group.update.max_parallel == 1
    batch, _ = parse_json_with_warnings(example_batch_parameterized_job())
    assert batch.type == "batch" and batch.parameterized is not None


def test_the_hcl_example_is_the_json_one(tmp_path: Path) -> None:
    work = prepare(_fake_sdist(tmp_path), tmp_path / "run")
    from_hcl, _ = parse_hcl_with_warnings((work / "example.nomad").read_text())
    from_json, _ = parse_json_with_warnings((work / "example.json").read_bytes())
    assert from_hcl == from_json


def _fake_sdist(tmp_path: Path) -> Path:
    tests = tmp_path / "sdist" / "tests"
    tests.mkdir(parents=True)
    # A test file as python-nomad writes them: common and the fixture, example.json.
    (tests / "test_probe.py").write_text(
        "import json\nimport tests.common as common\n\n"
        "def test_probe(nomad_setup):\n"
        "    assert common.NOMAD_NAMESPACE == 'admin'\n"
        "    assert nomad_setup.get_token() == 'secret'\n"
        "    assert json.load(open('example.json'))['Job']['ID'] == 'example'\n\n"
        "def test_skipped():\n    import pytest\n    pytest.skip('no')\n"
    )
    (tests / "test_sentinel.py").write_text("def test_never():\n    assert False\n")
    return tmp_path / "sdist"


def test_a_prepared_copy_runs_with_the_written_fixtures(tmp_path: Path) -> None:
    work = prepare(_fake_sdist(tmp_path), tmp_path / "run")
    for name in ("common.py", "conftest.py"):
        ast.parse((work / "tests" / name).read_text())  # written as valid Python
    assert suite_files(work / "tests") == ["test_probe.py", "test_sentinel.py"]
    token_file = tmp_path / "token"
    env = {"PATH": "", "NOMAD_TOKEN": "secret", "PYNOMAD_TOKEN_FILE": str(token_file)}
    env["NOMAD_VERSION"] = "1.9.5"
    result, output = run_file(work, "test_probe.py", env, timeout_s=120)
    assert (result.passed, result.skipped, result.failed, result.errors) == (1, 1, 0, 0), output
    assert token_file.read_text() == "secret"  # handed on to the next file
    excluded, _ = run_file(work, "test_sentinel.py", env, timeout_s=120)
    assert excluded.excluded == EXCLUDED["test_sentinel.py"] and excluded.failed == 0


def test_the_total_line_adds_the_files_up() -> None:
    results = [
        FileResult("test_a.py", passed=3, failed=1),
        FileResult("test_b.py", passed=2, skipped=1, deselected=3, excluded="3 tests: x"),
        FileResult("test_c.py", excluded="enterprise"),
    ]
    line = total(results)
    assert (line["passed"], line["failed"], line["skipped"], line["deselected"]) == (5, 1, 1, 3)
    assert line["excluded"] == 1  # whole files left out
    assert orjson.loads(orjson.dumps(results[0].line()))["bench"] == "python_nomad"


def test_left_out_files_and_tests_say_why() -> None:
    assert set(EXCLUDED) == {
        "test_sentinel.py",
        "test_variable.py",
        "test_variables.py",
        "test_operator.py",
    }
    assert all(reason for reason in EXCLUDED.values())
    assert DESELECTED["test_client.py"][0] == [
        "test_ls_list_files",
        "test_stat_stat_file",
        "test_streamfile_fail",
    ]
    # A mock-only test whose needs contradict another's (see MOCK_CONFLICT): said so.
    tests, why = DESELECTED["test_deployments.py"]
    assert tests == ["test_get_deployments_with_namespace"] and "mock-only" in why
    assert all(reason for _tests, reason in DESELECTED.values())


def test_the_harness_needs_an_sdist_with_tests(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.python_nomad", "--sdist", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        timeout=120,
    )
    assert done.returncode != 0 and "has no tests/ directory" in done.stderr
