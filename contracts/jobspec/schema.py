"""The Nomad job schema both front ends walk: HCL names, JSON names, kinds and allow-lists.

One table serves HCL and JSON so the two formats cannot drift apart. Each walker turns its
input into a "normalized" dict keyed by the HCL name (`memory`, `size`, `attribute`) that holds
only the fields the user actually set; `build.py` turns that into records. Keeping presence is
what lets Nomad's defaults that depend on other fields (count from scaling.min, group update
merged over the job's) be applied faithfully.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from contracts.fast_init import install_fast_inits
from contracts.job import MIGRATE_HEALTH_CHECKS, JobType


class Kind(Enum):
    """Value kinds; the value is the wording used in type errors."""

    STR = "a string"
    INT = "an integer"
    POS_INT = "a positive integer"
    NONNEG_INT = "a non-negative integer"
    BOOL = "a boolean"
    DURATION = "a duration"
    STRS = "a list of strings"
    STR_MAP = "a map of strings"
    ANY_MAP = "an object"
    CHOICE = "one of"
    OBJ = "a block"
    OBJS = "a list of blocks"

    # By identity, as members compare: Enum's own hash (of the name) is a Python call, and
    # a job's parse looks a kind up in SCALARS for every field it reads.
    __hash__ = object.__hash__


SCALARS = frozenset(
    {Kind.STR, Kind.INT, Kind.POS_INT, Kind.NONNEG_INT, Kind.BOOL, Kind.DURATION, Kind.CHOICE}
)


@dataclass(frozen=True, slots=True)
class Field:
    """One modelled field. `json=None`: HCL only; `hcl=False`: JSON only (e.g. a label)."""

    key: str
    json: str | None
    kind: Kind
    obj: Obj | None = None
    hcl: bool = True
    label_key: str | None = None  # HCL: blocks carry one label, stored under this key
    choices: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Ignored:
    """A Nomad field drover accepts but does not model: a warning when set to a non-default."""

    hcl: str | None
    json: str | None
    default: Any = None


@dataclass(frozen=True, slots=True)
class Obj:
    """One Nomad object (job, group, resources, ...): its fields and what is allowed unmodelled."""

    name: str
    fields: tuple[Field, ...]
    ignored: tuple[Ignored, ...] = ()
    # Server-owned JSON fields (indexes, status): skipped silently, never warned about.
    silent_json: frozenset[str] = frozenset()
    required: frozenset[str] = frozenset()
    hcl_fields: Mapping[str, Field] = field(init=False, repr=False, compare=False)
    json_fields: Mapping[str, Field] = field(init=False, repr=False, compare=False)
    # The same, by the name as Nomad spells it: what clients send, found without lower().
    json_exact: Mapping[str, Field] = field(init=False, repr=False, compare=False)
    required_fields: tuple[Field, ...] = field(init=False, repr=False, compare=False)
    hcl_ignored: Mapping[str, Ignored] = field(init=False, repr=False, compare=False)
    json_ignored: Mapping[str, Ignored] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Go's encoding/json matches field names case-insensitively; so do we.
        set_ = object.__setattr__
        set_(self, "hcl_fields", {f.key: f for f in self.fields if f.hcl})
        set_(self, "json_fields", {f.json.lower(): f for f in self.fields if f.json})
        set_(self, "json_exact", {f.json: f for f in self.fields if f.json})
        set_(self, "required_fields", tuple(f for f in self.fields if f.key in self.required))
        set_(self, "hcl_ignored", {i.hcl: i for i in self.ignored if i.hcl})
        set_(self, "json_ignored", {i.json.lower(): i for i in self.ignored if i.json})
        set_(self, "silent_json", frozenset(s.lower() for s in self.silent_json))


def _target_fields(*extra: Field) -> tuple[Field, ...]:
    return (
        Field("attribute", "LTarget", Kind.STR),
        Field("value", "RTarget", Kind.STR),
        Field("operator", "Operand", Kind.STR),
        *extra,
    )


# HCL shorthands (jobspec2 decodeConstraint): `regexp = "x"` means operator regexp, value x.
SHORTHAND_RTARGET = ("version", "semver", "regexp", "set_contains", "set_contains_all")
SHORTHAND_RTARGET_AFFINITY = (*SHORTHAND_RTARGET, "set_contains_any")
SHORTHAND_LTARGET = ("distinct_property", "is_set", "is_not_set")

CONSTRAINT = Obj(
    "constraint",
    _target_fields(
        *(Field(k, None, Kind.STR) for k in (*SHORTHAND_RTARGET, "set_contains_any")),
        *(Field(k, None, Kind.STR) for k in SHORTHAND_LTARGET),
        Field("distinct_hosts", None, Kind.BOOL),
    ),
)

AFFINITY = Obj(
    "affinity",
    _target_fields(
        Field("weight", "Weight", Kind.INT),
        *(Field(k, None, Kind.STR) for k in SHORTHAND_RTARGET_AFFINITY),
    ),
)

SPREAD_TARGET = Obj(
    "target",
    (
        Field("value", "Value", Kind.STR, hcl=False),
        Field("percent", "Percent", Kind.NONNEG_INT),
    ),
)

SPREAD = Obj(
    "spread",
    (
        Field("attribute", "Attribute", Kind.STR),
        Field("weight", "Weight", Kind.INT),
        Field("target", "SpreadTarget", Kind.OBJS, SPREAD_TARGET, label_key="value"),
    ),
)

SCALING = Obj(
    "scaling",
    (
        Field("min", "Min", Kind.INT),
        Field("max", "Max", Kind.INT),
        Field("enabled", "Enabled", Kind.BOOL),
        Field("type", "Type", Kind.STR),
        Field("policy", "Policy", Kind.ANY_MAP),
    ),
    silent_json=frozenset({"ID", "Namespace", "Target", "CreateIndex", "ModifyIndex"}),
    required=frozenset({"max"}),
)

HEALTH_CHECKS = ("checks", "task_states", "manual")

UPDATE = Obj(
    "update",
    (
        Field("max_parallel", "MaxParallel", Kind.INT),
        Field("stagger", "Stagger", Kind.DURATION),
        Field("min_healthy_time", "MinHealthyTime", Kind.DURATION),
        Field("healthy_deadline", "HealthyDeadline", Kind.DURATION),
        Field("auto_revert", "AutoRevert", Kind.BOOL),
        Field("canary", "Canary", Kind.INT),
        Field("auto_promote", "AutoPromote", Kind.BOOL),
        Field("progress_deadline", "ProgressDeadline", Kind.DURATION),
        Field("health_check", "HealthCheck", Kind.CHOICE, choices=HEALTH_CHECKS),
    ),
)

MIGRATE = Obj(
    "migrate",
    (
        Field("max_parallel", "MaxParallel", Kind.INT),
        Field("health_check", "HealthCheck", Kind.CHOICE, choices=MIGRATE_HEALTH_CHECKS),
        Field("min_healthy_time", "MinHealthyTime", Kind.DURATION),
        Field("healthy_deadline", "HealthyDeadline", Kind.DURATION),
    ),
)

RESCHEDULE = Obj(
    "reschedule",
    (
        Field("attempts", "Attempts", Kind.INT),
        Field("interval", "Interval", Kind.DURATION),
        Field("delay", "Delay", Kind.DURATION),
        Field("unlimited", "Unlimited", Kind.BOOL),
    ),
    ignored=(Ignored("delay_function", "DelayFunction"), Ignored("max_delay", "MaxDelay")),
)

PERIODIC = Obj(
    "periodic",
    (
        Field("cron", "Spec", Kind.STR),
        Field("crons", "Specs", Kind.STRS),
        Field("spec_type", "SpecType", Kind.CHOICE, choices=("cron",)),
        Field("prohibit_overlap", "ProhibitOverlap", Kind.BOOL),
        Field("time_zone", "TimeZone", Kind.STR),
        Field("enabled", "Enabled", Kind.BOOL),
    ),
)

PARAMETERIZED = Obj(
    "parameterized",
    (
        Field("payload", "Payload", Kind.CHOICE, choices=("optional", "required", "forbidden")),
        Field("meta_required", "MetaRequired", Kind.STRS),
        Field("meta_optional", "MetaOptional", Kind.STRS),
    ),
)

EPHEMERAL_DISK = Obj(
    "ephemeral_disk",
    (Field("size", "SizeMB", Kind.NONNEG_INT),),
    ignored=(Ignored("sticky", "Sticky", False), Ignored("migrate", "Migrate", False)),
)

DEVICE = Obj(
    "device",
    (
        Field("name", "Name", Kind.STR, hcl=False),
        Field("count", "Count", Kind.INT),
        Field("constraint", "Constraints", Kind.OBJS, CONSTRAINT),
        Field("affinity", "Affinities", Kind.OBJS, AFFINITY),
    ),
)

RESOURCES = Obj(
    "resources",
    (
        Field("cpu", "CPU", Kind.POS_INT),
        Field("memory", "MemoryMB", Kind.POS_INT),
        Field("disk", "DiskMB", Kind.NONNEG_INT),
        Field("device", "Devices", Kind.OBJS, DEVICE, label_key="name"),
    ),
    ignored=(
        Ignored("cores", "Cores", 0),
        Ignored("memory_max", "MemoryMaxMB", 0),
        Ignored("network", "Networks"),
        Ignored("numa", "NUMA"),
        Ignored("secrets", "SecretsMB", 0),
        Ignored("iops", "IOPS", 0),
    ),
)

DISPATCH_PAYLOAD = Obj("dispatch_payload", (Field("file", "File", Kind.STR),))

TASK = Obj(
    "task",
    (
        Field("name", "Name", Kind.STR, hcl=False),
        Field("driver", "Driver", Kind.STR),
        Field("user", "User", Kind.STR),
        Field("config", "Config", Kind.ANY_MAP),
        Field("env", "Env", Kind.STR_MAP),
        Field("meta", "Meta", Kind.STR_MAP),
        Field("resources", "Resources", Kind.OBJ, RESOURCES),
        Field("constraint", "Constraints", Kind.OBJS, CONSTRAINT),
        Field("affinity", "Affinities", Kind.OBJS, AFFINITY),
        Field("kill_timeout", "KillTimeout", Kind.DURATION),
        Field("dispatch_payload", "DispatchPayload", Kind.OBJ, DISPATCH_PAYLOAD),
    ),
    ignored=(
        Ignored("lifecycle", "Lifecycle"),
        Ignored("service", "Services"),
        Ignored("restart", "RestartPolicy"),
        Ignored("logs", "LogConfig"),
        Ignored("artifact", "Artifacts"),
        Ignored("vault", "Vault"),
        Ignored("consul", "Consul"),
        Ignored("template", "Templates"),
        Ignored("volume_mount", "VolumeMounts"),
        Ignored("csi_plugin", "CSIPluginConfig"),
        Ignored("leader", "Leader", False),
        Ignored("shutdown_delay", "ShutdownDelay", 0),
        Ignored("kill_signal", "KillSignal", ""),
        Ignored("kind", "Kind", ""),
        Ignored("scaling", "ScalingPolicies"),
        Ignored("identity", "Identity"),
        Ignored(None, "Identities"),
        Ignored("action", "Actions"),
        Ignored("schedule", "Schedule"),
        Ignored("secret", "Secrets"),
    ),
)

GROUP = Obj(
    "group",
    (
        Field("name", "Name", Kind.STR, hcl=False),
        Field("count", "Count", Kind.INT),
        Field("constraint", "Constraints", Kind.OBJS, CONSTRAINT),
        Field("affinity", "Affinities", Kind.OBJS, AFFINITY),
        Field("spread", "Spreads", Kind.OBJS, SPREAD),
        Field("scaling", "Scaling", Kind.OBJ, SCALING),
        Field("task", "Tasks", Kind.OBJS, TASK, label_key="name"),
        Field("meta", "Meta", Kind.STR_MAP),
        Field("update", "Update", Kind.OBJ, UPDATE),
        Field("migrate", "Migrate", Kind.OBJ, MIGRATE),
        Field("reschedule", "ReschedulePolicy", Kind.OBJ, RESCHEDULE),
        Field("ephemeral_disk", "EphemeralDisk", Kind.OBJ, EPHEMERAL_DISK),
    ),
    ignored=(
        Ignored("volume", "Volumes"),
        Ignored("restart", "RestartPolicy"),
        Ignored("disconnect", "Disconnect"),
        Ignored("network", "Networks"),
        Ignored("service", "Services"),
        Ignored("shutdown_delay", "ShutdownDelay", 0),
        Ignored("stop_after_client_disconnect", "StopAfterClientDisconnect", 0),
        Ignored("max_client_disconnect", "MaxClientDisconnect", 0),
        Ignored("consul", "Consul"),
        Ignored("prevent_reschedule_on_lost", "PreventRescheduleOnLost", False),
        Ignored("vault", None),
    ),
)

JOB_TYPES = tuple(t.value for t in JobType)

JOB = Obj(
    "job",
    (
        Field("id", "ID", Kind.STR),
        Field("name", "Name", Kind.STR),
        Field("namespace", "Namespace", Kind.STR),
        Field("type", "Type", Kind.CHOICE, choices=JOB_TYPES),
        Field("priority", "Priority", Kind.INT),
        Field("all_at_once", "AllAtOnce", Kind.BOOL),
        Field("datacenters", "Datacenters", Kind.STRS),
        Field("node_pool", "NodePool", Kind.STR),
        Field("constraint", "Constraints", Kind.OBJS, CONSTRAINT),
        Field("affinity", "Affinities", Kind.OBJS, AFFINITY),
        Field("spread", "Spreads", Kind.OBJS, SPREAD),
        Field("group", "TaskGroups", Kind.OBJS, GROUP, label_key="name"),
        Field("update", "Update", Kind.OBJ, UPDATE),
        Field("migrate", "Migrate", Kind.OBJ, MIGRATE),
        Field("reschedule", "Reschedule", Kind.OBJ, RESCHEDULE),
        Field("meta", "Meta", Kind.STR_MAP),
        Field("periodic", "Periodic", Kind.OBJ, PERIODIC),
        Field("parameterized", "ParameterizedJob", Kind.OBJ, PARAMETERIZED),
        Field("stop", "Stop", Kind.BOOL, hcl=False),
    ),
    ignored=(
        Ignored("region", "Region", "global"),
        Ignored("multiregion", "Multiregion"),
        Ignored("ui", "UI"),
        Ignored("vault", None),
        Ignored("consul_token", "ConsulToken", ""),
        Ignored("vault_token", "VaultToken", ""),
        Ignored("consul_namespace", "ConsulNamespace", ""),
        Ignored("vault_namespace", "VaultNamespace", ""),
        Ignored(None, "ParentID", ""),
        Ignored(None, "Dispatched", False),
        Ignored(None, "DispatchIdempotencyToken", ""),
        Ignored(None, "Payload"),
    ),
    silent_json=frozenset(
        {
            "Status",
            "StatusDescription",
            "Stable",
            "Version",
            "VersionTag",
            "SubmitTime",
            "CreateIndex",
            "ModifyIndex",
            "JobModifyIndex",
            "NomadTokenID",
        }
    ),
)


def is_unset(value: Any, default: Any) -> bool:
    """Nomad's JSON carries nulls, empty lists and zero values for fields nobody set."""
    if value is None or value is False:
        return True
    if isinstance(value, str | list | dict) and not value:
        return True
    if isinstance(value, int | float) and value == 0:
        return True
    return bool(value == default)


install_fast_inits(__name__)
