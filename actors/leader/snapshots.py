"""The leader's snapshots: every so many entries or bytes, the state as it stands is written
to Redis and the log before it is trimmed, keeping a tail for followers that lag.

The loop thread takes a point-in-time view of the store (copy-on-write: O(shards), the loop
goes on writing) and the requests applied up to it; a background thread encodes the chunks
and writes them (runtime/snapshots.py), so a snapshot of a million allocations never holds
the loop. One snapshot is written at a time; a due one waits for the previous to finish.
The switch is fenced by the term: a deposed leader's snapshot never becomes the latest.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from actors.runtime.snapshots import SnapshotStore, SwitchOutcome
from actors.state import StateSnapshot
from actors.state.image import image_entries
from contracts.snapshot import SnapshotHeader
from contracts.state_log import encode_entry

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SnapshotPolicy:
    """When the leader snapshots, and how much log it keeps before the snapshot."""

    every_entries: int = 100_000  # entries committed since the last snapshot...
    every_bytes: int = 256 * 2**20  # ...or bytes appended to the log since then
    keep_tail: int = 10_000  # entries kept before a snapshot's index, for lagging followers
    enabled: bool = True

    def __post_init__(self) -> None:
        for name in ("every_entries", "every_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"snapshot {name} must be at least 1, got {getattr(self, name)}")
        if self.keep_tail < 0:
            raise ValueError(f"snapshot keep_tail must not be negative, got {self.keep_tail}")


@dataclass
class SnapshotStats:
    written: int = 0
    failed: int = 0
    index: int = 0  # of the latest snapshot written or loaded
    chunks: int = 0
    bytes: int = 0
    seconds: float = 0.0  # the latest write, encoding included
    trimmed: int = 0  # log entries trimmed, in all
    last_error: str = field(default="")


class SnapshotWriter:
    def __init__(self, snapshots: SnapshotStore, policy: SnapshotPolicy) -> None:
        self.snapshots = snapshots
        self.policy = policy
        self.stats = SnapshotStats()
        self._bytes_at_last = 0
        self._thread: threading.Thread | None = None

    def loaded(self, index: int, appended_bytes: int) -> None:
        """The leader started from the snapshot at `index` (0: none)."""
        self.stats.index = index
        self._bytes_at_last = appended_bytes

    def due(self, index: int, appended_bytes: int) -> bool:
        policy = self.policy
        if not policy.enabled or self.busy():
            return False
        return (
            index - self.stats.index >= policy.every_entries
            or appended_bytes - self._bytes_at_last >= policy.every_bytes
        )

    def busy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(
        self, state: StateSnapshot, requests: Mapping[str, int], term: int, appended_bytes: int
    ) -> None:
        """Write a snapshot of `state` in the background (the loop thread calls this)."""
        self._bytes_at_last = appended_bytes
        self.stats.index = state.latest_index()  # not due again until the next interval
        self._thread = threading.Thread(
            target=self._write_logged,
            args=(state, dict(requests), term),
            name="leader-snapshot",
            daemon=True,
        )
        self._thread.start()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait for a background write; False if it is still running."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)
        return not self.busy()

    def _write_logged(self, state: StateSnapshot, requests: dict[str, int], term: int) -> None:
        try:
            outcome = self.write(state, requests, term)
            if not outcome.ok:
                log.warning("snapshot at %d not switched: %s", state.latest_index(), outcome.reason)
        except Exception as exc:  # Redis away: the next interval tries again
            self.stats.failed += 1
            self.stats.last_error = f"{type(exc).__name__}: {exc}"
            log.warning("writing the snapshot at %d failed: %s", state.latest_index(), exc)

    def write(self, state: StateSnapshot, requests: Mapping[str, int], term: int) -> SwitchOutcome:
        """Write a snapshot of `state` now, on the caller's thread."""
        started = time.monotonic()
        index = state.latest_index()
        written = [0, 0]  # chunks, bytes

        def chunks() -> Iterator[bytes]:
            for entry in image_entries(state, term):
                raw = encode_entry(entry)
                written[0] += 1
                written[1] += len(raw)
                yield raw

        header = SnapshotHeader(
            index=index,
            term=term,
            chunks=0,
            table_index=state.table_indexes(),
            requests={rid: at for rid, at in requests.items() if at <= index},
            written_ns=time.time_ns(),
        )
        outcome = self.snapshots.write(header, chunks(), index - self.policy.keep_tail + 1)
        if outcome.ok:
            stats = self.stats
            stats.written += 1
            stats.index = max(stats.index, index)
            stats.chunks, stats.bytes = written
            stats.seconds = round(time.monotonic() - started, 3)
            stats.trimmed += outcome.trimmed
        else:
            self.stats.failed += 1
            self.stats.last_error = outcome.reason
        return outcome
