"""The system's declared fleets (`drover fleet apply`; a mixin of DroverSystem): simulated
instances hosted by the one agent every declared fleet shares, or a Ray fleet whose
instances are the Ray cluster's nodes. Specs are stored in Redis (`StreamNames.fleets`), so
a restarted system hosts them again, with the count a scaling policy last set."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, replace
from dataclasses import fields as dataclass_fields
from typing import Any

import orjson
import ray
import redis

from actors.agent.core import FleetSpec
from actors.streams.names import StreamNames
from contracts.messages import LeaderRequest, RequestKind
from contracts.share import FLEET_ATTRIBUTE

FLEETS_AGENT = "sim"  # the one agent hosting every simulated fleet, configured or declared
DELETE_DEADLINE_S = 3600.0  # a deleted fleet's drain: Nomad's default drain deadline
REAL_AGENT = "node-"  # agent IDs of the real agents: node-<Ray node ID prefix>


class FleetMethods:
    config: Any  # SystemConfig
    fleet_specs: dict[str, FleetSpec]
    agents: dict[str, Any]
    leader: Any
    _redis: redis.Redis

    def add_simulated_agent(
        self, agent_id: str, fleets: Sequence[FleetSpec], *, simulated: bool = True
    ) -> Any:
        raise NotImplementedError

    def apply_fleet(self, spec: FleetSpec, *, store: bool = True) -> int:
        """Declare (or redeclare) a simulated fleet: its instances are added to the one agent
        that hosts every declared fleet, so a fleet costs its nodes' records, not a process.
        A redeclared fleet's instances it no longer declares are removed."""
        current = self.fleet_specs.get(spec.name)
        if store and current is not None and current.deleting:
            self._forget_deleted_fleets()
            if spec.name in self.fleet_specs:
                raise ValueError(
                    f'fleet "{spec.name}" is being deleted (its instances are draining): '
                    "apply it again once it is gone"
                )
        if spec.backend == "ray":
            taken = [s.name for s in self.fleet_specs.values() if s.backend == "ray"]
            if taken and spec.name not in taken:
                raise ValueError(
                    f'the Ray cluster\'s nodes are already the instances of fleet "{taken[0]}":'
                    " delete it first"
                )
            real = self._real_agents()
            if not real:
                raise ValueError(
                    "a ray fleet's instances are the Ray cluster's nodes, and this agent runs "
                    "none (start it with -ray-address to join a Ray cluster)"
                )
        if store:
            self._redis.hset(
                StreamNames(self.config.prefix).fleets, spec.name, orjson.dumps(asdict(spec))
            )
        if spec.backend == "ray":
            joined = ray.get([agent.join_fleet.remote(spec) for agent in real])
            node_ids = [node_id for ids in joined for node_id in ids]
            spec = replace(spec, count=len(node_ids))
        else:
            node_ids = ray.get(self._fleet_agent().host_fleet.remote(spec))
        self.fleet_specs[spec.name] = spec
        self._wait_for_nodes(set(node_ids), fleet=spec.name)
        return spec.count

    def delete_fleet(self, name: str, deadline_s: float = DELETE_DEADLINE_S) -> int:
        """Delete a declared fleet. A simulated fleet's instances are drained (Nomad's drain
        with `deadline_s`: service work migrates, runs and batch work finish or are forced
        off at the deadline; < 0 forces at once) and each is removed once drained; the fleet
        is listed as deleting until then (a system restarted meanwhile removes what is left:
        `_finish_deletion`). A Ray fleet's instances stay in the cluster, outside any fleet.
        Returns how many instances it had; KeyError if no such fleet was declared."""
        self._forget_deleted_fleets()
        if name not in self.fleet_specs:
            raise KeyError(name)
        spec = self.fleet_specs[name]
        if spec.backend == "ray":
            self._redis.hdel(StreamNames(self.config.prefix).fleets, name)
            del self.fleet_specs[name]
            return sum(ray.get([a.leave_fleet.remote(name) for a in self._real_agents()]))
        deleting = replace(spec, deleting=True)
        self._redis.hset(
            StreamNames(self.config.prefix).fleets, name, orjson.dumps(asdict(deleting))
        )
        self.fleet_specs[name] = deleting
        return int(ray.get(self._fleet_agent().retire_fleet.remote(name, deadline_s)))

    def _finish_deletion(self, name: str) -> None:
        """A fleet being deleted when the system stopped: its simulated instances' agent
        stopped with it, so there is nothing left to drain; the instances still registered
        are removed (Nomad's node purge) and the fleet is forgotten."""
        left = tuple(
            n.id
            for n in ray.get(self.leader.nodes.remote())
            if n.attributes.get(FLEET_ATTRIBUTE) == name
        )
        if left:
            ray.get(
                self.leader.request.remote(
                    LeaderRequest(
                        RequestKind.DELETE_NODES, request_id=str(uuid.uuid4()), node_ids=left
                    )
                )
            )
        self._redis.hdel(StreamNames(self.config.prefix).fleets, name)

    def _forget_deleted_fleets(self) -> None:
        """Deleting fleets whose last instance is gone are forgotten."""
        deleting = [s.name for s in self.fleet_specs.values() if s.deleting]
        if not deleting:
            return
        agent = self._fleet_agent()
        left = ray.get([agent.fleet_instances.remote(name) for name in deleting])
        for name, count in zip(deleting, left, strict=True):
            if count == 0:
                self._redis.hdel(StreamNames(self.config.prefix).fleets, name)
                self.fleet_specs.pop(name, None)

    def _real_agents(self) -> list[Any]:
        # A copy first: the node watch adds agents from its own thread.
        return [a for agent_id, a in list(self.agents.items()) if agent_id.startswith(REAL_AGENT)]

    def _fleet_agent(self) -> Any:
        agent = self.agents.get(FLEETS_AGENT)
        if agent is None:
            agent = self.add_simulated_agent(FLEETS_AGENT, [], simulated=True)
            ray.get(agent.ready.remote())
        return agent

    def _wait_for_nodes(
        self, node_ids: set[str], fleet: str | None = None, timeout_s: float = 60.0
    ) -> None:
        """Wait until the leader knows every node. With `fleet`, until it knows each as an
        instance of that fleet: a Ray node joining a fleet is already known, outside it."""
        deadline = time.monotonic() + timeout_s
        while node_ids:
            known = {
                n.id
                for n in ray.get(self.leader.nodes.remote())
                if fleet is None or n.attributes.get(FLEET_ATTRIBUTE) == fleet
            }
            missing = node_ids - known
            if not missing:
                return
            if time.monotonic() > deadline:
                where = f' as instances of fleet "{fleet}"' if fleet else ""
                raise TimeoutError(
                    f"{len(missing)} nodes not registered{where} after {timeout_s:.0f}s"
                )
            time.sleep(0.2)  # each poll copies every node out of the leader

    def fleets(self) -> list[FleetSpec]:
        """The declared fleets, with the count a scaling policy last set (the autoscaler
        writes it to the stored spec)."""
        self._forget_deleted_fleets()
        stored = {spec.name: spec.count for spec in self._declared_fleets()}
        for name, spec in list(self.fleet_specs.items()):
            count = stored.get(name)
            if count is not None and count != spec.count and spec.backend != "ray":
                self.fleet_specs[name] = replace(spec, count=count)
        return list(self.fleet_specs.values())

    def _declared_fleets(self) -> list[FleetSpec]:
        """The stored specs, as restored at start: `count` is the last one a scaling policy
        set (the autoscaler writes it with `last_scaled_s`, persist.py); keys a FleetSpec
        does not have are the autoscaler's (or a newer drover's) and are left out."""
        raw = self._redis.hgetall(StreamNames(self.config.prefix).fleets)
        return [spec_from_stored(orjson.loads(value)) for value in raw.values()]


_SPEC_FIELDS = frozenset(f.name for f in dataclass_fields(FleetSpec))


def spec_from_stored(stored: dict[str, Any]) -> FleetSpec:
    """A FleetSpec from its stored JSON fields, ignoring keys it does not have."""
    known = {k: v for k, v in stored.items() if k in _SPEC_FIELDS}
    known["drivers"] = tuple(known.get("drivers", ("mock",)))
    return FleetSpec(**known)
