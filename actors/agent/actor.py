"""The client agent's Ray shell (see service.py), in one of two modes:

- simulated: one actor hosts the virtual nodes of one or more fleet specs, with the mock and
  raw_exec drivers (no process per node); fleets declared while running are added to it and
  removed from it (`host_fleet`, `release_fleet`): a fleet is data, not a process;
- real: one actor per Ray node, pinned to it with hard node affinity (the agent dies with its
  node, which is exactly what should mark the node down); its node is fingerprinted from
  Ray's view of that node (CPU, memory, GPUs and accelerator type) and it also runs tasks
  with the `ray` driver.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import ray

from actors.agent.core import (
    FleetSpec,
    builtin_drivers,
    enabled_drivers,
    nodes_from_ray,
    simulated_nodes,
)
from actors.agent.core.fingerprint import fleet_member, without_fleet
from actors.agent.core.storage import storage_of
from actors.agent.ray_driver import RayDriver
from actors.agent.service import AgentService
from actors.runtime.shell import ServiceShell, actor_telemetry
from actors.streams.client import connect
from actors.streams.names import StreamNames
from contracts import DrainStrategy, Node
from contracts.share import FLEET_ATTRIBUTE


class AgentActor(ServiceShell):
    def __init__(
        self,
        agent_id: str,
        redis_url: str,
        prefix: str = "drover",
        *,
        fleets: Sequence[FleetSpec] = (),
        simulated: bool = False,
        data_dir: str = "/tmp/drover/allocs",
        raw_exec: bool = False,
        heartbeat_s: float = 2.0,
        mhz_per_cpu: int = 1000,
        telemetry_dir: str | None = None,
        tracing: bool = True,
        usage_interval_s: float = 1.0,
        load_time_factor: float = 1.0,
        node_name: str = "",
    ) -> None:
        """`usage_interval_s`: how often the allocations' use is published on the usage
        stream (0: never; AgentService); `load_time_factor`: the shared clock factor of
        mock tasks' load models (simulated seconds per real second); `node_name`: the real
        node's name (the agent's `-node NAME`; default: its host name). A real node's disk
        is the free space of the file system holding `data_dir`."""
        self.telemetry = actor_telemetry("agent", agent_id, telemetry_dir, tracing)
        drivers = builtin_drivers(
            data_dir=Path(data_dir) / agent_id,
            raw_exec_enabled=raw_exec,
            mhz_per_cpu=mhz_per_cpu,
            load_time_factor=load_time_factor,
        )
        nodes: list[Node]
        if fleets or simulated:
            nodes = [node for spec in fleets for node in simulated_nodes(spec)]
        else:
            node_id = ray.get_runtime_context().get_node_id()
            ray_driver = RayDriver(node_id, mhz_per_cpu=mhz_per_cpu)
            drivers[ray_driver.name] = ray_driver
            found = nodes_from_ray(
                ray.nodes(),
                mhz_per_cpu=mhz_per_cpu,
                drivers=enabled_drivers(drivers),
                storage=storage_of(data_dir),
                names={node_id: node_name} if node_name else None,
            )
            nodes = [n for n in found if n.id == node_id]
        # Simulated fleets' specs, so the autoscaler can grow a fleet by count (`scale_fleet`).
        self._specs: dict[str, FleetSpec] = {spec.name: spec for spec in fleets}
        self._serve(
            AgentService(
                agent_id,
                connect(redis_url, client_name=f"drover-{agent_id}"),
                StreamNames(prefix),
                nodes,
                drivers,
                heartbeat_s=heartbeat_s,
                telemetry=self.telemetry,
                work_dir=Path(data_dir) / agent_id,
                usage_interval_s=usage_interval_s,
                mhz_per_cpu=mhz_per_cpu,
            )
        )

    def node_ids(self) -> list[str]:
        return list(self.service.node_ids)

    def host_fleet(self, spec: FleetSpec) -> list[str]:
        """Host a simulated fleet's instances (a redeclared fleet: what it declares now;
        instances it no longer declares are released). Returns the fleet's node IDs."""
        self._specs[spec.name] = spec
        nodes = simulated_nodes(spec)
        keep = {n.id for n in nodes}
        gone = [
            n.id
            for n in self.service.nodes
            if n.attributes.get(FLEET_ATTRIBUTE) == spec.name and n.id not in keep
        ]
        self.service.release(gone)
        self.service.host(nodes)
        return sorted(keep)

    def join_fleet(self, spec: FleetSpec) -> list[str]:
        """A Ray-backed fleet: this agent's real node becomes one of its instances (split into
        the fleet's blocks) and is registered again. Returns the node IDs."""
        nodes = [fleet_member(n, spec) for n in self.service.nodes]
        self.service.host(nodes)
        return [n.id for n in nodes]

    def leave_fleet(self, name: str) -> int:
        """The Ray-backed fleet was deleted: the real node stays, outside any fleet."""
        nodes = [
            without_fleet(n)
            for n in self.service.nodes
            if n.attributes.get(FLEET_ATTRIBUTE) == name
        ]
        if nodes:
            self.service.host(nodes)
        return len(nodes)

    def retire_fleet(self, name: str, deadline_s: float) -> int:
        """Drain a fleet's instances, removing each once drained (AgentService.retire).
        Returns how many instances are retiring."""
        ids = [n.id for n in self.service.nodes if n.attributes.get(FLEET_ATTRIBUTE) == name]
        return self.service.retire(ids, DrainStrategy(deadline_s=deadline_s))

    def fleet_instances(self, name: str) -> int:
        """How many instances of `name` this agent still hosts."""
        return sum(1 for n in self.service.nodes if n.attributes.get(FLEET_ATTRIBUTE) == name)

    def release_fleet(self, name: str) -> int:
        """Stop hosting a fleet's instances; the leader removes them (see AgentService.release).
        Returns how many instances there were."""
        ids = [n.id for n in self.service.nodes if n.attributes.get(FLEET_ATTRIBUTE) == name]
        self.service.release(ids)
        return len(ids)

    def scale_fleet(self, name: str, count: int) -> list[str]:
        """Grow a simulated fleet to `count` instances not on their way out, adding
        `<name>-NNNN` instances numbered after the highest hosted (a removed instance's name,
        and so its node ID, is not reused while others follow it). Returns the added node
        IDs. Shrinking is `retire_instances`: the caller picks which instances go."""
        spec = self._specs.get(name)
        if spec is None:
            raise KeyError(f'no simulated fleet "{name}" is hosted here')
        if spec.backend != "simulated":
            raise ValueError(f'fleet "{name}" is a {spec.backend} fleet, not simulated')
        mine = [n for n in self.service.nodes if n.attributes.get(FLEET_ATTRIBUTE) == name]
        staying = [n for n in mine if n.id not in self.service.retirement]
        missing = count - len(staying)
        if missing <= 0:
            return []
        prefix = f"{name}-"
        taken = [int(n.name[len(prefix) :]) for n in mine if n.name[len(prefix) :].isdigit()]
        start = max(taken, default=-1) + 1
        nodes = simulated_nodes(spec, range(start, start + missing))
        self.service.host(nodes)
        return [n.id for n in nodes]

    def retire_instances(self, node_ids: list[str], deadline_s: float) -> int:
        """Drain hosted instances, removing each once drained (a fleet scaled in).
        Returns how many are retiring."""
        return self.service.retire(node_ids, DrainStrategy(deadline_s=deadline_s))
