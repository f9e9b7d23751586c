"""What the codec tests share (test modules run in importlib mode and cannot import each
other): every record class that travels through the codec."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil

import pytest

import contracts


@pytest.fixture(scope="session")
def codec_records() -> set[type]:
    """The records of `contracts` the codec encodes and decodes. dstack's configuration
    models and experiment files are parsed from YAML, scaling policies from HCL and traces
    from their files, by their own parsers (none travels through the codec)."""
    return {
        obj
        for info in pkgutil.walk_packages(contracts.__path__, "contracts.")
        for obj in vars(importlib.import_module(info.name)).values()
        if isinstance(obj, type)
        and dataclasses.is_dataclass(obj)
        and obj.__module__.startswith("contracts.")
        and not obj.__module__.startswith(
            ("contracts.dstack", "contracts.traces", "contracts.experiments")
        )
        and obj.__module__ != "contracts.autoscaling.policy"
    }
