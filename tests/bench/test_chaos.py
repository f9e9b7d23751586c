"""bench.chaos, short: each kind of process killed once under a stream of job operations
(the whole agent tree too, then started again on its data directory), and every check the
benchmark makes holds at the end."""

from __future__ import annotations

from bench import chaos

KEYS = (
    "kills",
    "kills_by_target",
    "jobs_total",
    "jobs_at_count",
    "lost_acknowledged_jobs",
    "non_terminal_evals",
    "overcommitted_nodes",
    "duplicate_alloc_names",
    "recovery_p50_s",
    "recovery_p99_s",
)


def test_a_short_chaos_run_survives_every_kind_of_kill() -> None:
    targets = "leader,redis,worker,agent,tree,autoscaler"
    # 30 s: with these targets in turn and the seed's intervals, the tree's kill begins
    # about 10 s in and the last kind (the autoscaler) is killed about 20 s in (with the
    # tree's restart taking 9 s of it here), 10 s before the end.
    argv = ["--minutes", "0.5", "--kill-every", "3", "--targets", targets, "--nodes", "8"]
    argv += ["--ops-per-s", "5", "--snapshot-every", "100", "--settle", "120"]
    args = chaos.parse_args(argv)
    line = chaos.run(args)
    assert [k for k in KEYS if k not in line] == []
    # The checks themselves in the message (the whole line is cut short by pytest).
    assert line["ok"] is True, {k: line[k] for k in KEYS if k != "kills_by_target"}
    assert line["kills"] >= 5 and "tree" in line["kills_by_target"], line
    assert line["jobs_total"] > 0 and line["jobs_at_count"] == line["jobs_total"]
    assert line["recovery_p50_s"] is not None
