"""Deployments in the store: written whole, a bounded history per job, gone with a purged
job, and carried through a snapshot image."""

from __future__ import annotations

import dataclasses

from actors.state import StateStore
from actors.state.deployments import DEPLOYMENTS_KEPT
from actors.state.image import image_entries, restore
from contracts import Job
from contracts.deployment import Deployment, DeploymentState, DeploymentStatus
from contracts.snapshot import SnapshotHeader
from contracts.state_log import PurgeJob, UpsertDeployments, UpsertJob, decode_entry, encode_entry


def deployment(dep_id: str, job_id: str = "web", **kw: object) -> Deployment:
    groups = {"g": DeploymentState(desired_total=3)}
    return Deployment(dep_id, job_id=job_id, task_groups=groups, **kw)  # type: ignore[arg-type]


def test_an_update_keeps_the_create_index_and_the_latest_is_last() -> None:
    store = StateStore()
    store.commit(UpsertJob(Job(id="web")))
    first = store.commit(UpsertDeployments((deployment("d1"),)))
    store.commit(UpsertDeployments((deployment("d2"),)))
    failed = dataclasses.replace(deployment("d1"), status=DeploymentStatus.FAILED)
    last = store.commit(UpsertDeployments((failed,)))
    d1 = store.deployment("d1")
    assert d1 is not None and d1.create_index == first and d1.modify_index == last
    assert d1.status is DeploymentStatus.FAILED
    assert [d.id for d in store.deployments_by_job("default", "web")] == ["d1", "d2"]
    assert store.latest_deployment("default", "web").id == "d2"  # type: ignore[union-attr]
    assert store.table_index("deployment") == last


def test_history_is_bounded_and_a_purge_drops_it() -> None:
    store = StateStore()
    store.commit(UpsertJob(Job(id="web")))
    for n in range(DEPLOYMENTS_KEPT + 3):
        store.commit(UpsertDeployments((deployment(f"d{n}"),)))
    kept = store.deployments_by_job("default", "web")
    assert len(kept) == DEPLOYMENTS_KEPT and kept[0].id == "d3"
    assert store.deployment("d0") is None and store.deployment("d3") is not None
    store.commit(PurgeJob("default", "web"))
    assert store.deployments_by_job("default", "web") == [] and store.deployment("d5") is None
    assert list(store.deployments()) == []


def test_deployments_survive_a_snapshot_image() -> None:
    store = StateStore()
    for job in ("a", "b"):
        store.commit(UpsertJob(Job(id=job)))
        store.commit(UpsertDeployments((deployment(f"{job}1", job),)))
        store.commit(UpsertDeployments((deployment(f"{job}2", job),)))
    state = store.snapshot()
    raws = [encode_entry(e) for e in image_entries(state, term=1)]
    header = SnapshotHeader(state.latest_index(), 1, 0, dict(state.table_indexes()))
    fresh = StateStore()
    restore(fresh, header, (decode_entry(raw).change for raw in raws))
    for job in ("a", "b"):
        assert fresh.deployments_by_job("default", job) == store.deployments_by_job("default", job)
    assert fresh.deployment("b2") == store.deployment("b2")
