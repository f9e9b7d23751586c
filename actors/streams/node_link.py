"""The sender's end of the node command streams (contracts/node_commands.py): the API asks one
node's agent to do something and waits for its answer.

`send_commands` puts each command on its node's stream (capped) naming its own reply list, all
in one pipeline, then waits on those lists with BLPOP: one round trip to send, one blocked
read per reply, and nothing left behind (a reply that comes after the sender gave up is
deleted, or expires). `task_events` reads the
events agents recorded for one allocation.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Sequence

import redis

from actors.streams.envelope import encode_message, message_type
from actors.streams.names import StreamNames
from contracts.codec import CodecError, loads
from contracts.node_commands import (
    NODE_COMMANDS_MAXLEN,
    TASK_EVENTS_KEPT,
    NodeCommand,
    NodeCommandReply,
    TaskEvent,
)

log = logging.getLogger(__name__)


def send_command(
    client: redis.Redis, names: StreamNames, command: NodeCommand, timeout_s: float
) -> NodeCommandReply | None:
    """The agent's reply to `command`, or None when none came within `timeout_s`."""
    return send_commands(client, names, [command], timeout_s)[0]


def send_commands(
    client: redis.Redis, names: StreamNames, commands: Sequence[NodeCommand], timeout_s: float
) -> list[NodeCommandReply | None]:
    """Send every command at once (one pipeline), then wait for their replies, `timeout_s`
    in all: the replies in the commands' order, None for each that did not come in time."""
    keys: dict[str, int] = {}
    pipe = client.pipeline(transaction=False)
    for n, command in enumerate(commands):
        key = names.command_reply(command.command_id)
        keys[key] = n
        sent = dataclasses.replace(command, reply_to=key)
        fields = encode_message(message_type(sent), sent)
        pipe.xadd(names.node_commands(sent.node_id), fields, maxlen=NODE_COMMANDS_MAXLEN)  # type: ignore[arg-type]
    if keys:
        pipe.execute()
    replies: list[NodeCommandReply | None] = [None] * len(commands)
    deadline = time.monotonic() + timeout_s
    waiting = dict(keys)
    while waiting:
        left = deadline - time.monotonic()
        popped = client.blpop(list(waiting), timeout=max(left, 0.001)) if left > 0 else None
        if not popped:
            break
        key = popped[0].decode() if isinstance(popped[0], bytes) else str(popped[0])
        n = waiting.pop(key)
        try:
            replies[n] = loads(NodeCommandReply, popped[1])
        except CodecError as exc:
            log.error("unreadable reply on %s: %s", key, exc)
    if waiting:
        with contextlib.suppress(redis.RedisError):
            client.delete(*waiting)  # a late reply has nobody to read it
    return replies


def task_events(client: redis.Redis, names: StreamNames, alloc_id: str) -> list[TaskEvent]:
    """The task events agents recorded for `alloc_id`, oldest first; unreadable ones skipped."""
    events = []
    for raw in client.lrange(names.task_events(alloc_id), -TASK_EVENTS_KEPT, -1) or ():
        try:
            events.append(loads(TaskEvent, raw))
        except CodecError:
            log.warning("skipping an unreadable task event of allocation %s", alloc_id)
    return events
