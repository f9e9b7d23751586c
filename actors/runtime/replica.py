"""A read replica of the leader's state: applies the state log, in index order, to a local
store. Workers schedule on its snapshots; the broker and client agents follow it too.

Log entries have stream IDs `<index>-0`, so a replica resumes from its store's latest index
and never applies an entry twice (StateStore.apply ignores indexes it already has).

It starts from the latest snapshot (runtime/snapshots.py) when that is ahead of its store,
then reads the log after it. The leader trims the log before its snapshots: a replica that
finds the entry after its index gone (it lagged past the kept tail) reloads the snapshot,
after `on_reset` has let its owner drop what it derived from the entries (its listener then
sees the snapshot's records again, as chunks at the snapshot's index).

A follower that has no use for the state for a while (the autoscaler with no policy at
all) can let its replica doze (`doze(sniff)`): entries are then read but neither decoded
nor applied, only handed raw to `sniff`; the first one it flags, or a `wake()` from any
thread, wakes the replica, which rebuilds its store from scratch (`on_reset`, then the
latest snapshot and the log after it, as at start) and goes on applying. `dozing()` holds
until that rebuild is done: the owner reads nothing from the store meanwhile.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import redis

from actors.process_settings import after_state_applied, when_idle
from actors.runtime.reconnect import UNREACHABLE, Reconnecting
from actors.runtime.snapshots import SnapshotStore, load_latest
from actors.state import StateSnapshot, StateStore
from actors.streams.names import StreamNames
from contracts.state_log import LogEntry, decode_entry

EntryListener = Callable[[LogEntry, StateStore], None]
EntryDecoder = Callable[[bytes], LogEntry]
EntryReducer = Callable[[LogEntry], LogEntry]
RawSniff = Callable[[bytes], bool]


def _row_index(row_id: bytes | str) -> int:
    """A log row's index: its stream ID is `<index>-0`."""
    text = row_id.decode() if isinstance(row_id, bytes) else row_id
    return int(text.split("-", 1)[0])


class LogReplica:
    def __init__(
        self,
        client: redis.Redis,
        names: StreamNames,
        *,
        store: StateStore | None = None,
        listener: EntryListener | None = None,
        decode: EntryDecoder = decode_entry,
        reduce: EntryReducer | None = None,
        on_reset: Callable[[], None] | None = None,
    ) -> None:
        """decode: how entries are read (a follower may skip what it never looks at);
        reduce: what of an entry goes into the local store (the listener still sees it
        whole). Both let followers that need a slice of the state avoid paying for all of it."""
        self.client = client
        self.names = names
        self.store = store or StateStore()
        self.listener = listener
        self.decode = decode
        self.reduce = reduce
        self.on_reset = on_reset
        self.snapshots = SnapshotStore(client, names)
        self.snapshot_loads = 0  # snapshots loaded (at start, and after falling behind)
        self._applied = threading.Condition()
        # How long after the leader committed it the newest applied entry was applied: how
        # far behind the leader this follower reads (0 until an entry with a commit time).
        self.lag_ns = 0
        # Dozing (see the module doc). The replica's thread reads and rewinds; doze and
        # wake may come from any thread, so the switches go under a lock of their own.
        self._doze_lock = threading.Lock()
        self._sniff: RawSniff | None = None
        self._wake_asked = False
        self._rewinding = False
        self._skipped_to = 0  # the last entry read while dozing (never applied)
        self.rewinds = 0  # wake-ups: rebuilds of the store from scratch begun

    @property
    def index(self) -> int:
        """The last entry read: applied, or passed over while dozing."""
        return max(self.store.latest_index(), self._skipped_to)

    def catch_up(self, block_ms: int | None = None, batch: int = 1000) -> int:
        """Apply entries after the local index; with block_ms, wait that long for the first.
        Returns how many entries were applied."""
        if self._wake_asked:
            return self._rewind()
        reply = self.client.xread({self.names.log: self.position()}, count=batch, block=block_ms)
        applied = 0
        for _stream, rows in reply or ():
            applied += self.apply_rows(rows)
        return applied

    def position(self) -> str:
        """The log stream ID this replica has read up to (read from just after it)."""
        return f"{self.index}-0"

    def apply_rows(self, rows: Sequence[tuple[Any, dict[bytes, bytes]]]) -> int:
        """Apply log rows read by the caller (e.g. in one XREAD with other streams)."""
        if self._sniff is not None or self._wake_asked:
            return self._pass_over(rows)
        applied = 0
        committed_ns = 0
        for _id, fields in rows:
            entry = self.decode(fields[b"e"])
            if entry.index <= self.store.latest_index():
                continue
            if entry.index > self.store.latest_index() + 1:
                self._reload(entry.index)  # the entries between were trimmed
                if entry.index <= self.store.latest_index():
                    continue
            self.store.apply(self.reduce(entry) if self.reduce else entry)
            if self.listener is not None:
                self.listener(entry, self.store)
            applied += 1
            committed_ns = entry.committed_ns
        if applied:
            if committed_ns:
                self.lag_ns = max(0, time.time_ns() - committed_ns)
            after_state_applied()
            with self._applied:
                self._applied.notify_all()
        return applied

    # -- dozing ----------------------------------------------------------------------------

    def doze(self, sniff: RawSniff) -> None:
        """From the next read on, pass entries over unless `sniff(raw)` flags one (any
        thread; ignored while a wake-up is asked or under way)."""
        with self._doze_lock:
            if not (self._wake_asked or self._rewinding):
                self._sniff = sniff

    def wake(self) -> None:
        """Rebuild the store and apply entries again, if dozing (any thread: the replica's
        thread rebuilds it on its next read)."""
        with self._doze_lock:
            if self._sniff is not None:
                self._wake_asked = True

    def dozing(self) -> bool:
        """Whether the store is stale: dozing, or waking and not yet rebuilt."""
        return self._sniff is not None or self.waking()

    def waking(self) -> bool:
        """Whether a wake-up was asked or is under way (the store not yet rebuilt)."""
        return self._wake_asked or self._rewinding

    def _pass_over(self, rows: Sequence[tuple[Any, dict[bytes, bytes]]]) -> int:
        sniff = self._sniff
        for row_id, fields in rows:
            if self._wake_asked or (sniff is not None and sniff(fields[b"e"])):
                return self._rewind()
            self._skipped_to = _row_index(row_id)
        with self._applied:
            self._applied.notify_all()
        return 0

    def _rewind(self) -> int:
        """Wake: the store rebuilt from scratch, as at start (the entry that woke it is
        among those applied). Returns how many log entries were applied."""
        with self._doze_lock:
            self._rewinding = True
            self._sniff, self._wake_asked = None, False
        try:
            if self.on_reset is not None:
                self.on_reset()
            self.store.reset()
            self._skipped_to = 0
            self.rewinds += 1
            return self.load()
        except BaseException:  # Redis away mid-way: the next read starts the rebuild over
            with self._doze_lock:
                self._wake_asked = True
            raise
        finally:
            self._rewinding = False

    def load_snapshot(self) -> bool:
        """Rebuild the store from the latest snapshot if it is ahead of it."""
        latest = self.store.latest_index()
        if self.snapshots.latest_index() <= latest:
            return False
        if latest and self.on_reset is not None:
            self.on_reset()
        header = load_latest(
            self.snapshots,
            self.store,
            self.decode,
            reduce=self.reduce,
            listener=self.listener,
            newer_than=latest,
        )
        if header is None:
            return False
        self.snapshot_loads += 1
        return True

    def _reload(self, next_index: int) -> None:
        latest = self.store.latest_index()
        if not self.load_snapshot() or self.store.latest_index() + 1 < next_index:
            raise RuntimeError(
                f"the log lacks entries {latest + 1}..{next_index - 1} and no snapshot covers them"
            )

    def catch_up_to(self, index: int, timeout_s: float) -> bool:
        """Read and apply the log on the caller's thread until `index` is applied (for
        followers with no tail thread); False if that took longer than `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while self.index < index:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self.catch_up(block_ms=max(1, int(min(remaining, 1.0) * 1000)))
        return True

    def load(self) -> int:
        """Apply everything committed so far (at start or restart): the latest snapshot if
        it is ahead of the store, then the log. Returns how many log entries were applied."""
        self.load_snapshot()
        total = 0
        while True:
            applied = self.catch_up()
            total += applied
            if applied == 0:
                return total

    def wait_for(self, index: int, timeout_s: float) -> bool:
        """Block until the replica has applied `index` (a tail thread must be running)."""
        deadline = time.monotonic() + timeout_s
        with self._applied:
            while self.index < index:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._applied.wait(remaining)
        return True

    def snapshot(self) -> StateSnapshot:
        return self.store.snapshot()

    def run(self, stop: threading.Event, block_ms: int = 200, linger_s: float = 0.0) -> None:
        """Tail the log until `stop` is set (the replica's thread). With `linger_s`, a read
        that brought entries is followed by that pause, so that the next one brings several:
        for followers that need not see each entry at once, every entry otherwise costs
        each of them a read of its own."""
        reconnecting = Reconnecting(stop, "log replica")
        while not stop.is_set():
            read_from = self.index
            try:
                reconnecting(lambda: self.catch_up(block_ms=block_ms))
            except UNREACHABLE:
                return  # raised only once stop is set
            if self.index == read_from:
                when_idle()  # a read that brought nothing: the heap pacer's idle turn
            elif linger_s:  # applied or, dozing, passed over
                stop.wait(linger_s)
