"""How the store keeps a job's deployments: oldest first, a bounded history."""

from __future__ import annotations

from dataclasses import replace

from contracts.deployment import Deployment

# Deployments kept per job: the newest ones (an active one is always among them, since a job
# has at most one active deployment and it is the newest). Nomad keeps them until GC.
DEPLOYMENTS_KEPT = 10


def keep_deployment(
    kept: tuple[Deployment, ...], deployment: Deployment, index: int
) -> tuple[Deployment, ...]:
    """`kept` with `deployment` written at `index`: an update keeps its place and create
    index; a new one goes last, and the oldest beyond DEPLOYMENTS_KEPT go."""
    for i, old in enumerate(kept):
        if old.id == deployment.id:
            updated = replace(deployment, create_index=old.create_index, modify_index=index)
            return (*kept[:i], updated, *kept[i + 1 :])
    created = replace(deployment, create_index=index, modify_index=index)
    return (*kept, created)[-DEPLOYMENTS_KEPT:]
