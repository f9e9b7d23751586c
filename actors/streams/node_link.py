"""The sender's end of the node command streams (contracts/node_commands.py): the API asks one
node's agent to do something and waits for its answer.

`send_command` puts the command on the node's stream (capped) naming its own reply list, then
waits on that list with BLPOP: one round trip to send, one blocked read to wait, and nothing
left behind (a reply that comes after the sender gave up expires). `task_events` reads the
events agents recorded for one allocation.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging

import redis

from actors.streams.bus import StreamBus
from actors.streams.envelope import message_type
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
    reply_key = names.command_reply(command.command_id)
    command = dataclasses.replace(command, reply_to=reply_key)
    StreamBus(client, names).publish(
        names.node_commands(command.node_id),
        [(message_type(command), command)],
        maxlen=NODE_COMMANDS_MAXLEN,
    )
    popped = client.blpop([reply_key], timeout=timeout_s)
    if not popped:
        with contextlib.suppress(redis.RedisError):
            client.delete(reply_key)  # a late reply has nobody to read it
        return None
    try:
        return loads(NodeCommandReply, popped[1])
    except CodecError as exc:
        raise ValueError(f"unreadable reply to command {command.command_id}: {exc}") from None


def task_events(client: redis.Redis, names: StreamNames, alloc_id: str) -> list[TaskEvent]:
    """The task events agents recorded for `alloc_id`, oldest first; unreadable ones skipped."""
    events = []
    for raw in client.lrange(names.task_events(alloc_id), -TASK_EVENTS_KEPT, -1) or ():
        try:
            events.append(loads(TaskEvent, raw))
        except CodecError:
            log.warning("skipping an unreadable task event of allocation %s", alloc_id)
    return events
