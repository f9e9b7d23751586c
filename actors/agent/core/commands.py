"""What an agent does with a command the API sent one of its nodes (contracts/node_commands.py).

Nomad's client endpoints, answered by the client core:

- signal (`Allocations.Signal`): the allocation's runner sends the signal to the task named,
  or to every task, recording a "Signaling" task event for each (runner.py); an allocation
  the agent does not run on that node is Nomad's `Unknown allocation "<id>"`, a task not in
  its group "Task not found", one that is not running (yet, or any more) "Task not running";
  a signal Nomad would not know is refused before anything is sent;
- GC of one allocation (`Allocations.GarbageCollect`): its drivers remove its local state
  (raw_exec: the allocation's folder), unless it still runs: Nomad's "No such allocation on
  client, or allocation not eligible for GC";
- GC of a node (`Allocations.GarbageCollectAll`): the same for each allocation the API found
  terminal there (at most GC_MAX_ALLOCS per command); the reply lists those collected.
"""

from __future__ import annotations

from dataclasses import dataclass

from actors.agent.core.client import ClientCore
from contracts.node_commands import (
    GC_MAX_ALLOCS,
    NOT_ELIGIBLE_FOR_GC,
    NodeCommand,
    NodeCommandKind,
    NodeCommandReply,
    ReplyError,
    TaskEvent,
    canonical_signal,
    invalid_signal,
)


@dataclass(frozen=True, slots=True)
class CommandOutcome:
    """The reply to send, and the task events recorded for the command's allocation."""

    reply: NodeCommandReply
    events: tuple[TaskEvent, ...] = ()


def run_command(core: ClientCore, command: NodeCommand, now: float) -> CommandOutcome:
    """Carry out `command` on the core at `now` (unix seconds)."""
    if command.kind is NodeCommandKind.SIGNAL:
        return _signal(core, command, now)
    if command.kind is NodeCommandKind.GC_ALLOC:
        if core.collect(command.alloc_id):
            return _ok(command, collected=(command.alloc_id,))
        return _failed(command, NOT_ELIGIBLE_FOR_GC, ReplyError.INVALID)
    collected = tuple(a for a in command.alloc_ids[:GC_MAX_ALLOCS] if core.collect(a))
    return _ok(command, collected=collected)


def _signal(core: ClientCore, command: NodeCommand, now: float) -> CommandOutcome:
    signal = canonical_signal(command.signal)
    if signal is None:
        return _failed(command, invalid_signal(command.signal), ReplyError.INVALID)
    runner = core.runner(command.node_id, command.alloc_id)
    if runner is None:
        return _failed(command, f'Unknown allocation "{command.alloc_id}"', ReplyError.NOT_FOUND)
    events, error, kind = runner.signal(command.task, signal, now)
    reply = NodeCommandReply(command.command_id, error, kind)
    return CommandOutcome(reply, tuple(events))


def _ok(command: NodeCommand, collected: tuple[str, ...] = ()) -> CommandOutcome:
    return CommandOutcome(NodeCommandReply(command.command_id, collected=collected))


def _failed(command: NodeCommand, error: str, kind: ReplyError) -> CommandOutcome:
    return CommandOutcome(NodeCommandReply(command.command_id, error, kind))
