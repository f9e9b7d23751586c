"""Commands the API sends to one node's agent, the agent's replies, and task events.

Nomad's HTTP agent forwards some client endpoints to the node's client over RPC
(`Allocations.Signal`, `Allocations.GarbageCollect`, `Allocations.GarbageCollectAll`). drover's
API and agents share no RPC; they share Redis. So each node has a command stream
(`StreamNames.node_commands(node_id)`, XADD MAXLEN ~ NODE_COMMANDS_MAXLEN) that the API
writes and the agent hosting the node reads in its loop, and each command names a reply key
(`StreamNames.command_reply(command_id)`, a list the agent LPUSHes one NodeCommandReply to,
expiring after REPLY_TTL_S) that the API waits on with BLPOP. Commands never enter the state
log: they change no cluster state, only what one client does with its own tasks and disk.

What a command does to a task is recorded as Nomad records it, as a task event
(`TaskEvent`, e.g. "Signaling"), on a capped list per allocation
(`StreamNames.task_events(alloc_id)`, the newest TASK_EVENTS_KEPT, expiring after
TASK_EVENTS_TTL_S), which the API merges into the allocation's TaskStates.

Signals are named as Nomad names them (consul-template's SignalLookup on Linux, which the
docker driver parses with): `canonical_signal` accepts those, in any case.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from contracts.fast_init import install_fast_inits

NODE_COMMANDS_MAXLEN = 100  # per node: commands are answered in milliseconds
REPLY_TTL_S = 60  # an unread reply (its sender gave up) is dropped by Redis
TASK_EVENTS_KEPT = 50  # per allocation; the API shows each task's newest 10, as Nomad
TASK_EVENTS_TTL_S = 7 * 24 * 3600
GC_MAX_ALLOCS = 10_000  # allocation IDs one GarbageCollectAll command may carry

# Nomad's error texts (client/alloc_endpoint.go, allocrunner.Signal, taskrunner.Signal).
NOT_ELIGIBLE_FOR_GC = "No such allocation on client, or allocation not eligible for GC"
TASK_NOT_FOUND = "Task not found"
TASK_NOT_RUNNING = "Task not running"

# consul-template's signals.SignalLookup (Linux), what Nomad's docker driver parses with.
SIGNAL_NAMES = frozenset(
    {
        "SIGABRT",
        "SIGALRM",
        "SIGBUS",
        "SIGCHLD",
        "SIGCONT",
        "SIGFPE",
        "SIGHUP",
        "SIGILL",
        "SIGINT",
        "SIGIO",
        "SIGIOT",
        "SIGKILL",
        "SIGPIPE",
        "SIGPROF",
        "SIGQUIT",
        "SIGSEGV",
        "SIGSTOP",
        "SIGSYS",
        "SIGTERM",
        "SIGTRAP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGUSR1",
        "SIGUSR2",
        "SIGWINCH",
        "SIGXCPU",
        "SIGXFSZ",
    }
)


def canonical_signal(name: str) -> str | None:
    """The signal's name as Nomad sends it (`sigusr1` -> `SIGUSR1`); None if Nomad would
    not know it."""
    upper = name.upper()
    return upper if upper in SIGNAL_NAMES else None


def invalid_signal(name: str) -> str:
    """Nomad's error for a signal it does not know (consul-template's signals.Parse)."""
    return f"invalid signal {name!r} - valid signals are {sorted(SIGNAL_NAMES)}"


class NodeCommandKind(StrEnum):
    SIGNAL = "signal"  # alloc_id, task ("" for every task), signal
    GC_ALLOC = "gc-alloc"  # alloc_id: remove its local state (Allocations.GarbageCollect)
    GC = "gc"  # alloc_ids: the node's terminal allocations (Allocations.GarbageCollectAll)


@dataclass(frozen=True, slots=True)
class NodeCommand:
    """Sent to `node_id`'s command stream; the agent answers on `reply_to` (a list key)."""

    kind: NodeCommandKind
    command_id: str
    node_id: str
    reply_to: str = ""
    alloc_id: str = ""
    task: str = ""
    signal: str = ""
    alloc_ids: tuple[str, ...] = ()


class ReplyError(StrEnum):
    """What kind of failure a reply reports: the API maps it to a status code."""

    NONE = ""
    NOT_FOUND = "not-found"  # 404: the client does not have the allocation
    INVALID = "invalid"  # 400: no such task, not running, not eligible
    FAILED = "failed"  # 500: the driver could not do it


@dataclass(frozen=True, slots=True)
class NodeCommandReply:
    command_id: str
    error: str = ""
    error_kind: ReplyError = ReplyError.NONE
    collected: tuple[str, ...] = ()  # GC: the allocations whose local state was removed

    @property
    def ok(self) -> bool:
        return self.error_kind is ReplyError.NONE


@dataclass(frozen=True, slots=True)
class TaskEvent:
    """One event of one task, in Nomad's TaskEvent terms (`time`: unix ns); `details` holds
    Nomad's Details map (e.g. {"signal": "SIGUSR1"} for "Signaling")."""

    task: str
    type: str
    time: int
    message: str = ""
    display_message: str = ""
    details: dict[str, str] = field(default_factory=dict)


TASK_SIGNALING = "Signaling"


def signaling_event(task: str, signal: str, time_ns: int) -> TaskEvent:
    """Nomad's `NewTaskEvent(TaskSignaling).SetSignalText(signal)` with its display message."""
    return TaskEvent(
        task=task,
        type=TASK_SIGNALING,
        time=time_ns,
        display_message=f"Task being sent signal {signal}",
        details={"signal": signal},
    )


install_fast_inits(__name__)
