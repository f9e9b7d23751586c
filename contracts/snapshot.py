"""A snapshot of the replicated state, from which the leader and every follower start.

The leader writes one every so many committed entries or bytes (actors/leader/snapshots.py)
and then trims the log before it, keeping a tail for followers that lag. A snapshot is a
header and a list of chunks. Each chunk is encoded as a log entry at the snapshot's index
(`encode_entry`), so that a follower reads it with its own decoder (compact allocations,
no job bodies, ...) and hands it to its own listener, as it does the log's entries; only the
store applies chunks differently: verbatim, with the indexes, versions and statuses they
record (`StateStore.restore`). The chunk kinds are UpsertNodes, RestoreJobs, UpsertEvals and
UpsertAllocs, in that order.

The header carries what is not a record: the index the snapshot stands at, the table
indexes (the `X-Nomad-Index` of each table), and the leader's recently applied request ids,
so that a request re-read after a restart is answered, not applied twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson

from contracts.codec import CodecError, loads, to_wire
from contracts.fast_init import install_fast_inits


@dataclass(frozen=True, slots=True)
class SnapshotHeader:
    index: int  # the last log entry the snapshot includes
    term: int  # the term of the leader that wrote it
    chunks: int  # how many chunks follow the header
    table_index: dict[str, int] = field(default_factory=dict)
    # request id -> the index that committed it, oldest first (the leader's `applied`)
    requests: dict[str, int] = field(default_factory=dict)
    written_ns: int = 0  # wall clock, when the leader wrote it


def encode_header(header: SnapshotHeader) -> bytes:
    return orjson.dumps(to_wire(header))


def decode_header(raw: bytes | str) -> SnapshotHeader:
    """Raises CodecError naming the field of a bad header."""
    header = loads(SnapshotHeader, raw)
    if header.index < 0 or header.chunks < 0:
        raise CodecError("$", f"negative index ({header.index}) or chunks ({header.chunks})")
    return header


install_fast_inits(__name__)
