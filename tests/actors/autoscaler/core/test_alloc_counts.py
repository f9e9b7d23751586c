"""AllocCounts, fed the log as the autoscaler's replica reads it (compact), counts what a full
store counts: the same log is replayed into both, and after every entry the group's
(running, starting) agree."""

from __future__ import annotations

import random

import pytest

from actors.autoscaler.core.alloc_counts import AllocCounts
from actors.autoscaler.core.status import group_status
from actors.leader.core import register_job
from actors.state import StateStore
from contracts import Allocation, ClientStatus, DesiredStatus, Job, Task, TaskGroup
from contracts.state_log import (
    AllocClientUpdate,
    DeleteEvals,
    LogEntry,
    StateChange,
    UpdateAllocsClientStatus,
    UpsertAllocs,
    decode_entry,
    encode_entry,
)

GROUPS = ("api", "worker")
STATUSES = (ClientStatus.PENDING, ClientStatus.RUNNING, ClientStatus.COMPLETE, ClientStatus.FAILED)


class Replay:
    def __init__(self) -> None:
        self.store = StateStore()  # keeps every record
        self.follower = StateStore()  # what the autoscaler keeps: no allocations
        self.counts = AllocCounts()
        job = Job(
            id="web", task_groups=tuple(TaskGroup(g, 1, tasks=(Task("t", "mock"),)) for g in GROUPS)
        )
        write = register_job(self.store, job, now_ns=1, new_id=lambda: "e0")
        assert write.change is not None
        self.commit(write.change)

    def commit(self, change: StateChange) -> None:
        """As the leader commits: the plan's records stamped over the old ones (client-owned
        fields kept), the entry written, then read back as the follower reads it."""
        change = self.store.stamped(change, self.store.latest_index() + 1)
        index = self.store.commit(change)
        entry = decode_entry(encode_entry(LogEntry(index, 1, change)), compact=True)
        if type(entry.change).__name__ in ("UpsertJob", "UpsertEvals"):
            self.follower.apply(entry)
        self.counts.apply(entry.change)

    def agree(self) -> None:
        for group in GROUPS:
            full = group_status(self.store, "default", "web", group)
            counted = group_status(self.follower, "default", "web", group, self.counts)
            assert full is not None and counted is not None
            assert (counted.count, counted.starting) == (full.count, full.starting), group


def alloc(alloc_id: str, group: str, desired: DesiredStatus = DesiredStatus.RUN) -> Allocation:
    return Allocation(
        id=alloc_id, job_id="web", node_id="n1", task_group=group, desired_status=desired
    )


def test_placements_reports_stops_and_collection_are_counted_as_the_store_counts() -> None:
    r = Replay()
    r.commit(UpsertAllocs((*(alloc(f"a{i}", "api") for i in range(4)), alloc("w", "worker"))))
    r.agree()
    assert r.counts.counts("default", "web", "api") == (0, 4)
    running = tuple(AllocClientUpdate(a, ClientStatus.RUNNING) for a in ("a0", "a1", "a2", "w"))
    r.commit(UpdateAllocsClientStatus(running))
    r.agree()
    assert r.counts.counts("default", "web", "api") == (3, 1)
    r.commit(UpdateAllocsClientStatus((AllocClientUpdate("a1", ClientStatus.FAILED),)))
    r.commit(UpsertAllocs((alloc("a2", "api", DesiredStatus.STOP),)))  # a plan stops it
    r.agree()
    assert r.counts.counts("default", "web", "api") == (1, 1)
    # A late report of a stopped allocation, or of an unknown one, revives nothing.
    r.commit(UpdateAllocsClientStatus((AllocClientUpdate("a2", ClientStatus.RUNNING),)))
    r.commit(UpdateAllocsClientStatus((AllocClientUpdate("ghost", ClientStatus.RUNNING),)))
    r.agree()
    r.commit(DeleteEvals((), alloc_ids=("a0", "a1", "a2")))
    r.agree()
    assert r.counts.counts("default", "web", "api") == (0, 1)
    assert len(r.counts) == 2  # only live allocations are kept: a3 and w


@pytest.mark.parametrize("seed", range(5))
def test_random_logs_are_counted_as_the_store_counts(seed: int) -> None:
    """Random plans and reports, moving as they do in a cluster: an allocation is placed in
    one group, may be stopped by a later plan (never restarted), and its client reports move
    it forward only (pending, running, then a terminal status)."""
    rng = random.Random(seed)
    r = Replay()
    ids = [f"a{i}" for i in range(30)]
    order = {s: i for i, s in enumerate(STATUSES[:2])} | {s: 2 for s in STATUSES[2:]}
    for _ in range(80):
        roll = rng.random()
        if roll < 0.4:
            plan = []
            for a in rng.sample(ids, rng.randint(1, 6)):
                old = r.store.alloc(a)
                if old is None:
                    plan.append(alloc(a, rng.choice(GROUPS)))
                elif rng.random() < 0.5:
                    plan.append(alloc(a, old.task_group, DesiredStatus.STOP))
            r.commit(UpsertAllocs(tuple(plan)))
        elif roll < 0.9:
            updates = []
            for a in rng.sample(ids, rng.randint(1, 6)):
                old = r.store.alloc(a)
                status = rng.choice(STATUSES)
                if old is None or order[status] >= order[old.client_status]:
                    updates.append(AllocClientUpdate(a, status))
            r.commit(UpdateAllocsClientStatus(tuple(updates)))
        else:
            r.commit(DeleteEvals((), alloc_ids=tuple(rng.sample(ids, 3))))
        r.agree()
