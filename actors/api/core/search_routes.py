"""`/v1/search` (prefix) and `/v1/search/fuzzy` as Nomad serves them (`nomad/search_endpoint.go`).

Prefix search: the IDs (names, for namespaces and node pools) starting with `Prefix`, in ID
order, at most 20 per context (Nomad's truncateLimit) with `Truncations[context]` true when
more matched. Fuzzy search: case-insensitive substring matches of `Text` in job, group and
task names (`jobs` expands into `groups`, `tasks`, `images` and `commands`, each match with
its `Scope`: namespace, job, group...), allocation and node names and namespaces, best first
(the earliest match, then the shortest, then by name); like Nomad's defaults it looks at no
more than 20 objects per context (`limit_query`), keeps at most 100 matches per context
(`limit_results`) and wants at least 2 characters (`min_term_length`). Evaluations, scaling
policies and deployments are prefix-searched there too. Work is bounded whatever the input:
one pass over a context's records, keeping only the first few in order.

With ACLs on, any valid token may search; it sees only the contexts its policies may read
(jobs, evaluations and allocations: read-job in the namespace; nodes and node pools: node
read), and naming a context it may not read is a 403, as in Nomad.

drover keeps no CSI plugins or volumes, or variables: those contexts are valid and always
empty.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from actors.api.core.call import Call
from actors.api.core.errors import ApiError, bad_request
from actors.api.core.http_types import ApiResponse
from actors.api.core.scaling_routes import group_policies
from actors.state import StateReader
from contracts.acl import Acl

PREFIX_LIMIT = 20  # Nomad's truncateLimit
FUZZY_LIMIT_QUERY = 20  # Nomad's search.limit_query default
FUZZY_LIMIT_RESULTS = 100  # Nomad's search.limit_results default
FUZZY_MIN_TERM = 2  # Nomad's search.min_term_length default

# Every context `all` expands to, in Nomad's names.
CONTEXTS = (
    "allocs",
    "deployment",
    "evals",
    "jobs",
    "namespaces",
    "node_pools",
    "nodes",
    "plugins",
    "scaling_policy",
    "vars",
    "volumes",
)
_ALWAYS_EMPTY = frozenset({"plugins", "vars", "volumes"})
_FUZZY_PREFIXED = frozenset({"evals", "deployment", "scaling_policy", "volumes"})
_JOB_READ = frozenset({"allocs", "evals", "jobs", "deployment", "scaling_policy"})
_NODE_READ = frozenset({"nodes", "node_pools"})

Match = tuple[int, str, list[str]]  # (score, ID, scope)


# -- the request ------------------------------------------------------------------------------


def _request(call: Call, text_field: str) -> tuple[str, str, str]:
    body = call.json()
    text = body.get(text_field, "")
    if not isinstance(text, str):
        raise bad_request(f"{text_field}: expected a string, got {text!r}")
    context = body.get("Context") or "all"
    if not isinstance(context, str) or (context != "all" and context not in CONTEXTS):
        raise bad_request(
            f"Context: must be one of {', '.join(CONTEXTS)} or 'all' for all contexts;"
            f" got {context!r}"
        )
    namespace = body.get("Namespace") or call.namespace
    if not isinstance(namespace, str):
        raise bad_request(f"Namespace: expected a string, got {namespace!r}")
    return text, context, namespace


def _token_acl(call: Call) -> Acl | None:
    """The caller's ACL; None when ACLs are off (everything may be read)."""
    if not call.backend.acl_enabled:
        return None
    found = call.backend.acl.resolve(call.request.token)
    if found is None:
        raise ApiError(403, "Permission denied")
    return found[1]


def _readable(acl: Acl | None, namespace: str, context: str) -> bool:
    if acl is None or acl.management:
        return True
    if context in _NODE_READ:
        return acl.allows_level("node", False)
    if context == "namespaces":
        return acl.allows(namespace, "read-job") or acl.allows(namespace, "list-jobs")
    if context in _JOB_READ:
        return acl.allows(namespace, "read-job")
    return True


def _contexts(acl: Acl | None, namespace: str, context: str, *, wildcard_ok: bool) -> list[str]:
    """The contexts searched: Nomad's sufficientSearchPerms (a context named but not
    readable is a 403) and filteredSearchContexts (`all` keeps the readable ones)."""
    if context != "all":
        if not (wildcard_ok and namespace == "*") and not _readable(acl, namespace, context):
            raise ApiError(403, "Permission denied")
        return [context]
    return [c for c in CONTEXTS if _readable(acl, namespace, c)]


def _in(namespace: str, wanted: str) -> bool:
    return wanted == "*" or namespace == wanted


def _ns_filter(acl: Acl | None) -> Callable[[str], bool]:
    """Per record: may the token read jobs there (for searches across namespaces)."""
    if acl is None or acl.management:
        return lambda _ns: True
    return lambda ns: acl.allows(ns, "read-job")


# -- what each context holds ------------------------------------------------------------------


def _namespaces(state: StateReader) -> set[str]:
    return {"default", *(j.namespace for j in state.jobs())}


def _node_pools(state: StateReader) -> set[str]:
    return {"default", "all", *(n.node_pool for n in state.nodes())}


def _ids(state: StateReader, context: str, namespace: str, acl: Acl | None) -> Iterator[str]:
    """The searchable IDs of a context, unordered (a single pass over its records)."""
    readable = _ns_filter(acl)
    if context == "jobs":
        yield from (
            j.id for j in state.jobs() if _in(j.namespace, namespace) and readable(j.namespace)
        )
    elif context == "evals":
        yield from (
            e.id for e in state.evals() if _in(e.namespace, namespace) and readable(e.namespace)
        )
    elif context == "allocs":
        yield from (
            a.id for a in state.allocs() if _in(a.namespace, namespace) and readable(a.namespace)
        )
    elif context == "nodes":
        yield from (n.id for n in state.nodes())
    elif context == "node_pools":
        yield from _node_pools(state)
    elif context == "namespaces":
        yield from _namespaces(state)
    elif context == "deployment":
        yield from (
            d.id
            for d in state.deployments()
            if _in(d.namespace, namespace) and readable(d.namespace)
        )
    elif context == "scaling_policy":
        yield from (
            pid for pid, job, _ in group_policies(state, namespace) if readable(job.namespace)
        )


def _first(ids: Iterable[str], prefix: str) -> tuple[list[str], bool]:
    """The first PREFIX_LIMIT IDs in order that start with prefix, and whether more did."""
    found = heapq.nsmallest(PREFIX_LIMIT + 1, (i for i in ids if i.startswith(prefix)))
    return found[:PREFIX_LIMIT], len(found) > PREFIX_LIMIT


# -- prefix search ------------------------------------------------------------------------------


def prefix_search(call: Call) -> ApiResponse:
    prefix, context, namespace = _request(call, "Prefix")
    acl = _token_acl(call)
    contexts = _contexts(acl, namespace, context, wildcard_ok=False)

    def render(state: StateReader) -> Any:
        matches: dict[str, list[str]] = {}
        truncations: dict[str, bool] = {}
        for ctx in contexts:
            found = (
                ([], False)
                if ctx in _ALWAYS_EMPTY
                else _first(_ids(state, ctx, namespace, acl), prefix)
            )
            matches[ctx], truncations[ctx] = found
        return {"Matches": matches, "Truncations": truncations}

    return call.read(_TABLES, render)


_TABLES = ("jobs", "evals", "allocs", "nodes", "deployment")


# -- fuzzy search -------------------------------------------------------------------------------


def fuzzy_search(call: Call) -> ApiResponse:
    text, context, namespace = _request(call, "Text")
    if len(text) < FUZZY_MIN_TERM:
        raise bad_request(
            f"fuzzy search query must be at least {FUZZY_MIN_TERM} characters, got {len(text)}"
        )
    acl = _token_acl(call)
    contexts = _contexts(acl, namespace, context, wildcard_ok=True)
    lowered = text.lower()

    def render(state: StateReader) -> Any:
        matches: dict[str, list[dict[str, Any]]] = {}
        truncations: dict[str, bool] = {}
        for ctx in contexts:
            if ctx in _FUZZY_PREFIXED:
                ids, more = (
                    ([], False)
                    if ctx in _ALWAYS_EMPTY
                    else _first(_ids(state, ctx, namespace, acl), text)
                )
                matches[ctx] = [{"ID": i, "Scope": None} for i in ids]
                truncations[ctx] = more
                continue
            truncations[ctx] = False
            found, cut = _fuzzy(state, ctx, namespace, acl, lowered)
            for sub, items in found.items():
                matches[sub] = [{"ID": i, "Scope": scope} for _, i, scope in items]
            for sub in cut:
                truncations[sub] = True
        return {"Matches": matches, "Truncations": truncations}

    return call.read(_TABLES, render)


def _scanned(records: Iterable[Any], key: Callable[[Any], Any]) -> tuple[list[Any], bool]:
    """The first FUZZY_LIMIT_QUERY records in key order, and whether any was left unread."""
    first = heapq.nsmallest(FUZZY_LIMIT_QUERY + 1, records, key=key)
    return first[:FUZZY_LIMIT_QUERY], len(first) > FUZZY_LIMIT_QUERY


def _fuzzy(
    state: StateReader, ctx: str, namespace: str, acl: Acl | None, text: str
) -> tuple[dict[str, list[Match]], set[str]]:
    """Matches per (sub)context and the (sub)contexts that were truncated."""
    found: dict[str, list[Match]] = {}
    readable = _ns_filter(acl)

    def add(sub: str, name: str, scope: list[str]) -> None:
        at = name.lower().find(text)
        if at >= 0:
            found.setdefault(sub, []).append((at, name, scope))

    limited = False
    if ctx == "jobs":
        jobs, limited = _scanned(
            (j for j in state.jobs() if _in(j.namespace, namespace) and readable(j.namespace)),
            key=lambda j: (j.namespace, j.id),
        )
        for job in jobs:
            _job_matches(job, add)
    elif ctx == "allocs":
        allocs, limited = _scanned(
            (a for a in state.allocs() if _in(a.namespace, namespace) and readable(a.namespace)),
            key=lambda a: a.id,
        )
        for alloc in allocs:
            add("allocs", alloc.name, [alloc.namespace, alloc.id])
    elif ctx == "nodes":
        nodes, limited = _scanned(state.nodes(), key=lambda n: n.id)
        for node in nodes:
            add("nodes", node.name, [node.id])
    elif ctx in ("namespaces", "node_pools"):
        names = _namespaces(state) if ctx == "namespaces" else _node_pools(state)
        first, limited = _scanned(names, key=lambda n: n)
        for name in first:
            add(ctx, name, [])
    return found, _truncated(ctx, found, limited)


def _truncated(ctx: str, found: dict[str, list[Match]], limited: bool) -> set[str]:
    """Sorts each (sub)context's matches and returns those truncated: one with more than
    limit_results matches (cut to the best that many) and, when objects were left unread
    (limit_query), the context and every subcontext that matched."""
    cut = {ctx, *found} if limited else set()
    for sub, items in found.items():
        items.sort(key=lambda m: (m[0], len(m[1]), m[1]))  # best first (Nomad's sortSet)
        if len(items) > FUZZY_LIMIT_RESULTS:
            del items[FUZZY_LIMIT_RESULTS:]
            cut.add(sub)
    return cut


def _job_matches(job: Any, add: Callable[[str, str, list[str]], None]) -> None:
    """Nomad's fuzzyMatchesJob: the job's name, its groups, tasks, and their docker images
    and exec/raw_exec commands."""
    ns = job.namespace
    add("jobs", job.name or job.id, [ns, job.id])
    for group in job.task_groups:
        add("groups", group.name, [ns, job.id])
        for task in group.tasks:
            add("tasks", task.name, [ns, job.id, group.name])
            config = task.config or {}
            if task.driver == "docker" and isinstance(config.get("image"), str):
                add("images", config["image"], [ns, job.id, group.name, task.name])
            elif task.driver in ("exec", "raw_exec") and isinstance(config.get("command"), str):
                add("commands", config["command"], [ns, job.id, group.name, task.name])


ROUTES = [
    ("POST", "/v1/search", prefix_search),
    ("PUT", "/v1/search", prefix_search),
    ("POST", "/v1/search/fuzzy", fuzzy_search),
    ("PUT", "/v1/search/fuzzy", fuzzy_search),
]
