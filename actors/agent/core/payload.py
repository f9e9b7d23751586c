"""A dispatched job's payload, written where its task reads it (Nomad's dispatch hook).

A parameterized job's task with `dispatch_payload { file = "input.txt" }` finds the payload
its dispatch carried (`Job.payload`, base64 as Nomad's JSON carries it; Nomad's client
decodes the snappy-compressed bytes the server keeps) at `local/input.txt` of its task
folder, written before the task starts. Nothing is written when the job carries no payload
or the task names no file, as Nomad's hook skips them; nor for drivers whose tasks have no
folder on the agent's machine (`Driver.local_dir` is None: mock, ray).
"""

from __future__ import annotations

import base64
import binascii
from pathlib import Path

from contracts import Job, Task
from contracts.launch import dispatch_file_escapes


class PayloadError(ValueError):
    """The payload could not be written; the message says why."""


def payload_file(job: Job, task: Task) -> str | None:
    """The file `task` wants the payload of `job` in, or None when nothing is to be written."""
    config = task.dispatch_payload
    if not job.payload or config is None or not config.file:
        return None
    return config.file


def write_dispatch_payload(local_dir: Path, file: str, payload_b64: str) -> Path:
    """Write the decoded payload to `file` under `local_dir` (its folders made as needed);
    returns the path written. PayloadError for a payload that is not base64 or a file that
    would land outside the allocation's folder (the job's validation refuses those too)."""
    if dispatch_file_escapes(file):
        raise PayloadError(f'dispatch_payload file "{file}" escapes the allocation directory')
    try:
        data = base64.b64decode(payload_b64, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise PayloadError(f"the job's payload is not base64: {exc}") from None
    target = (local_dir / file.lstrip("/")).resolve()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    except OSError as exc:
        raise PayloadError(f"cannot write {target}: {exc.strerror or exc}") from None
    return target
