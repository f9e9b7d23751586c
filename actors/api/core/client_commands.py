"""Nomad's client endpoints that act on a node: signal an allocation's tasks, and the client's
garbage collection (`/v1/client/allocation/:id/signal`, `/v1/client/allocation/:id/gc`,
`/v1/client/gc`).

Nomad's HTTP agent forwards these to the node's client over RPC; drover's API sends a
NodeCommand to the agent hosting the node over that node's command stream and waits a few
seconds for its reply (contracts/node_commands.py). What the API can check from its replica
it checks first, naming the field and value: the signal (Nomad's names), the task (one of the
allocation's group), the allocation (404), and that its node is up (Nomad: 404 "No path to
node"). The agent checks the rest as Nomad's client does (Unknown allocation, Task not
running, not eligible for GC).

ACL: as Nomad's client checks them, against the allocation's own namespace: alloc-lifecycle to
signal, submit-job to collect one allocation, node write to collect a node's.

Statuses: a signal answers `{"Index": 0}` (Nomad's GenericResponse) and a GC nothing, both
200; a refused signal or collection is a 400 (Nomad: 500, the client's error being uncoded),
an agent that does not answer in time a 504, a driver that failed to send the signal a 500.
"""

from __future__ import annotations

import uuid

from actors.api.core.call import Call, typed_field
from actors.api.core.errors import ApiError, bad_request
from actors.api.core.http_types import ApiResponse
from actors.state import StateReader
from contracts import Allocation, Node, NodeStatus
from contracts.node_commands import (
    GC_MAX_ALLOCS,
    NOT_ELIGIBLE_FOR_GC,
    NodeCommand,
    NodeCommandKind,
    NodeCommandReply,
    ReplyError,
    canonical_signal,
    invalid_signal,
)

GC_MAX_NODES = 1_000  # nodes one `/v1/client/gc` without node_id reaches
_STATUS = {
    ReplyError.NOT_FOUND: 404,
    ReplyError.INVALID: 400,
    ReplyError.FAILED: 500,
}


def _allowed(call: Call, namespace: str, capability: str) -> None:
    """Nomad's client check: the capability in the allocation's namespace (the route asks
    only for a valid token)."""
    if not call.backend.acl_enabled:
        return
    found = call.backend.acl.resolve(call.request.token)
    if found is None or not found[1].allows(namespace, capability):
        raise ApiError(403, "Permission denied")


def _alloc(state: StateReader, alloc_id: str) -> Allocation:
    alloc = state.alloc(alloc_id)
    if alloc is None:
        raise ApiError(404, f'Unknown allocation "{alloc_id}"')
    return alloc


def _reachable(state: StateReader, node_id: str) -> Node:
    node = state.node(node_id)
    if node is None:
        raise ApiError(404, f'No path to node "{node_id}": it is not registered')
    if node.status is not NodeStatus.READY:
        raise ApiError(404, f'No path to node "{node_id}": it is {node.status}')
    return node


def _new(
    kind: NodeCommandKind,
    node_id: str,
    *,
    alloc_id: str = "",
    task: str = "",
    signal: str = "",
    alloc_ids: tuple[str, ...] = (),
) -> NodeCommand:
    return NodeCommand(
        kind,
        command_id=str(uuid.uuid4()),
        node_id=node_id,
        alloc_id=alloc_id,
        task=task,
        signal=signal,
        alloc_ids=alloc_ids,
    )


def _answered(reply: NodeCommandReply | None, node_id: str) -> NodeCommandReply:
    if reply is None:
        raise ApiError(504, f'the agent of node "{node_id}" did not answer in time')
    if not reply.ok:
        raise ApiError(_STATUS[reply.error_kind], reply.error)
    return reply


def signal_alloc(call: Call) -> ApiResponse:
    """Nomad's allocSignal: {"Signal": "SIGUSR1", "Task": "web"} (no Task: every task)."""
    body = call.json_or_empty()
    signal = typed_field(body, "Signal", str, "")
    task = typed_field(body, "Task", str, "")
    if not signal:
        raise bad_request('Signal: a signal name is required, e.g. "SIGUSR1"')
    canonical = canonical_signal(signal)
    if canonical is None:
        raise bad_request(f"Signal: {invalid_signal(signal)}")
    state = call.backend.snapshot()
    alloc = _alloc(state, call.params["id"])
    _allowed(call, alloc.namespace, "alloc-lifecycle")
    if task:
        job = state.job_version(alloc.namespace, alloc.job_id, alloc.job_version)
        group = job.lookup_task_group(alloc.task_group) if job is not None else None
        names = [t.name for t in group.tasks] if group is not None else []
        if task not in names:
            raise bad_request(
                f'Task: Task not found: "{task}" is not a task of allocation "{alloc.id}"'
                f" (its tasks: {', '.join(names) or 'unknown'})"
            )
    _reachable(state, alloc.node_id)
    command = _new(
        NodeCommandKind.SIGNAL, alloc.node_id, alloc_id=alloc.id, task=task, signal=canonical
    )
    _answered(call.backend.node_commands([command])[0], alloc.node_id)
    return ApiResponse(200, {"Index": 0})


def gc_alloc(call: Call) -> ApiResponse:
    """Nomad's allocGC: the allocation's local state removed from its node, once it has
    stopped (it stays in the cluster state until a system GC)."""
    state = call.backend.snapshot()
    alloc = _alloc(state, call.params["id"])
    _allowed(call, alloc.namespace, "submit-job")
    if not alloc.terminal():
        raise bad_request(f'{NOT_ELIGIBLE_FOR_GC}: allocation "{alloc.id}" is still running')
    _reachable(state, alloc.node_id)
    command = _new(NodeCommandKind.GC_ALLOC, alloc.node_id, alloc_id=alloc.id)
    _answered(call.backend.node_commands([command])[0], alloc.node_id)
    return ApiResponse(200, None)


def gc_nodes(call: Call) -> ApiResponse:
    """Nomad's GarbageCollectAll: every terminal allocation's local state removed from the
    node `?node_id=` names, or (drover's reading of a request with no local client to mean)
    from every ready node holding terminal allocations, at most GC_MAX_NODES of them."""
    state = call.backend.snapshot()
    node_id = call.query("node_id")
    if node_id:
        if state.node(node_id) is None:
            raise ApiError(404, f'Unknown node "{node_id}"')
        targets = [_reachable(state, node_id)]
    else:
        targets = [n for n in state.nodes() if n.status is NodeStatus.READY]
    commands = []
    for node in targets:
        done = _terminal_on(state, node.id)
        if done or node_id:
            commands.append(_new(NodeCommandKind.GC, node.id, alloc_ids=done))
        if len(commands) == GC_MAX_NODES:
            break
    replies = call.backend.node_commands(commands) if commands else []
    silent = [c.node_id for c, r in zip(commands, replies, strict=True) if r is None]
    if silent:
        raise ApiError(504, f"the agents of nodes {', '.join(silent[:10])} did not answer in time")
    for command, reply in zip(commands, replies, strict=True):
        _answered(reply, command.node_id)
    return ApiResponse(200, None)


def _terminal_on(state: StateReader, node_id: str) -> tuple[str, ...]:
    done = [a.id for a in state.allocs_by_node(node_id) if a.terminal()]
    return tuple(done[:GC_MAX_ALLOCS])


ROUTES = [
    ("POST", "/v1/client/allocation/:id/signal", signal_alloc),
    ("PUT", "/v1/client/allocation/:id/signal", signal_alloc),
    *(
        (method, path, handler)
        for method in ("GET", "PUT", "POST")
        for path, handler in (
            ("/v1/client/allocation/:id/gc", gc_alloc),
            ("/v1/client/gc", gc_nodes),
        )
    ),
]
