"""Task drivers: Go durations, the clock-driven mock driver and raw_exec subprocesses."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytest

from actors.agent.core import (
    DISABLED_ERROR,
    DriverError,
    MockDriver,
    RawExecDriver,
    TaskHandle,
    TaskState,
    TaskStatus,
    builtin_drivers,
    duration_seconds,
    parse_duration,
)
from contracts import Task

# -- durations ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("10s", 10.0),
        ("500ms", 0.5),
        ("1m", 60.0),
        ("1h30m", 5400.0),
        ("1.5s", 1.5),
        (".5s", 0.5),
        ("250us", 250e-6),
        ("3µs", 3e-6),
        ("7ns", 7e-9),
        ("2h0m1s", 7201.0),
    ],
)
def test_parse_duration_accepts_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "10", "s", "abc", "1x", "-1s", "1s ", " 1s", "1.s.5"])
def test_parse_duration_rejects_the_rest(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


def test_duration_seconds_takes_numbers_and_strings() -> None:
    assert duration_seconds(3) == 3.0
    assert duration_seconds(0.25) == 0.25
    assert duration_seconds("2m") == 120.0
    for bad in (True, -1, float("nan"), float("inf"), None, ["1s"]):
        with pytest.raises(ValueError):
            duration_seconds(bad)


# -- mock driver ---------------------------------------------------------------------------


def mock_task(**config: Any) -> Task:
    return Task(name="t", driver="mock", config=config)


def test_mock_validate_reports_each_problem() -> None:
    d = MockDriver()
    assert d.validate(mock_task(run_for="10s", exit_code=1, start_error="")) == []
    assert d.validate(mock_task(run_for=5)) == []
    assert d.validate(mock_task(run_for="soon")) == ["mock: run_for: invalid duration 'soon'"]
    assert d.validate(mock_task(exit_code="1")) == ["mock: exit_code must be an integer, got '1'"]
    assert d.validate(mock_task(exit_code=True)) == ["mock: exit_code must be an integer, got True"]
    assert d.validate(mock_task(start_error=3)) == ["mock: start_error must be a string, got 3"]
    assert d.validate(mock_task(run_four="1s")) == ['mock: unknown config key "run_four"']


def test_mock_runs_for_its_duration_then_completes() -> None:
    d = MockDriver()
    h = d.start("a1", mock_task(run_for="10s"), {}, now=100.0)
    assert (h.alloc_id, h.task_name, h.driver, h.started_at) == ("a1", "t", "mock", 100.0)
    assert h.wake_at == 110.0
    assert d.poll(h, 109.999).state is TaskState.RUNNING
    assert d.poll(h, 110.0) == TaskStatus(TaskState.COMPLETE, 0, "exited with code 0")


def test_mock_nonzero_exit_code_fails() -> None:
    d = MockDriver()
    h = d.start("a1", mock_task(run_for="500ms", exit_code=3), {}, now=0.0)
    assert d.poll(h, 0.5) == TaskStatus(TaskState.FAILED, 3, "exited with code 3")


def test_mock_without_run_for_runs_until_stopped() -> None:
    d = MockDriver()
    h = d.start("a1", mock_task(), {}, now=0.0)
    assert h.wake_at == math.inf
    assert d.poll(h, 1e12).running
    d.stop(h, 5.0)
    assert h.wake_at == 5.0
    status = d.poll(h, 5.0)
    assert status.state is TaskState.COMPLETE and status.message == "stopped"


def test_mock_start_error_refuses_to_start() -> None:
    with pytest.raises(DriverError, match=r"^no capacity$"):
        MockDriver().start("a1", mock_task(start_error="no capacity"), {}, now=0.0)


def test_builtin_drivers_by_name(tmp_path: Path) -> None:
    drivers = builtin_drivers(data_dir=tmp_path)
    assert sorted(drivers) == ["mock", "raw_exec"]
    raw = drivers["raw_exec"]
    assert isinstance(raw, RawExecDriver) and not raw.enabled


# -- raw_exec ------------------------------------------------------------------------------


def exec_task(command: str, *args: str, kill_timeout_s: float = 5.0) -> Task:
    return Task(
        name="t",
        driver="raw_exec",
        config={"command": command, "args": list(args)},
        kill_timeout_s=kill_timeout_s,
    )


def wait_for_file(path: Path) -> None:
    deadline = time.monotonic() + 30
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.01)


def wait_exit(d: RawExecDriver, h: TaskHandle, now: float = 0.0) -> TaskStatus:
    """Polls with the driver's clock held at `now` until the process exits (real processes:
    the deadline is generous for a loaded machine)."""
    deadline = time.monotonic() + 30
    while True:
        status = d.poll(h, now)
        if not status.running:
            return status
        assert time.monotonic() < deadline, "the task did not exit"
        time.sleep(0.01)


def test_raw_exec_validate() -> None:
    d = RawExecDriver(enabled=True, data_dir="/nonexistent")
    assert d.validate(exec_task("/bin/true")) == []
    assert d.validate(Task(name="t", driver="raw_exec")) == [
        'raw_exec: missing required config "command"'
    ]
    bad = Task(name="t", driver="raw_exec", config={"command": "", "args": "x", "image": "a"})
    assert d.validate(bad) == [
        'raw_exec: unknown config key "image"',
        "raw_exec: command must be a non-empty string, got ''",
        "raw_exec: args must be a list of strings, got 'x'",
    ]


def test_raw_exec_disabled_refuses_to_start(tmp_path: Path) -> None:
    d = RawExecDriver(enabled=False, data_dir=tmp_path)
    with pytest.raises(DriverError) as info:
        d.start("a1", exec_task("/bin/true"), {}, now=0.0)
    assert str(info.value) == DISABLED_ERROR == "raw_exec driver is disabled on this agent"
    assert list(tmp_path.iterdir()) == []


def test_raw_exec_exit_code_fails_the_task(tmp_path: Path) -> None:
    d = RawExecDriver(enabled=True, data_dir=tmp_path)
    h = d.start("a1", exec_task("/bin/sh", "-c", "exit 3"), {}, now=0.0)
    assert h.wake_at is None  # cannot be predicted: polled every tick
    assert wait_exit(d, h) == TaskStatus(TaskState.FAILED, 3, "exited with code 3")


def test_raw_exec_env_logs_and_working_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_SECRET", "leaked")
    d = RawExecDriver(enabled=True, data_dir=tmp_path)
    script = 'echo "$DROVER_ALLOC_ID $GREETING ${AGENT_SECRET:-none} $(pwd)"; echo oops >&2'
    env = {"DROVER_ALLOC_ID": "a1", "GREETING": "hi"}
    h = d.start("a1", exec_task("sh", "-c", script), env, now=0.0)  # found on the base PATH
    assert wait_exit(d, h) == TaskStatus(TaskState.COMPLETE, 0, "exited with code 0")
    logs = tmp_path / "a1" / "alloc" / "logs"
    task_dir = (tmp_path / "a1" / "t").resolve()
    assert (logs / "t.stdout").read_text() == f"a1 hi none {task_dir}\n"
    assert (logs / "t.stderr").read_text() == "oops\n"


def test_raw_exec_missing_binary_is_a_start_error(tmp_path: Path) -> None:
    d = RawExecDriver(enabled=True, data_dir=tmp_path)
    with pytest.raises(DriverError, match="failed to launch '/no/such/binary'"):
        d.start("a1", exec_task("/no/such/binary"), {}, now=0.0)


def test_raw_exec_stop_sends_sigterm(tmp_path: Path) -> None:
    d = RawExecDriver(enabled=True, data_dir=tmp_path)
    h = d.start("a1", exec_task("sleep", "30"), {}, now=0.0)
    assert d.poll(h, 0.0).running
    d.stop(h, 1.0)
    d.stop(h, 1.5)  # a second stop is harmless
    # Within kill_timeout (5 s on the driver's clock): only SIGTERM can have ended it.
    status = wait_exit(d, h, now=1.5)
    assert status == TaskStatus(TaskState.FAILED, -15, "killed by signal 15")


def test_raw_exec_escalates_to_sigkill_after_kill_timeout(tmp_path: Path) -> None:
    d = RawExecDriver(enabled=True, data_dir=tmp_path)
    # Survives SIGTERM (the signal ends the current `sleep`; the trap notes it, the loop goes on).
    script = "trap 'touch termed' TERM; touch ready; while :; do sleep 1; done"
    h = d.start("a1", exec_task("sh", "-c", script, kill_timeout_s=5.0), {}, now=0.0)
    task_dir = tmp_path / "a1" / "t"
    wait_for_file(task_dir / "ready")
    d.stop(h, 10.0)
    wait_for_file(task_dir / "termed")  # SIGTERM delivered and handled: the task lives on
    assert d.poll(h, 14.9).running and not h.killed  # kill_timeout not passed: no SIGKILL
    status = wait_exit(d, h, now=15.0)  # the caller's clock passes kill_timeout: SIGKILL
    assert status == TaskStatus(TaskState.FAILED, -9, "killed by signal 9")
