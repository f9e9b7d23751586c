"""A live replay through a running system (Ray, the embedded Redis, the autoscaler actor, a
simulated fleet), 30 times faster than the trace: the live count trajectory follows the
simulated one, and the comparison measures how closely."""

from __future__ import annotations

from actors.experiments.core.live_plan import LiveSetup
from actors.experiments.core.policies import NomadPolicy, nomad_policy_dict
from launch.live_replay import LiveReplay, result_row, run_replays


def test_a_step_trace_scales_live_as_the_simulator_says() -> None:
    body = nomad_policy_dict(
        query="utilisation",
        strategy="target-value",
        settings={"target": 70},
        interval="10s",
        cooldown="1m",
    )
    policy = NomadPolicy.from_dict(body, min=1, max=10).policy
    # Until 700 s: the last scaling (at 500 s) and 200 s of its level, 23 s of real time.
    setup = LiveSetup(time_factor=30, until_s=700, per_alloc_rps=10, start_count=2)
    replay = LiveReplay("step", [0, 200, 500], [10, 40, 5], policy, setup)
    ticks: list[float] = []
    (result,) = run_replays([replay], progress=lambda name, done: ticks.append(done))

    # 10 rps on 2 (71 %) holds; 40 rps -> ceil(2 * 200 / 70) = 6; 5 rps -> 1
    assert [c for _, c in result.simulated] == [2, 6, 1]
    assert [c for _, c in result.live] == [2, 6, 1], result.live
    # each live scaling lands within two evaluation intervals (plus a real second of
    # start-up and commit, 30 simulated seconds) of the simulated one
    for (lt, _), (st, _) in zip(result.live[1:], result.simulated[1:], strict=True):
        assert st - 5 <= lt <= st + 2 * 10 + 30, (result.live, result.simulated)
    error = result.error
    assert error.live_actions == error.sim_actions == 2
    assert error.time_share_differing < 0.15 and abs(error.allocation_hours_error) < 0.1
    assert result_row(result)["replay"] == "step"
    assert ticks and ticks[-1] <= 1.0
