"""Resources asked for by tasks, offered by nodes and granted to allocations."""

from __future__ import annotations

from dataclasses import dataclass, field

from contracts.constraints import Affinity, Constraint
from contracts.fast_init import install_fast_inits


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """`device "nvidia/gpu/A100" { count = 2 }`.

    The name is `type`, `vendor/type` or `vendor/type/model`.
    """

    name: str = ""
    count: int = 1
    constraints: tuple[Constraint, ...] = field(default_factory=tuple)
    affinities: tuple[Affinity, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class Resources:
    """A task's ask (Nomad's defaults: 100 MHz, 300 MB)."""

    cpu: int = 100
    memory_mb: int = 300
    disk_mb: int = 0
    devices: tuple[DeviceRequest, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class DeviceInstance:
    id: str = ""
    healthy: bool = True


@dataclass(frozen=True, slots=True)
class NodeDeviceResource:
    """A group of identical devices on a node, e.g. 8 x nvidia/gpu/H100."""

    vendor: str = ""
    type: str = ""
    name: str = ""
    instances: tuple[DeviceInstance, ...] = field(default_factory=tuple)
    attributes: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.vendor}/{self.type}/{self.name}"

    def matches(self, request_name: str) -> bool:
        """Nomad's device name matching: `type`, `vendor/type` or `vendor/type/model`."""
        parts = request_name.split("/")
        if len(parts) == 1:
            return parts[0] == self.type
        if len(parts) == 2:
            return parts[0] == self.vendor and parts[1] == self.type
        return parts[0] == self.vendor and parts[1] == self.type and parts[2] == self.name

    def healthy_ids(self) -> tuple[str, ...]:
        return tuple(i.id for i in self.instances if i.healthy)


@dataclass(frozen=True, slots=True)
class NodeResources:
    """What a node offers (cpu in MHz). Flattened form of Nomad's NodeResources."""

    cpu: int = 0
    memory_mb: int = 0
    disk_mb: int = 0
    devices: tuple[NodeDeviceResource, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class ReservedResources:
    """Held back on a node for the OS and agent; never offered to allocations."""

    cpu: int = 0
    memory_mb: int = 0
    disk_mb: int = 0


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    vendor: str = ""
    type: str = ""
    name: str = ""
    device_ids: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class AllocatedResources:
    """What an allocation holds on its node: summed over its tasks, with device instances."""

    cpu: int = 0
    memory_mb: int = 0
    disk_mb: int = 0
    devices: tuple[AllocatedDevice, ...] = field(default_factory=tuple)


install_fast_inits(__name__)
