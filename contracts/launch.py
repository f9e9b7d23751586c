"""How a job launches other jobs: Nomad's `periodic` and `parameterized` blocks.

A periodic or parameterized job is a template. It is never scheduled itself: the leader
launches children from it, on its cron specs (periodic, ID `<parent>/periodic-<unix time>`) or
when dispatched (`POST /v1/job/:id/dispatch`, ID `<parent>/dispatch-<unix time>-<8 hex>`).
Each child is an ordinary job with `parent_id` set.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from enum import StrEnum

from contracts.fast_init import install_fast_inits

PERIODIC_LAUNCH_SUFFIX = "/periodic-"
DISPATCH_LAUNCH_SUFFIX = "/dispatch-"
# Nomad's DispatchPayloadSizeLimit: the most a dispatch may carry, in bytes (decoded).
DISPATCH_PAYLOAD_SIZE_LIMIT = 16 * 1024
# Cron spec macros Nomad's parser (hashicorp/cronexpr) accepts, as five-field specs.
CRON_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


class DispatchPayload(StrEnum):
    """Whether a dispatch must, may or must not carry a payload."""

    OPTIONAL = "optional"
    REQUIRED = "required"
    FORBIDDEN = "forbidden"


@dataclass(frozen=True, slots=True)
class PeriodicConfig:
    """The `periodic` block. `crons`: one or more cron specs (Nomad's `cron` and `crons`);
    the next launch is the earliest any of them gives, in `time_zone` (an IANA name)."""

    crons: tuple[str, ...] = ()
    prohibit_overlap: bool = False
    time_zone: str = "UTC"
    enabled: bool = True


@dataclass(frozen=True, slots=True)
class ParameterizedConfig:
    """The `parameterized` block: what a dispatch must and may send."""

    payload: DispatchPayload = DispatchPayload.OPTIONAL
    meta_required: tuple[str, ...] = ()
    meta_optional: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DispatchPayloadConfig:
    """A task's `dispatch_payload` block: the client writes a dispatched job's payload to
    `file` under the task's `local/` folder before the task starts (Nomad's dispatch hook)."""

    file: str = ""


def dispatch_file_escapes(file: str) -> bool:
    """Nomad's DispatchPayloadConfig.Validate: the file, taken relative to `task/local/` (a
    leading `/` too, as Go's filepath.Join takes it), must stay inside the allocation
    folder."""
    joined = posixpath.normpath(posixpath.join("alloc/task/local", file.lstrip("/")))
    return not joined.startswith("alloc/") or joined == "alloc"


install_fast_inits(__name__)
