"""What the leader service's tests share: a harness that starts leaders on the flushed Redis
`client` (tests/actors/conftest.py), registers nodes and builds, sends and reads back plans
and requests. Exposed as a fixture (`harness`) because test modules run in importlib mode and
cannot import this file."""

from __future__ import annotations

import pytest
import redis

from actors.leader.service import LeaderService
from actors.streams import StreamBus
from actors.streams.envelope import decode_message, registry_of
from actors.streams.names import StreamNames
from contracts import (
    AllocatedResources,
    Allocation,
    DriverInfo,
    Node,
    NodeResources,
    NodeStatus,
    Plan,
)
from contracts.messages import (
    LeaderRequest,
    LeaderResponse,
    PlanResponse,
    PlanSubmission,
    RequestKind,
)

NAMES = StreamNames("svc")
REPLIES = "svc:reply"
ANSWERS = registry_of(PlanResponse, LeaderResponse)


class LeaderHarness:
    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.names = NAMES
        self.replies = REPLIES  # where the harness's plans ask to be answered
        self.bus = StreamBus(client)

    def leader(self) -> LeaderService:
        service = LeaderService(self.client, NAMES)
        service.start()
        return service

    def send(self, *messages: LeaderRequest | PlanSubmission) -> None:
        """Onto the leader's stream, as workers, agents and the broker send them."""
        self.bus.publish(NAMES.requests, [(type(m).__name__, m) for m in messages])

    def answers(self, stream: str = REPLIES) -> list[object]:
        """Every answer published on a reply stream, oldest first."""
        return [decode_message(fields, ANSWERS)[1] for _, fields in self.client.xrange(stream)]

    def log_length(self) -> int:
        return int(self.client.xlen(NAMES.log))

    def nodes(self, service: LeaderService, count: int, cpu: int = 1000) -> list[str]:
        """`count` ready nodes of `cpu` MHz, registered through the leader."""
        nodes = tuple(
            Node(
                id=f"n{i}",
                name=f"n{i}",
                status=NodeStatus.READY,
                drivers={"mock": DriverInfo()},
                node_resources=NodeResources(cpu=cpu, memory_mb=4096, disk_mb=10_000),
            ).with_computed_class()
            for i in range(count)
        )
        response = service.handle(
            LeaderRequest(RequestKind.UPSERT_NODES, request_id="nodes", nodes=nodes)
        )
        assert response.ok, response.error
        return [n.id for n in nodes]

    def plan(
        self,
        eval_id: str,
        placements: dict[str, int],
        *,
        cpu: int = 100,
        token: str = "",
        job_id: str = "web",
        priority: int = 50,
        attempt: int = 1,
        snapshot_index: int = 0,
    ) -> PlanSubmission:
        """A plan placing `placements[node]` new allocations of `cpu` MHz on each node."""
        allocs = {
            node_id: tuple(
                Allocation(
                    id=f"{eval_id}-{attempt}-{node_id}-{i}",
                    eval_id=eval_id,
                    name=f"{job_id}.g[{i}]",
                    node_id=node_id,
                    job_id=job_id,
                    task_group="g",
                    allocated_resources=AllocatedResources(cpu=cpu, memory_mb=64),
                )
                for i in range(count)
            )
            for node_id, count in placements.items()
        }
        plan = Plan(
            eval_id=eval_id,
            eval_token=token,
            priority=priority,
            job_id=job_id,
            snapshot_index=snapshot_index,
            node_allocation=allocs,
        )
        return PlanSubmission(plan, REPLIES, attempt)


@pytest.fixture
def harness(client: redis.Redis) -> LeaderHarness:
    return LeaderHarness(client)
