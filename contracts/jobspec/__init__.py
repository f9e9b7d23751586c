"""Job specifications: Nomad HCL and Nomad JSON job files -> canonical, validated `Job`s.

Both formats go through one schema (schema.py) into a dict of the fields the user set, then
into records (build.py), Nomad's defaults (canonical.py) and Nomad's checks (validate.py).
Every problem found is reported at once in a single ValidationError. Nomad fields drover does
not model yet (network, service, template, ...) are accepted and returned as warnings by the
`*_with_warnings` variants.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from contracts.errors import ValidationError
from contracts.job import Job
from contracts.jobspec import hcl, json_spec
from contracts.jobspec.build import build_job
from contracts.jobspec.canonical import canonicalize
from contracts.jobspec.limits import DEFAULT_LIMITS, JobLimits
from contracts.jobspec.validate import validate
from contracts.jobspec.where import Problems

__all__ = [
    "canonicalize",
    "parse_hcl",
    "parse_hcl_with_warnings",
    "parse_job_file",
    "parse_job_file_with_warnings",
    "parse_json",
    "parse_json_with_warnings",
    "validate",
]

_HCL_SUFFIXES = (".nomad", ".hcl")


def parse_hcl_with_warnings(text: str) -> tuple[Job, list[str]]:
    """Parse a Nomad HCL job file; returns the canonical job and the ignored-field warnings."""
    problems = Problems()
    normalized = hcl.parse_job_body(hcl.load(text), problems)
    return _finish(normalized, problems)


def parse_json_with_warnings(
    raw: str | bytes | dict[str, Any], limits: JobLimits = DEFAULT_LIMITS
) -> tuple[Job, list[str]]:
    """Parse Nomad JSON: `{"Job": {...}}` (as POSTed to /v1/jobs) or a bare job object."""
    problems = Problems()
    normalized = json_spec.parse_job_data(json_spec.load(raw), problems)
    return _finish(normalized, problems, limits)


def parse_hcl(text: str) -> Job:
    return parse_hcl_with_warnings(text)[0]


def parse_json(raw: str | bytes | dict[str, Any]) -> Job:
    return parse_json_with_warnings(raw)[0]


def parse_job_file_with_warnings(path: str | os.PathLike[str]) -> tuple[Job, list[str]]:
    """`.nomad`/`.hcl` are HCL, `.json` is JSON; otherwise a leading `{` means JSON."""
    file = Path(path)
    text = file.read_text(encoding="utf-8")
    suffix = file.suffix.lower()
    is_json = suffix == ".json" or (suffix not in _HCL_SUFFIXES and text.lstrip().startswith("{"))
    return parse_json_with_warnings(text) if is_json else parse_hcl_with_warnings(text)


def parse_job_file(path: str | os.PathLike[str]) -> Job:
    return parse_job_file_with_warnings(path)[0]


def _finish(
    normalized: dict[str, Any] | None, problems: Problems, limits: JobLimits = DEFAULT_LIMITS
) -> tuple[Job, list[str]]:
    if problems.errors or normalized is None:
        raise ValidationError(problems.errors or ["job specification is empty"])
    job = canonicalize(build_job(normalized))
    validate(job, limits)
    return job, problems.warnings
