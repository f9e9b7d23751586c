"""Allocations' TaskStates and AllocatedResources.Tasks as Nomad's API gives them, derived
from what drover's agents report (one client status per allocation)."""

from __future__ import annotations

import dataclasses

from actors.agent.core.runner import COMPLETE_DESCRIPTION, STOPPED_DESCRIPTION
from actors.api.core.shapes import job_to_nomad
from actors.api.core.task_states import ZERO_TIME, go_time, task_resources, task_states
from contracts import (
    AllocatedDevice,
    AllocatedResources,
    Allocation,
    ClientStatus,
    DeviceRequest,
    Job,
    Resources,
    Task,
    TaskGroup,
)
from contracts.jobspec import parse_job_file
from contracts.messages import LeaderRequest, RequestKind
from contracts.state_log import AllocClientUpdate

from .conftest import Client, MemoryBackend

T0 = 1_700_000_000_000_000_000


def two_task_job() -> Job:
    gpu = DeviceRequest(name="nvidia/gpu", count=2)
    tasks = (
        Task(
            name="train",
            driver="mock",
            resources=Resources(cpu=500, memory_mb=1024, devices=(gpu,)),
        ),
        Task(name="log", driver="mock", resources=Resources(cpu=100, memory_mb=64)),
    )
    return Job(id="ml", task_groups=(TaskGroup("g", 1, tasks=tasks),))


def alloc(status: ClientStatus, description: str = "", **fields: object) -> Allocation:
    held = AllocatedResources(
        cpu=600,
        memory_mb=1088,
        devices=(AllocatedDevice("nvidia", "gpu", "A100", ("GPU-0", "GPU-1")),),
    )
    base = Allocation(
        id="a1",
        job_id="ml",
        task_group="g",
        client_status=status,
        client_description=description,
        allocated_resources=held,
        create_time=T0,
        modify_time=T0 + 5_000_000_000,
    )
    return dataclasses.replace(base, **fields)  # type: ignore[arg-type]


def test_go_time_is_rfc3339_with_nanoseconds_and_the_zero_time() -> None:
    assert go_time(0) == ZERO_TIME == "0001-01-01T00:00:00Z"
    assert go_time(T0) == "2023-11-14T22:13:20Z"
    assert go_time(T0 + 120_000) == "2023-11-14T22:13:20.00012Z"


def test_running_and_pending_tasks() -> None:
    states = task_states(alloc(ClientStatus.RUNNING), two_task_job())
    assert states is not None and set(states) == {"train", "log"}
    train = states["train"]
    assert train["State"] == "running" and train["Failed"] is False and train["Restarts"] == 0
    assert train["StartedAt"] == go_time(T0 + 5_000_000_000)
    assert train["FinishedAt"] == train["LastRestart"] == ZERO_TIME
    assert [(e["Type"], e["Time"]) for e in train["Events"]] == [
        ("Received", T0),
        ("Started", T0 + 5_000_000_000),
    ]
    assert train["Events"][1]["DisplayMessage"] == "Task started by client"
    pending = task_states(alloc(ClientStatus.PENDING), two_task_job())
    assert pending is not None and pending["log"]["State"] == "pending"
    assert [e["Type"] for e in pending["log"]["Events"]] == ["Received"]


def test_finished_tasks_say_how_they_ended() -> None:
    job = two_task_job()
    done = task_states(alloc(ClientStatus.COMPLETE, COMPLETE_DESCRIPTION), job)
    assert done is not None and done["log"]["State"] == "dead" and not done["log"]["Failed"]
    assert done["log"]["Events"][-1]["Type"] == "Terminated"
    assert done["log"]["Events"][-1]["DisplayMessage"] == "Exit Code: 0"
    assert done["log"]["FinishedAt"] == go_time(T0 + 5_000_000_000)
    assert done["log"]["StartedAt"] == ZERO_TIME  # not recorded once finished
    killed = task_states(alloc(ClientStatus.COMPLETE, STOPPED_DESCRIPTION), job)
    assert killed is not None and killed["train"]["Events"][-1]["Type"] == "Killed"
    failed = task_states(alloc(ClientStatus.FAILED, 'task "train" failed: exited with code 3'), job)
    assert failed is not None
    assert failed["train"]["Failed"] is True and failed["log"]["Failed"] is False
    last = failed["train"]["Events"][-1]
    assert last["Type"] == "Terminated" and "exited with code 3" in last["DisplayMessage"]
    assert last["FailsTask"] is True
    assert [e["Type"] for e in failed["log"]["Events"]][-2:] == ["Sibling Task Failed", "Killed"]
    unnamed = task_states(alloc(ClientStatus.FAILED, 'job "ml" version 4 not found'), job)
    assert unnamed is not None and all(s["Failed"] for s in unnamed.values())
    assert task_states(alloc(ClientStatus.RUNNING), None) is None


def test_task_resources_split_the_allocation_by_task_and_hand_out_devices_in_order() -> None:
    tasks = task_resources(alloc(ClientStatus.RUNNING), two_task_job())
    assert tasks["train"]["Cpu"]["CpuShares"] == 500
    assert tasks["train"]["Memory"]["MemoryMB"] == 1024
    assert tasks["train"]["Devices"][0]["DeviceIDs"] == ["GPU-0", "GPU-1"]
    assert tasks["log"]["Cpu"]["CpuShares"] == 100 and tasks["log"]["Devices"] == []
    one = Job(id="one", task_groups=(TaskGroup("g", 1, tasks=(Task(name="t", driver="mock"),)),))
    single = task_resources(alloc(ClientStatus.RUNNING, task_group="g"), one)
    assert single["t"]["Cpu"]["CpuShares"] == 600 and single["t"]["Memory"]["MemoryMB"] == 1088
    assert single["t"]["Devices"][0]["DeviceIDs"] == ["GPU-0", "GPU-1"]


def test_every_allocation_view_carries_task_states(call: Client, backend: MemoryBackend) -> None:
    job = job_to_nomad(parse_job_file("examples/web.nomad"))
    assert call("POST", "/v1/jobs", {"Job": job}).status == 200
    backend.schedule_pending()
    allocs = call("GET", "/v1/job/web/allocations").body
    first = allocs[0]
    backend.write(
        LeaderRequest(
            RequestKind.CLIENT_UPDATES,
            updates=(AllocClientUpdate(first["ID"], ClientStatus.RUNNING, modify_time=T0),),
        )
    )
    full = call("GET", f"/v1/allocation/{first['ID']}").body
    (task,) = full["TaskStates"]
    assert full["TaskStates"][task]["State"] == "running"
    assert full["TaskStates"][task]["StartedAt"] == go_time(T0)
    resources = full["AllocatedResources"]["Tasks"][task]
    assert (
        resources["Cpu"]["CpuShares"] == full["AllocatedResources"]["Flattened"]["Cpu"]["CpuShares"]
    )
    listings = [
        call("GET", "/v1/allocations").body,
        call("GET", "/v1/job/web/allocations").body,
        call("GET", f"/v1/node/{first['NodeID']}/allocations").body,
        call("GET", f"/v1/evaluation/{first['EvalID']}/allocations").body,
    ]
    for listing in listings:
        mine = next(a for a in listing if a["ID"] == first["ID"])
        assert mine["TaskStates"][task]["State"] == "running"
        assert all(a["TaskStates"] for a in listing)
    with_resources = call("GET", "/v1/allocations", resources="true").body
    assert all(a["AllocatedResources"]["Tasks"] for a in with_resources)
