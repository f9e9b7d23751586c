"""dstack's blocks: one instance split into T equal blocks that jobs take k at a time.

- Divisibility (server/services/offers.py::is_divisible_into_blocks): `auto` resolves to the
  CPU count when there are no GPUs, else to min(cpus, gpus); T is valid iff T >= 1 and T
  divides both the CPU and the GPU count. Memory and disk have no rule. TPUs count as 1 GPU.
- Share (generate_shared_offer(offer, k, T)): cpus = floor(cpus/T)*k, memory = floor(mem/T)*k,
  GPUs = the first floor(nGPU/T)*k of the list. Disk is not divided, price is not prorated.
- Counters: assignment adds k to `busy_blocks`; release (jobs_terminating) subtracts the job's
  offer blocks (1 when the job has no offer).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from contracts.dstack.fields import MAX_NUMBER, expect_int, show
from contracts.errors import ValidationError
from contracts.fast_init import install_fast_inits

Blocks = int | Literal["auto"]
MAX_BLOCKS = 100_000


def parse_blocks(value: object, where: str = "blocks") -> Blocks:
    """`auto` or an int 1..MAX_BLOCKS."""
    if value == "auto":
        return "auto"
    if isinstance(value, str) and value.strip().isdigit() and len(value) < 20:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{where}: expected 'auto' or an integer >= 1, got {show(value)}")
    return expect_int(value, where, 1, MAX_BLOCKS)


def auto_blocks(cpu_count: int, gpu_count: int) -> int:
    """What `auto` resolves to: the CPU count without GPUs, else min(cpus, gpus)."""
    return cpu_count if gpu_count == 0 else min(cpu_count, gpu_count)


def blocks_problem(cpu_count: int, gpu_count: int, blocks: Blocks) -> str | None:
    """Why the instance cannot be split into `blocks`, or None when it can."""
    if cpu_count < 0 or gpu_count < 0:
        return f"cannot split {cpu_count} CPUs and {gpu_count} GPUs: counts must be >= 0"
    total = auto_blocks(cpu_count, gpu_count) if blocks == "auto" else blocks
    shown = f"{total} blocks" + (" (auto)" if blocks == "auto" else "")
    if total < 1:
        return f"cannot split {cpu_count} CPUs and {gpu_count} GPUs into {shown}: need at least 1"
    reasons = [
        f"{count} {what} are not divisible by {total}"
        for count, what in ((cpu_count, "CPUs"), (gpu_count, "GPUs"))
        if count % total
    ]
    if reasons:
        return f"cannot split {cpu_count} CPUs and {gpu_count} GPUs into {shown}: " + (
            " and ".join(reasons)
        )
    return None


def resolve_blocks(cpu_count: int, gpu_count: int, blocks: Blocks) -> int | None:
    """The instance's total_blocks, or None when it cannot be split that way."""
    if blocks_problem(cpu_count, gpu_count, blocks) is not None:
        return None
    return auto_blocks(cpu_count, gpu_count) if blocks == "auto" else blocks


@dataclass(frozen=True, slots=True)
class Share:
    """k of T blocks of one instance."""

    cpu: int
    memory_mb: int
    gpu_ids: tuple[str, ...]


def _check_blocks(total_blocks: int, k: int) -> None:
    if not 1 <= total_blocks <= MAX_BLOCKS:
        raise ValidationError(f"total_blocks: {total_blocks} is out of range 1..{MAX_BLOCKS}")
    if not 1 <= k <= total_blocks:
        raise ValidationError(f"blocks: {k} is out of range 1..{total_blocks}")


def share(cpu: int, memory_mb: int, gpu_ids: Sequence[str], total_blocks: int, k: int) -> Share:
    """The resources of k of T blocks: floor(x/T)*k CPUs and MB, the first floor(n/T)*k GPUs."""
    _check_blocks(total_blocks, k)
    if not 0 <= cpu <= MAX_NUMBER or not 0 <= memory_mb <= MAX_NUMBER:
        raise ValidationError(f"share: cpu {cpu} and memory {memory_mb}MB must be 0..{MAX_NUMBER}")
    gpus = len(gpu_ids) // total_blocks * k
    return Share(
        cpu=cpu // total_blocks * k,
        memory_mb=memory_mb // total_blocks * k,
        gpu_ids=tuple(gpu_ids[:gpus]),
    )


def assign_blocks(busy_blocks: int, total_blocks: int, k: int) -> int:
    """busy_blocks after a job takes k blocks; an error if fewer than k are free."""
    _check_blocks(total_blocks, k)
    if not 0 <= busy_blocks <= total_blocks - k:
        raise ValidationError(
            f"busy_blocks: cannot take {k} of {total_blocks} blocks with {busy_blocks} busy"
        )
    return busy_blocks + k


def release_blocks(busy_blocks: int, offer_blocks: int | None) -> int:
    """busy_blocks after a job ends: minus its offer's blocks (1 when it had no offer). Going
    below 0 is the lost-update race of dstack #3956/#4117, so it is an error, not clamped."""
    released = 1 if offer_blocks is None else offer_blocks
    if released < 1 or busy_blocks - released < 0:
        raise ValidationError(
            f"busy_blocks: cannot release {released} blocks with {busy_blocks} busy"
        )
    return busy_blocks - released


install_fast_inits(__name__)
