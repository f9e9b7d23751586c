"""Where the shared public traces are (../shared/data/traces: see its SOURCES.md), for the
benchmarks and the tests that read them: DROVER_SHARED_TRACES, else ../shared/data/traces
next to the checkout, else the workspace's /work/shared/data/traces."""

from __future__ import annotations

import os
from pathlib import Path


def shared_traces() -> Path:
    """The shared traces folder (which may be absent: callers check the files)."""
    env = os.environ.get("DROVER_SHARED_TRACES")
    beside = Path(__file__).resolve().parents[2] / "shared" / "data" / "traces"
    candidates = [Path(env)] if env else []
    candidates += [beside, Path("/work/shared/data/traces")]
    return next((p for p in candidates if p.is_dir()), beside)
