"""The job version history: a short tuple per job, newest first, with Nomad's retention."""

from __future__ import annotations

from contracts.job import TRACKED_VERSIONS, Job


def add_version(
    history: tuple[Job, ...], job: Job, tracked: int = TRACKED_VERSIONS
) -> tuple[Job, ...]:
    """Insert `job` (replacing a row with the same version) and trim to `tracked` rows.

    As in Nomad's upsertJobVersion: when over the limit the oldest row goes, except that the
    newest stable version is swapped into the keep set if it is the one that would be dropped.
    """
    rows = [j for j in history if j.version != job.version]
    rows.append(job)
    rows.sort(key=lambda j: j.version, reverse=True)
    while len(rows) > tracked:
        stable_idx = next((i for i, j in enumerate(rows) if j.stable), -1)
        if stable_idx == tracked:
            rows[tracked - 1], rows[tracked] = rows[tracked], rows[tracked - 1]
        del rows[tracked]
    return tuple(rows)


def replace_version(history: tuple[Job, ...], job: Job) -> tuple[Job, ...]:
    """Swap in a new record for an existing version (status mirror, stability)."""
    return tuple(job if j.version == job.version else j for j in history)
