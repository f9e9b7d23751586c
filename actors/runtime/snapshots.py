"""Snapshots in Redis, and a store loaded from the latest one (contracts/snapshot.py).

Layout: the snapshot key holds the id of the latest snapshot, `<index>:<term>:<nonce>`; the
snapshot itself is one list, its header first, then its chunks (each a few MB). A writer
(the leader, actors/leader/snapshots.py) pushes a new list under an expiry, then switches
to it in snapshot.lua, which also drops the previous list and trims the log before the
tail it keeps. A reader that finds its list gone half way (a newer snapshot replaced it)
starts over from the newer one.

`load_latest` is how every follower and the leader start, and how a follower that fell
behind the trimmed log catches up: the chunks go through the follower's own decoder,
reducer and listener, and into its store through `Restore` (verbatim, image.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from actors.state import StateStore
from actors.state.image import Restore
from actors.streams.names import StreamNames
from contracts.snapshot import SnapshotHeader, decode_header, encode_header
from contracts.state_log import LogEntry

_SWITCH = (Path(__file__).with_name("snapshot.lua")).read_text()
WRITE_EXPIRY_S = 3600  # a half-written snapshot's list goes by itself after this
PUSH_BATCH = 8  # chunks per round trip, writing
READ_BATCH = 8  # chunks per round trip, reading
LOAD_ATTEMPTS = 5


class SnapshotGone(RuntimeError):
    """The snapshot being read was replaced by a newer one (its list was dropped)."""


@dataclass(frozen=True, slots=True)
class SwitchOutcome:
    ok: bool
    reason: str = ""
    trimmed: int = 0  # log entries trimmed


def snapshot_index(snapshot_id: str) -> int:
    return int(snapshot_id.split(":", 1)[0])


class SnapshotStore:
    def __init__(self, client: redis.Redis, names: StreamNames) -> None:
        self.client = client
        self.names = names
        self._switch: Any = None  # the script, registered on the first write

    def latest_id(self) -> str:
        raw = self.client.get(self.names.snapshot_key)
        if raw is None:
            return ""
        return raw.decode() if isinstance(raw, bytes) else str(raw)

    def latest_index(self) -> int:
        """The index of the latest snapshot (0: none)."""
        snapshot_id = self.latest_id()
        return snapshot_index(snapshot_id) if snapshot_id else 0

    def write(
        self, header: SnapshotHeader, chunks: Iterable[bytes], first_kept_index: int
    ) -> SwitchOutcome:
        """Write a snapshot (`header.chunks` is set from the chunks written) and make it the
        latest, trimming the log before `first_kept_index` (0: no trim)."""
        previous = self.latest_id()
        snapshot_id = f"{header.index}:{header.term}:{uuid.uuid4().hex[:12]}"
        key = self.names.snapshot_data(snapshot_id)
        self.client.rpush(key, b"")  # the header's place, set once the chunks are counted
        self.client.expire(key, WRITE_EXPIRY_S)
        count = 0
        batch: list[bytes] = []
        for chunk in chunks:
            batch.append(chunk)
            count += 1
            if len(batch) == PUSH_BATCH:
                self.client.rpush(key, *batch)
                batch = []
        if batch:
            self.client.rpush(key, *batch)
        complete = SnapshotHeader(
            header.index,
            header.term,
            count,
            header.table_index,
            header.requests,
            header.written_ns,
        )
        self.client.lset(key, 0, encode_header(complete))  # type: ignore[arg-type]
        keep = min(first_kept_index, header.index + 1)
        keys = [
            self.names.term_key,
            self.names.snapshot_key,
            self.names.log,
            key,
            self.names.snapshot_data(previous) if previous else "",
        ]
        if self._switch is None:
            self._switch = self.client.register_script(_SWITCH)
        reply = self._switch(
            keys=keys, args=[header.term, snapshot_id, header.index, previous, max(0, keep)]
        )
        if int(reply[0]) != 1:
            self.client.unlink(key)
            reason = reply[1].decode() if isinstance(reply[1], bytes) else str(reply[1])
            return SwitchOutcome(False, reason)
        return SwitchOutcome(True, trimmed=int(reply[1]))

    def read(self) -> tuple[SnapshotHeader, Iterator[bytes]] | None:
        """The latest snapshot's header and its chunks (read lazily, in batches); None if
        there is none. The iterator raises SnapshotGone if the snapshot is replaced while
        it is read."""
        snapshot_id = self.latest_id()
        if not snapshot_id:
            return None
        key = self.names.snapshot_data(snapshot_id)
        raw = self.client.lindex(key, 0)
        if not raw:
            raise SnapshotGone(f"snapshot {snapshot_id} was replaced before it was read")
        header = decode_header(raw)
        return header, self._chunks(key, header.chunks)

    def _chunks(self, key: str, count: int) -> Iterator[bytes]:
        position = 1
        while position <= count:
            last = min(count, position + READ_BATCH - 1)
            rows = self.client.lrange(key, position, last)
            if len(rows) != last - position + 1:
                raise SnapshotGone(f"snapshot list {key} was replaced while it was read")
            yield from (row if isinstance(row, bytes) else row.encode() for row in rows)
            position = last + 1


Decoder = Callable[[bytes], LogEntry]
Reducer = Callable[[LogEntry], LogEntry]
Listener = Callable[[LogEntry, StateStore], None]


def load_latest(
    snapshots: SnapshotStore,
    store: StateStore,
    decode: Decoder,
    *,
    reduce: Reducer | None = None,
    listener: Listener | None = None,
    newer_than: int = 0,
) -> SnapshotHeader | None:
    """Rebuild `store` from the latest snapshot if its index is above `newer_than`; None
    (store untouched) otherwise. The store is reset first: on failure it is left empty."""
    for _attempt in range(LOAD_ATTEMPTS):
        found = snapshots.read()
        if found is None:
            return None
        header, chunks = found
        if header.index <= newer_than:
            return None
        try:
            _restore(store, header, chunks, decode, reduce, listener)
        except SnapshotGone:
            continue  # a newer one was written meanwhile: load that
        return header
    raise SnapshotGone(f"the snapshot changed under {LOAD_ATTEMPTS} reads in a row")


def _restore(
    store: StateStore,
    header: SnapshotHeader,
    chunks: Iterator[bytes],
    decode: Decoder,
    reduce: Reducer | None,
    listener: Listener | None,
) -> None:
    rebuild = Restore(store)
    rebuild.begin(header)
    for raw in chunks:
        entry = decode(raw)
        if entry.index != header.index:
            raise ValueError(f"a chunk at index {entry.index} in snapshot {header.index}")
        rebuild.chunk((reduce(entry) if reduce else entry).change)
        if listener is not None:
            listener(entry, store)
    rebuild.end()
