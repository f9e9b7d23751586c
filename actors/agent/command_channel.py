"""The agent's end of the node command streams (contracts/node_commands.py), over Redis.

`follow` runs on a thread of its own beside the log tail: one blocking XREAD over the command
streams of every node the agent hosts (a simulated agent's thousands included: Redis wakes the
read when any of them gets an entry, so an idle agent costs one blocked read every few
seconds; stopping and hosting new nodes cut it short), each command queued for the agent's
loop, which carries it out on its client core (core/commands.py) under the loop's lock, as
it does everything its drivers are asked. The
loop then `answer`s: the command's task events onto the allocation's capped event list, then
the reply onto the command's reply list, in one pipeline, so that the API, woken by the reply,
already reads the events.

Commands are read from the moment the agent starts (Redis' own clock, the streams' ids): one
sent to a node before its agent ran had nobody to answer it, and its sender has given up.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import redis

from actors.agent.core.commands import CommandOutcome
from actors.streams import StreamBus
from actors.streams.envelope import BadMessage, decode_message, registry_of
from actors.streams.names import StreamNames
from actors.streams.wake import WakeableReads
from contracts.codec import dumps
from contracts.node_commands import (
    REPLY_TTL_S,
    TASK_EVENTS_KEPT,
    TASK_EVENTS_TTL_S,
    NodeCommand,
)

log = logging.getLogger(__name__)

COMMANDS = registry_of(NodeCommand)
BLOCK_MS = 5000  # how long a read waits (woken at once to stop, or to add new nodes' streams)
READ_COUNT = 100  # entries per stream per read
QUEUE_MAX = 10_000  # commands read and not yet carried out (the oldest are dropped past it)


class CommandChannel:
    def __init__(
        self,
        client: redis.Redis,
        names: StreamNames,
        consumer: str,
        node_ids: Callable[[], Sequence[str]],
    ) -> None:
        """`node_ids`: the nodes hosted now (asked before every read)."""
        self.client = client
        self.names = names
        self.consumer = consumer
        self.node_ids = node_ids
        self.bus = StreamBus(client, names)
        self.queue: deque[NodeCommand] = deque(maxlen=QUEUE_MAX)
        self.reads: WakeableReads | None = None
        self._woken = threading.Event()  # the node set changed, or the agent stops
        self._since = ""  # the stream id commands are read after (begin)
        self.stats = {"commands": 0, "bad_commands": 0}

    # -- reading (its own thread) ------------------------------------------------------------------

    def begin(self) -> None:
        """Mark the moment commands count from (the agent's start): those sent from now on
        are read, even before `follow` runs."""
        self._since = self._now_id()

    def follow(self, stop: threading.Event, woken: threading.Event) -> None:
        """Queue every command sent to a hosted node until `stop`; sets `woken` when some
        arrived. Never raises: a lost connection is retried, the loop's reconnect handles the
        rest."""
        self.reads = reads = WakeableReads(self.client)
        last: dict[str, str] = {}
        since = self._since
        try:
            while not stop.is_set():
                try:
                    since = since or self._now_id()
                    streams: dict[Any, Any] = {
                        key: last.setdefault(key, since)
                        for key in map(self.names.node_commands, self.node_ids())
                    }
                    if not streams:  # no node hosted yet: wait for one (or the stop)
                        self._woken.wait(BLOCK_MS / 1000)
                        self._woken.clear()
                        continue
                    reads.arm()
                    if stop.is_set():
                        return
                    reply = reads.client.xread(streams, count=READ_COUNT, block=BLOCK_MS)
                except Exception as exc:
                    if not isinstance(exc, redis.ConnectionError):
                        log.exception("agent %s: reading node commands failed", self.consumer)
                    stop.wait(0.5)
                    continue
                finally:
                    reads.disarm()
                if self._take(reply, last):
                    woken.set()
        finally:
            reads.close()

    def wake(self) -> None:
        """Cut the reader's wait short (to stop, or to read new nodes' streams)."""
        self._woken.set()
        if self.reads is not None:
            self.reads.wake()

    def _now_id(self) -> str:
        seconds, micros = self.client.time()
        return f"{int(seconds) * 1000 + int(micros) // 1000}-0"

    def _take(self, reply: Any, last: dict[str, str]) -> int:
        taken = 0
        for raw_stream, rows in reply or ():
            stream = raw_stream.decode() if isinstance(raw_stream, bytes) else str(raw_stream)
            for raw_id, fields in rows:
                message_id = raw_id.decode() if isinstance(raw_id, bytes) else str(raw_id)
                last[stream] = message_id
                try:
                    _type, command, _trace = decode_message(fields, COMMANDS)
                except BadMessage as exc:
                    self.stats["bad_commands"] += 1
                    self.bus.dead_letter(stream, message_id, self.consumer, exc.reason, fields)
                    continue
                assert isinstance(command, NodeCommand)
                self.queue.append(command)
                taken += 1
        self.stats["commands"] += taken
        return taken

    # -- answering (the agent's loop) ------------------------------------------------------------

    def answer(self, command: NodeCommand, outcome: CommandOutcome) -> None:
        """The command's task events, then its reply, in one round trip. A reply goes only
        to the reply list named after the command (never to a key a sender made up)."""
        pipe = self.client.pipeline(transaction=False)
        if outcome.events:
            events = self.names.task_events(command.alloc_id)
            pipe.rpush(events, *(dumps(e) for e in outcome.events))
            pipe.ltrim(events, -TASK_EVENTS_KEPT, -1)
            pipe.expire(events, TASK_EVENTS_TTL_S)
        if command.reply_to and command.reply_to == self.names.command_reply(command.command_id):
            pipe.lpush(command.reply_to, dumps(outcome.reply))
            pipe.expire(command.reply_to, REPLY_TTL_S)
        if len(pipe):
            pipe.execute()
