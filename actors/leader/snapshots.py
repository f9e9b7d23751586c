"""The leader's snapshots: every so many entries or bytes, the state as it stands is written
to Redis and the log before it is trimmed, keeping a tail for followers that lag.

The loop thread takes a point-in-time view of the store (copy-on-write: O(shards), the loop
goes on writing) and the requests applied up to it, and a forked child process encodes the
chunks and writes them (runtime/snapshots.py), so a snapshot of a million allocations never
holds the loop: not even its interpreter lock, which a background thread of the leader's
own shared with the loop for the seconds the encoding takes (runtime/forked.py). A thread of
the leader's waits for the child and records the outcome. Where fork() is missing (or
`SnapshotPolicy.fork` is off) that thread does the writing itself. One snapshot is written
at a time; a due one waits for the previous to finish. The switch is fenced by the term: a
deposed leader's snapshot never becomes the latest.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from actors.process_settings import lower_thread_priority
from actors.runtime import forked
from actors.runtime.snapshots import SnapshotStore, SwitchOutcome
from actors.state import StateSnapshot
from actors.state.image import image_entries
from contracts.snapshot import SnapshotHeader
from contracts.state_log import encode_entry

log = logging.getLogger(__name__)

WRITER_NICENESS = 10  # a forked writer's nice value (CFS gives it ~1/10 of a contended core)


@dataclass(frozen=True, slots=True)
class SnapshotPolicy:
    """When the leader snapshots, and how much log it keeps before the snapshot."""

    every_entries: int = 100_000  # entries committed since the last snapshot...
    every_bytes: int = 256 * 2**20  # ...or bytes appended to the log since then
    keep_tail: int = 10_000  # entries kept before a snapshot's index, for lagging followers
    enabled: bool = True
    fork: bool = True  # written by a forked child (off: by a thread of the leader's)

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
    fork_ms: float = 0.0  # the loop's pause to fork the latest one's writer (0: a thread)
    trimmed: int = 0  # log entries trimmed, in all
    last_error: str = field(default="")


class SnapshotWriter:
    def __init__(self, snapshots: SnapshotStore, policy: SnapshotPolicy) -> None:
        self.snapshots = snapshots
        self.policy = policy
        self.stats = SnapshotStats()
        # Where the interval counts from: the latest snapshot started (or loaded). Not
        # `stats.index`, which says what is written: a reader of the stats between a
        # write's start and its switch would see an index Redis does not hold yet.
        self._due_from = 0
        self._bytes_at_last = 0
        self._thread: threading.Thread | None = None

    def loaded(self, index: int, appended_bytes: int) -> None:
        """The leader started from the snapshot at `index` (0: none)."""
        self.stats.index = self._due_from = index
        self._bytes_at_last = appended_bytes

    def due(self, index: int, appended_bytes: int) -> bool:
        policy = self.policy
        if not policy.enabled or self.busy():
            return False
        return (
            index - self._due_from >= policy.every_entries
            or appended_bytes - self._bytes_at_last >= policy.every_bytes
        )

    def busy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(
        self, state: StateSnapshot, requests: Mapping[str, int], term: int, appended_bytes: int
    ) -> None:
        """Write a snapshot of `state` in the background (the loop thread calls this, with
        `requests` standing at `state`'s index: a forked writer sees them as they are now)."""
        self._bytes_at_last = appended_bytes
        index = self._due_from = state.latest_index()  # not due again until the next interval
        if self.policy.fork and forked.supported():
            started = time.perf_counter()
            try:
                child = forked.start(lambda: self._write_in_child(state, requests, term))
            except OSError as exc:  # not the loop's failure: the next interval tries again
                self._failed(index, f"forking the writer: {exc}")
                return
            self.stats.fork_ms = round((time.perf_counter() - started) * 1000, 2)
            target, args = self._await_child, (child, index)
        else:
            self.stats.fork_ms = 0.0
            target, args = self._write_logged, (state, dict(requests), term)
        thread = threading.Thread(target=target, args=args, name="leader-snapshot", daemon=True)
        thread.start()
        self._thread = thread  # started: `wait` may join it from any thread

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait for a background write; False if it is still running."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)
        return not self.busy()

    def _write_logged(self, state: StateSnapshot, requests: dict[str, int], term: int) -> None:
        try:
            self.write(state, requests, term)
        except Exception as exc:  # Redis away: the next interval tries again
            self._failed(state.latest_index(), f"{type(exc).__name__}: {exc}")

    def _write_in_child(
        self, state: StateSnapshot, requests: Mapping[str, int], term: int
    ) -> dict[str, object]:
        """The forked child's work: its own connection, and what the parent records. It runs
        at a lower priority: the snapshot can wait, the loop and its peers should not (on
        a busy machine it takes the cores' idle time)."""
        lower_thread_priority(WRITER_NICENESS)
        store = SnapshotStore(forked.fresh_client(self.snapshots.client), self.snapshots.names)
        written = _write(store, state, requests, term, self.policy.keep_tail, forked.ensure_parent)
        return dataclasses.asdict(written)

    def _await_child(self, child: forked.ForkedChild, index: int) -> None:
        outcome = child.wait()
        if not outcome.ok:
            self._failed(index, outcome.error)
            return
        result = dict(outcome.result)
        switched = SwitchOutcome(**result.pop("outcome"))
        self._record(Written(switched, **result))

    def write(self, state: StateSnapshot, requests: Mapping[str, int], term: int) -> SwitchOutcome:
        """Write a snapshot of `state` now, on the caller's thread."""
        written = _write(self.snapshots, state, requests, term, self.policy.keep_tail)
        self._record(written)
        return written.outcome

    def _record(self, written: Written) -> None:
        outcome = written.outcome
        if not outcome.ok:
            self._failed(written.index, outcome.reason, switched=True)
            return
        stats = self.stats
        stats.written += 1
        stats.index = max(stats.index, written.index)
        stats.chunks, stats.bytes = written.chunks, written.bytes
        stats.seconds = written.seconds
        stats.trimmed += outcome.trimmed

    def _failed(self, index: int, reason: str, *, switched: bool = False) -> None:
        self.stats.failed += 1
        self.stats.last_error = reason
        if switched:
            log.warning("snapshot at %d not switched: %s", index, reason)
        else:  # Redis away, or the child failed: the next interval tries again
            log.warning("writing the snapshot at %d failed: %s", index, reason)


@dataclass(frozen=True, slots=True)
class Written:
    """A snapshot write's outcome and size (what a forked writer reports to its parent)."""

    outcome: SwitchOutcome
    index: int
    chunks: int
    bytes: int
    seconds: float


def _write(
    store: SnapshotStore,
    state: StateSnapshot,
    requests: Mapping[str, int],
    term: int,
    keep_tail: int,
    between_chunks: Callable[[], None] = lambda: None,
) -> Written:
    """Encode `state` and write it to `store` as the latest snapshot, trimming the log
    before `keep_tail` entries under its index."""
    started = time.monotonic()
    index = state.latest_index()
    written = [0, 0]  # chunks, bytes

    def chunks() -> Iterator[bytes]:
        for entry in image_entries(state, term):
            between_chunks()
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
    outcome = store.write(header, chunks(), index - keep_tail + 1)
    seconds = round(time.monotonic() - started, 3)
    return Written(outcome, index, written[0], written[1], seconds)
