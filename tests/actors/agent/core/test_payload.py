"""A dispatched job's payload, written to its task's `local/` file before the task starts."""

from __future__ import annotations

import base64
import time
from pathlib import Path

import pytest

from actors.agent.core import AllocRunner, MockDriver, RawExecDriver
from actors.agent.core.payload import PayloadError, payload_file, write_dispatch_payload
from contracts import Allocation, ClientStatus, Job, Task, TaskGroup
from contracts.launch import DispatchPayloadConfig

PAYLOAD = b"id,name\n1,ada\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def dispatched(*tasks: Task, payload: bytes = PAYLOAD) -> Job:
    return Job(
        id="convert/dispatch-1-ab",
        parent_id="convert",
        dispatched=True,
        payload=b64(payload),
        task_groups=(TaskGroup("g", tasks=tasks),),
    )


def alloc() -> Allocation:
    return Allocation(id="a1", node_id="n1", job_id="convert/dispatch-1-ab", task_group="g")


def test_the_payload_is_decoded_into_the_named_file(tmp_path: Path) -> None:
    local = tmp_path / "local"
    written = write_dispatch_payload(local, "in/data.csv", b64(PAYLOAD))
    assert written == (local / "in" / "data.csv").resolve()
    assert written.read_bytes() == PAYLOAD


@pytest.mark.parametrize(
    ("file", "payload", "problem"),
    [
        ("x", "not base64!", "the job's payload is not base64"),
        ("../../../outside", b64(b"x"), "escapes the allocation directory"),
    ],
)
def test_a_bad_payload_or_file_is_refused(
    tmp_path: Path, file: str, payload: str, problem: str
) -> None:
    with pytest.raises(PayloadError, match=problem):
        write_dispatch_payload(tmp_path / "local", file, payload)
    assert not (tmp_path.parent / "outside").exists()


def test_only_a_task_naming_a_file_of_a_job_with_a_payload_gets_one() -> None:
    named = Task("t", "raw_exec", dispatch_payload=DispatchPayloadConfig("input.txt"))
    unnamed = Task("u", "raw_exec")
    assert payload_file(dispatched(named), named) == "input.txt"
    assert payload_file(dispatched(unnamed), unnamed) is None
    assert payload_file(dispatched(named, payload=b""), named) is None  # dispatched without
    empty_file = Task("e", "raw_exec", dispatch_payload=DispatchPayloadConfig(""))
    assert payload_file(dispatched(empty_file), empty_file) is None


def test_a_raw_exec_task_reads_its_payload_file_when_it_starts(tmp_path: Path) -> None:
    """The file is there before the process starts: the task copies it and exits 0."""
    task = Task(
        "t",
        "raw_exec",
        config={"command": "/bin/sh", "args": ["-c", "cat local/input.txt > seen"]},
        dispatch_payload=DispatchPayloadConfig("input.txt"),
    )
    runner = AllocRunner(
        alloc(), dispatched(task), {"raw_exec": RawExecDriver(enabled=True, data_dir=tmp_path)}
    )
    runner.step(time.time())
    deadline = time.monotonic() + 30
    while not runner.finished and time.monotonic() < deadline:
        time.sleep(0.02)
        runner.step(time.time())
    assert runner.status is ClientStatus.COMPLETE, runner.description
    assert (tmp_path / "a1" / "t" / "local" / "input.txt").read_bytes() == PAYLOAD
    assert (tmp_path / "a1" / "t" / "seen").read_bytes() == PAYLOAD


def test_an_unwritable_payload_fails_the_allocation_as_a_failed_start(tmp_path: Path) -> None:
    task = Task(
        "t",
        "raw_exec",
        config={"command": "/bin/true"},
        dispatch_payload=DispatchPayloadConfig("input.txt"),
    )
    job = Job(id="j", dispatched=True, payload="%%%", task_groups=(TaskGroup("g", tasks=(task,)),))
    runner = AllocRunner(alloc(), job, {"raw_exec": RawExecDriver(enabled=True, data_dir=tmp_path)})
    update = runner.step(100.0)
    assert update is not None and update.client_status is ClientStatus.FAILED
    assert update.client_description.startswith(
        'task "t": failed to start: dispatch payload: the job\'s payload is not base64'
    )


def test_a_mock_task_has_no_folder_and_starts_without_the_file() -> None:
    task = Task("t", "mock", dispatch_payload=DispatchPayloadConfig("input.txt"))
    runner = AllocRunner(alloc(), dispatched(task), {"mock": MockDriver()})
    update = runner.step(100.0)
    assert update is not None and update.client_status is ClientStatus.RUNNING
