"""The route table and the dispatch: path matching, the ACL check, errors to status codes.

Paths follow Nomad's `/v1` API (`nomad/command/agent/http.go`), `/v1/metrics` included
(metrics_routes.py); fleets and runs
(dstack_routes.py) and a scaling policy's decisions (scaling_routes.py) are drover's own.
With ACLs enabled a request needs an `X-Nomad-Token` whose policies grant what its route
needs (acl_routes.py; 403 with "Permission denied" otherwise, as Nomad answers).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import unquote

from actors.api.core import (
    acl_routes,
    agent_routes,
    client_commands,
    client_routes,
    cluster,
    deployment_routes,
    dstack_routes,
    event_routes,
    jobs,
    launch_routes,
    metrics_routes,
    operator_routes,
    scaling_routes,
    search_routes,
)
from actors.api.core.backend import Backend
from actors.api.core.call import Call, Handler, PendingWrite
from actors.api.core.errors import ApiError, from_exception
from actors.api.core.http_types import ApiRequest, ApiResponse
from actors.api.core.request_ids import with_request_id
from contracts.errors import ConflictError, NotFoundError, ValidationError
from contracts.messages import LeaderResponse

log = logging.getLogger(__name__)

_Answer = TypeVar("_Answer")


@dataclass(frozen=True, slots=True)
class WriteInFlight:
    """A request whose write was sent (Api.begin): `answer` resolves with the leader's
    response, which `Api.finish` turns into the request's answer."""

    request: ApiRequest
    pending: PendingWrite
    answer: Future[LeaderResponse]
    timeout_s: float
    request_id: str  # the id the leader request went with: a 503 for it names it


_ROUTES: list[tuple[str, str, Handler]] = [
    ("GET", "/v1/jobs", jobs.list_jobs),
    ("POST", "/v1/jobs", jobs.register_job),
    ("PUT", "/v1/jobs", jobs.register_job),
    ("POST", "/v1/jobs/parse", jobs.parse_job),
    ("GET", "/v1/job/:id", jobs.get_job),
    ("POST", "/v1/job/:id", jobs.register_job),
    ("PUT", "/v1/job/:id", jobs.register_job),
    ("DELETE", "/v1/job/:id", jobs.stop_job),
    ("GET", "/v1/job/:id/versions", jobs.job_versions),
    ("GET", "/v1/job/:id/allocations", jobs.job_allocations),
    ("GET", "/v1/job/:id/evaluations", jobs.job_evaluations),
    ("GET", "/v1/job/:id/summary", jobs.job_summary),
    ("POST", "/v1/job/:id/evaluate", jobs.evaluate_job),
    ("PUT", "/v1/job/:id/evaluate", jobs.evaluate_job),
    ("POST", "/v1/job/:id/plan", jobs.plan),
    ("PUT", "/v1/job/:id/plan", jobs.plan),
    ("POST", "/v1/job/:id/revert", jobs.revert),
    ("PUT", "/v1/job/:id/revert", jobs.revert),
    ("POST", "/v1/job/:id/stable", jobs.stable),
    ("PUT", "/v1/job/:id/stable", jobs.stable),
    ("GET", "/v1/job/:id/scale", jobs.scale_status),
    ("POST", "/v1/job/:id/scale", jobs.scale),
    ("POST", "/v1/job/:id/dispatch", launch_routes.dispatch_job),
    ("PUT", "/v1/job/:id/dispatch", launch_routes.dispatch_job),
    ("POST", "/v1/job/:id/periodic/force", launch_routes.force_periodic),
    ("PUT", "/v1/job/:id/periodic/force", launch_routes.force_periodic),
    ("PUT", "/v1/job/:id/scale", jobs.scale),
    ("GET", "/v1/scaling/policies", scaling_routes.list_policies),
    ("POST", "/v1/scaling/policies", scaling_routes.apply_policy_file),
    ("PUT", "/v1/scaling/policies", scaling_routes.apply_policy_file),
    ("GET", "/v1/scaling/policy/:id", scaling_routes.get_policy),
    ("DELETE", "/v1/scaling/policy/:id", scaling_routes.delete_policy),
    ("GET", "/v1/scaling/policy/:id/decisions", scaling_routes.policy_decisions),
    ("GET", "/v1/evaluations", cluster.list_evals),
    ("GET", "/v1/evaluation/:id", cluster.get_eval),
    ("GET", "/v1/evaluation/:id/allocations", cluster.eval_allocations),
    ("GET", "/v1/allocations", cluster.list_allocs),
    ("GET", "/v1/allocation/:id", cluster.get_alloc),
    ("POST", "/v1/allocation/:id/stop", cluster.stop_alloc),
    ("PUT", "/v1/allocation/:id/stop", cluster.stop_alloc),
    ("GET", "/v1/nodes", cluster.list_nodes),
    ("GET", "/v1/node/:id", cluster.get_node),
    ("GET", "/v1/node/:id/allocations", cluster.node_allocations),
    ("POST", "/v1/node/:id/drain", cluster.drain_node),
    ("PUT", "/v1/node/:id/drain", cluster.drain_node),
    ("POST", "/v1/node/:id/eligibility", cluster.node_eligibility),
    ("PUT", "/v1/node/:id/eligibility", cluster.node_eligibility),
    ("POST", "/v1/node/:id/evaluate", cluster.evaluate_node),
    ("PUT", "/v1/node/:id/evaluate", cluster.evaluate_node),
    ("POST", "/v1/system/gc", cluster.system_gc),
    ("PUT", "/v1/system/gc", cluster.system_gc),
    *search_routes.ROUTES,
    ("GET", "/v1/fleets", dstack_routes.list_fleets),
    ("POST", "/v1/fleets", dstack_routes.apply_fleet),
    ("PUT", "/v1/fleets", dstack_routes.apply_fleet),
    ("GET", "/v1/fleet/:name", dstack_routes.get_fleet),
    ("DELETE", "/v1/fleet/:name", dstack_routes.delete_fleet),
    ("GET", "/v1/runs", dstack_routes.list_runs),
    ("POST", "/v1/runs", dstack_routes.submit_run),
    ("PUT", "/v1/runs", dstack_routes.submit_run),
    ("GET", "/v1/run/:name", dstack_routes.get_run),
    ("POST", "/v1/run/:name/stop", dstack_routes.stop_run),
    ("PUT", "/v1/run/:name/stop", dstack_routes.stop_run),
    ("GET", "/v1/status/leader", cluster.leader),
    ("GET", "/v1/status/peers", cluster.peers),
    ("GET", "/v1/regions", cluster.regions),
    *acl_routes.ROUTES,
    *agent_routes.ROUTES,
    *client_routes.ROUTES,
    *client_commands.ROUTES,
    ("GET", "/v1/metrics", metrics_routes.metrics),
    *event_routes.ROUTES,
    *deployment_routes.ROUTES,
    *operator_routes.ROUTES,
]


def _compile(pattern: str) -> re.Pattern[str]:
    return re.compile("^" + re.sub(r":(\w+)", r"(?P<\1>[^/]+)", pattern) + "/?$")


class Api:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.routes = [
            (method, _compile(path), handler, acl_routes.need_of(method, path), path)
            for method, path, handler in _ROUTES
        ]

    def endpoints(self) -> list[tuple[str, str]]:
        """(method, path) of every route, for documentation and tests."""
        return [(method, path) for method, path, _ in _ROUTES]

    def handle(self, request: ApiRequest) -> ApiResponse:
        """The answer to `request`, a write waited for in place."""
        return self._guarded(request, lambda: self._waited(self._dispatch(request)))

    def begin(self, request: ApiRequest) -> ApiResponse | WriteInFlight:
        """`handle` up to a write handler's last step: its write is sent, not waited for. The
        HTTP server waits for the answer without holding a thread, then calls `finish`."""
        return self._guarded(request, lambda: self._started(request, self._dispatch(request)))

    def finish(self, flight: WriteInFlight, answer: Future[LeaderResponse]) -> ApiResponse:
        """The answer to a request `begin` left in flight, once `answer` (its `answer`) is
        done: the leader's response rendered, or its error answered as `handle` would."""
        if answer.cancelled():
            return ApiResponse(
                503, f"request {flight.request_id} was given up before the leader answered"
            )
        return self._guarded(flight.request, lambda: flight.pending.answer(answer.result()))

    def _waited(self, result: ApiResponse | PendingWrite) -> ApiResponse:
        if isinstance(result, PendingWrite):
            return result.answer(self.backend.write(result.request))
        return result

    def _started(
        self, request: ApiRequest, result: ApiResponse | PendingWrite
    ) -> ApiResponse | WriteInFlight:
        if isinstance(result, PendingWrite):
            sent = with_request_id(result.request)
            answer = self.backend.submit(sent)
            timeout_s = self.backend.write_timeout_s
            return WriteInFlight(request, result, answer, timeout_s, sent.request_id)
        return result

    def _guarded(self, request: ApiRequest, answer: Callable[[], _Answer]) -> _Answer | ApiResponse:
        try:
            return answer()
        except ApiError as exc:
            return ApiResponse(exc.status, exc.message)
        except (ValidationError, ConflictError, NotFoundError) as exc:
            error = from_exception(exc)
            return ApiResponse(error.status, error.message)
        except Exception as exc:  # a bug: answer 500 with the reason, keep serving
            log.exception("API %s %s failed", request.method, request.path)
            return ApiResponse(500, f"{type(exc).__name__}: {exc}")

    def _dispatch(self, request: ApiRequest) -> ApiResponse | PendingWrite:
        path_matched = False
        for method, pattern, handler, need, path in self.routes:
            match = pattern.match(request.path)
            if match is None:
                continue
            path_matched = True
            if method != request.method:
                continue
            self._authorize(request, need, path)
            params = {k: unquote(v) for k, v in match.groupdict().items()}
            return handler(Call(request, params, self.backend))
        if path_matched:
            raise ApiError(405, f"method {request.method} not allowed on {request.path}")
        raise ApiError(404, f"no such endpoint: {request.path}")

    def _authorize(self, request: ApiRequest, need: acl_routes.Need, path: str) -> None:
        """Nomad's check: a 403 "Permission denied" for a missing or unknown token, or one
        whose policies do not grant what the route needs (acl_routes.NEEDS)."""
        if not self.backend.acl_enabled or need.kind == "open":
            return
        found = self.backend.acl.resolve(request.token)
        if found is None:
            raise ApiError(403, "Permission denied")
        namespace = acl_routes.request_namespace(request, request.method, path)
        if not acl_routes.permits(found[1], need, namespace):
            raise ApiError(403, "Permission denied")
