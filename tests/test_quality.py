"""Lint and type checks run with the suite, so CI enforces them: ruff on everything, mypy
(strict, see pyproject.toml) on contracts/ and the actors' pure cores."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


def test_ruff_clean() -> None:
    result = _run("ruff", "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_clean_on_contracts_and_pure_cores() -> None:
    result = _run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr
