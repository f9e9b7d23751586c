"""bench.gang at a small scale (16 instances, an hour simulated): the JSON line carries every
figure, a seed gives the same figures every time, no block is ever double-booked and the
bookkeeping agrees with the store at every event, gangs run on distinct instances of one
fleet, the prechecks that skip retries agree with the scheduler, and under drover's policy
every gang that arrived early enough started."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import orjson
import pytest

from actors.worker.core.scheduler.share_stack import FIRST_FIT, SharePolicy
from bench.gang import (
    BLOCKS,
    POLICIES,
    Arrival,
    Config,
    Simulation,
    arrivals,
    check_invariants,
    main,
    run,
)

SMALL = Config(instances=16, fleets=2, sim_hours=1.0, seed=3, gang_share=0.02, load=1.4)
# Below capacity, so that first fit starts gangs too.
LIGHT = dataclasses.replace(SMALL, load=0.6)

REQUIRED = (
    "block_utilisation",
    "gang_wait_p50_s",
    "gang_wait_p99_s",
    "gang_wait_max_s",
    "firstfit_block_utilisation",
    "firstfit_gang_wait_p50_s",
    "firstfit_gang_wait_p99_s",
    "firstfit_gang_wait_max_s",
    "runs",
    "gangs",
    "gangs_started",
    "gangs_never_started",
    "firstfit_gangs_started",
    "firstfit_gangs_never_started",
    "mean_run_s",
    "seed",
    "instances",
    "sim_hours",
    "wall_s",
    "firstfit_wall_s",
)


def _figures(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if not k.endswith("wall_s")}


def test_the_json_line_has_every_figure(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--instances", "16", "--fleets", "2", "--sim-hours", "1", "--processes", "1"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1
    result = orjson.loads(lines[0])
    missing = [k for k in REQUIRED if k not in result]
    assert not missing
    assert result["bench"] == "gang" and result["instances"] == 16
    assert 0.0 <= result["block_utilisation"] <= 1.0
    assert 0.0 <= result["firstfit_block_utilisation"] <= 1.0
    assert result["gangs"] == result["gangs_started"] + result["gangs_never_started"]
    assert (
        result["gangs"]
        == result["firstfit_gangs_started"] + (result["firstfit_gangs_never_started"])
    )


def test_the_same_seed_gives_the_same_figures() -> None:
    first, second = run(SMALL, processes=1), run(SMALL, processes=1)
    assert _figures(first) == _figures(second)
    other = run(dataclasses.replace(SMALL, seed=SMALL.seed + 1), processes=1)
    assert _figures(other) != _figures(first)


def test_both_policies_get_the_same_arrivals() -> None:
    sequence = arrivals(SMALL)
    sims = [Simulation(SMALL, policy) for policy in POLICIES.values()]
    assert all(sim.sequence == sequence for sim in sims)
    assert any(a.gang for a in sequence) and any(not a.gang for a in sequence)
    assert all(2 <= a.ranks <= 8 for a in sequence if a.gang)  # fleets of 8 instances
    # The offered block-seconds are about `load` times the supply (Poisson: not exactly).
    offered = sum(a.duration_s * (BLOCKS * a.ranks if a.gang else 1) for a in sequence)
    supply = SMALL.total_blocks * SMALL.sim_s
    assert 1.1 < offered / supply < 1.7


@pytest.mark.parametrize("config", [SMALL, LIGHT], ids=["overload", "light"])
@pytest.mark.parametrize("policy", [SharePolicy(), FIRST_FIT], ids=["drover", "firstfit"])
def test_no_block_is_double_booked_at_any_event(policy: SharePolicy, config: Config) -> None:
    sim = Simulation(config, policy, check=True)  # check_invariants after every event
    events = sum(1 for _ in sim.events())
    assert events > len(sim.sequence)  # arrivals and completions
    assert sim.stats.evals_processed >= len(sim.sequence)
    assert any(r.started_s is not None for r in sim.runs)


@pytest.mark.parametrize("policy", [SharePolicy(), FIRST_FIT], ids=["drover", "firstfit"])
def test_gangs_run_on_distinct_instances_of_one_fleet(policy: SharePolicy) -> None:
    sim = Simulation(LIGHT, policy)
    sim.run()
    started = [r for r in sim.runs if r.arrival.gang and r.started_s is not None]
    assert started
    for gang in started:
        nodes = [a.node_id for a in gang.allocs]
        assert len(set(nodes)) == len(nodes) == gang.arrival.ranks
        assert len({sim.fleet_of[n] for n in nodes}) == 1
        assert all(sim.total[n] == BLOCKS for n in nodes)


@pytest.mark.parametrize("policy", [SharePolicy(), FIRST_FIT], ids=["drover", "firstfit"])
def test_skipped_retries_are_ones_the_scheduler_would_refuse(policy: SharePolicy) -> None:
    """The prechecks that pass over blocked evaluations read what the scheduler reads: each
    retry they allow places, each they refuse would not have (a renewal of a drover gang's
    hold is processed and must stay blocked)."""
    sim = Simulation(SMALL, policy)
    result = sim.run()
    assert result["precheck_mismatches"] == 0
    assert result["skipped_retries"] > 0
    if policy.hold_for_gangs:
        assert result["renewals"] > 0
    else:
        assert result["renewals"] == 0 and result["idle_held_block_fraction"] == 0.0


def overloaded_fleet() -> tuple[Config, list[Arrival]]:
    """One fleet of 8 instances (64 blocks), a single run every 5 s for the hour (about twice
    what the fleet can run), a gang of all 8 instances at 400 s and one of 4 at 500 s."""
    config = Config(instances=8, fleets=1, sim_hours=1.0, load=1.9)
    rng = random.Random(11)
    gangs = {400.0: 8, 500.0: 4}
    times = sorted({*(5.0 * i for i in range(1, 720)), *gangs})
    sequence = [
        Arrival(i, t, gangs.get(t, 1), config.mean_run_s * rng.uniform(0.5, 1.5))
        for i, t in enumerate(times)
    ]
    return config, sequence


def test_under_overload_drover_starts_every_gang_that_arrived_early_enough() -> None:
    """By construction: the older gang holds the whole fleet, so no single run is placed
    there and it starts once the runs on it end (at most 1.5 mean run lengths); the younger
    one then holds 4 of them and starts when the older ends. Both arrived in the first third
    of the hour and both started, while single runs were left waiting throughout."""
    config, sequence = overloaded_fleet()
    sim = Simulation(config, SharePolicy(), sequence, check=True)
    result = sim.run()
    first, second = (r for r in sim.runs if r.arrival.gang)
    assert first.started_s is not None and second.started_s is not None
    longest = 1.5 * config.mean_run_s
    assert first.started_s - first.arrival.time_s <= longest
    assert second.started_s <= first.started_s + first.arrival.duration_s
    assert result["gangs_never_started"] == 0
    assert result["demand_time_fraction"] == 1.0 and result["blocked_at_end"] > 0
    assert result["precheck_mismatches"] == 0


def test_under_overload_first_fit_never_starts_a_gang_of_the_whole_fleet() -> None:
    """By construction too: each completion frees one block and a waiting single run takes
    it in the same pass, so 8 idle instances are never there at once."""
    config, sequence = overloaded_fleet()
    sim = Simulation(config, FIRST_FIT, sequence, check=True)
    result = sim.run()
    first, _ = (r for r in sim.runs if r.arrival.gang)
    assert first.started_s is None
    assert result["gangs_never_started"] == 2
    assert result["precheck_mismatches"] == 0


def test_the_invariant_check_finds_a_double_booking() -> None:
    sim = Simulation(SMALL, SharePolicy())
    for _ in zip(range(50), sim.events(), strict=False):
        pass
    check_invariants(sim)
    busy_node = next(n for n, busy in sim.busy.items() if busy)
    sim.busy[busy_node] += 1
    with pytest.raises(AssertionError):
        check_invariants(sim)
