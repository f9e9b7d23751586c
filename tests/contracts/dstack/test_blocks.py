"""Blocks: divisibility (test_cloud_provisioning / test_ssh_deploy tables), shares
(generate_shared_offer) and the busy_blocks counters (reference §3, §7 items 4, 5, 13)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contracts.dstack import (
    Blocks,
    Share,
    assign_blocks,
    blocks_problem,
    parse_blocks,
    release_blocks,
    resolve_blocks,
    share,
)
from contracts.errors import ValidationError


@pytest.mark.parametrize(
    ("cpus", "gpus", "requested", "total"),
    [
        (32, 8, 1, 1),
        (32, 8, 2, 2),
        (32, 8, 4, 4),
        (32, 8, "auto", 8),
        (4, 8, "auto", 4),
        (8, 8, "auto", 8),
        (32, 0, 2, 2),
        (32, 0, 4, 4),
        (32, 0, "auto", 32),
    ],
)
def test_block_table(cpus: int, gpus: int, requested: Blocks, total: int) -> None:
    assert resolve_blocks(cpus, gpus, requested) == total
    assert blocks_problem(cpus, gpus, requested) is None


@pytest.mark.parametrize(
    ("cpus", "gpus", "requested", "reason"),
    [
        (6, 8, "auto", "cannot split 6 CPUs and 8 GPUs into 6 blocks (auto): "
         "8 GPUs are not divisible by 6"),
        (6, 9, 4, "cannot split 6 CPUs and 9 GPUs into 4 blocks: 6 CPUs are not divisible by 4 "
         "and 9 GPUs are not divisible by 4"),
        (0, 0, "auto", "cannot split 0 CPUs and 0 GPUs into 0 blocks (auto): need at least 1"),
        (32, 8, 3, "cannot split 32 CPUs and 8 GPUs into 3 blocks: 32 CPUs are not divisible "
         "by 3 and 8 GPUs are not divisible by 3"),
    ],
)  # fmt: skip
def test_cannot_split(cpus: int, gpus: int, requested: Blocks, reason: str) -> None:
    assert resolve_blocks(cpus, gpus, requested) is None
    assert blocks_problem(cpus, gpus, requested) == reason


@pytest.mark.parametrize(("value", "expected"), [("auto", "auto"), (1, 1), (4, 4), ("8", 8)])
def test_parse_blocks(value: object, expected: Blocks) -> None:
    assert parse_blocks(value) == expected


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (0, "blocks: 0 is out of range 1..100000"),
        (-2, "blocks: -2 is out of range 1..100000"),
        ("Auto", "blocks: expected 'auto' or an integer >= 1, got 'Auto'"),
        (True, "blocks: expected 'auto' or an integer >= 1, got True"),
        (2.0, "blocks: expected 'auto' or an integer >= 1, got 2.0"),
        (10**6, "blocks: 1000000 is out of range 1..100000"),
    ],
)
def test_parse_blocks_rejects(value: object, problem: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_blocks(value)
    assert info.value.problems == [problem]


GPUS = tuple(f"gpu{i}" for i in range(8))


def test_share_of_an_8_gpu_host() -> None:
    assert share(64, 131072, GPUS, 4, 1) == Share(16, 32768, ("gpu0", "gpu1"))
    assert share(64, 131072, GPUS, 4, 3) == Share(48, 98304, GPUS[:6])
    assert share(64, 131072, GPUS, 4, 4) == Share(64, 131072, GPUS)


def test_share_floors_per_block_amounts() -> None:
    # 2048 MB and 3 CPUs over 2 blocks: floor(x/T)*k, so one block of each is lost in total.
    assert share(3, 2049, (), 2, 1) == Share(1, 1024, ())
    assert share(3, 2049, (), 2, 2) == Share(2, 2048, ())


@pytest.mark.parametrize(("total", "k"), [(0, 1), (4, 0), (4, 5)])
def test_share_rejects_bad_block_counts(total: int, k: int) -> None:
    with pytest.raises(ValidationError):
        share(8, 1024, (), total, k)


@given(
    st.integers(1, 64),
    st.integers(0, 10**6),
    st.integers(0, 16),
    st.data(),
)
def test_shares_of_k_and_rest_fit_in_the_whole(
    cpu: int, memory_mb: int, gpus: int, data: st.DataObject
) -> None:
    total = data.draw(st.integers(1, 16))
    k = data.draw(st.integers(1, total))
    ids = tuple(str(i) for i in range(gpus))
    part = share(cpu, memory_mb, ids, total, k)
    assert part.gpu_ids == ids[: len(part.gpu_ids)]  # always the first GPUs
    if k < total:
        rest = share(cpu, memory_mb, ids, total, total - k)
        assert part.cpu + rest.cpu <= cpu
        assert part.memory_mb + rest.memory_mb <= memory_mb
        assert len(part.gpu_ids) + len(rest.gpu_ids) <= gpus
    whole = share(cpu * total, memory_mb * total, ids * total, total, total)
    assert whole == Share(cpu * total, memory_mb * total, ids * total)  # divisible: everything


def test_assign_and_release_counters() -> None:
    assert assign_blocks(1, 4, 1) == 2  # §7 item 7: busy 1 -> 2
    assert assign_blocks(0, 4, 4) == 4  # §7 item 8: the whole host
    assert release_blocks(3, 2) == 1  # §7 item 13: T=4, busy=3, job offer blocks=2
    assert release_blocks(1, None) == 0  # a job without an offer releases 1


def test_counters_refuse_to_go_out_of_range() -> None:
    with pytest.raises(ValidationError, match="cannot take 2 of 4 blocks with 3 busy"):
        assign_blocks(3, 4, 2)
    with pytest.raises(ValidationError, match="cannot release 2 blocks with 1 busy"):
        release_blocks(1, 2)
