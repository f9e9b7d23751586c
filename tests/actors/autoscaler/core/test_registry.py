"""The policy registry: job groups' scaling blocks followed one job at a time, policy files,
and what is evaluated (parsed, enabled, a job-group target) and what is only listed."""

from __future__ import annotations

from actors.autoscaler.core.registry import (
    NO_POLICY,
    PolicyRegistry,
    RegistryChange,
    file_policy_id,
    group_policy_id,
)
from contracts import Job, ScalingPolicy, Task, TaskGroup
from contracts.jobspec import parse_hcl

CPU_POLICY = """
      policy {
        evaluation_interval = "2s"
        check "cpu" {
          query = "avg_cpu"
          strategy "target-value" { target = %s }
        }
      }
"""


def web(target: float = 50, *, count: int = 2, enabled: bool = True, extra: str = "") -> Job:
    return parse_hcl(f"""
job "web" {{
  group "api" {{
    count = {count}
    scaling {{
      enabled = {str(enabled).lower()}
      min = 1
      max = 10
{CPU_POLICY % target}
    }}
    task "t" {{
      driver = "mock"
    }}
  }}
{extra}
}}
""")


MANUAL_GROUP = """
  group "db" {
    scaling {
      min = 1
      max = 3
    }
    task "t" {
      driver = "mock"
    }
  }
"""

API_ID = group_policy_id("default", "web", "api")


def test_a_job_groups_policy_is_registered_under_the_apis_id() -> None:
    registry = PolicyRegistry()
    change = registry.apply_job("default", "web", web(), index=7)
    assert change == RegistryChange(added=(API_ID,))
    entry = registry.get(API_ID)
    assert entry is not None and entry.runnable
    assert entry.policy is not None and entry.policy.evaluation_interval_s == 2.0
    assert (entry.min, entry.max, entry.create_index, entry.modify_index) == (1, 10, 7, 7)
    assert entry.group_key == ("default", "web", "api")
    assert entry.raw["check"][0]["cpu"]["query"] == "avg_cpu"
    assert registry.tracked_groups() == {("default", "web", "api")}


def test_a_new_version_with_the_same_policy_changes_nothing() -> None:
    registry = PolicyRegistry()
    registry.apply_job("default", "web", web(), index=1)
    before = registry.get(API_ID)
    scaled = web(count=5)  # what a Scale writes: a new version, the same scaling block
    assert registry.apply_job("default", "web", scaled, index=9) == RegistryChange()
    assert registry.get(API_ID) is before


def test_a_changed_policy_is_parsed_again_and_reported_updated() -> None:
    registry = PolicyRegistry()
    registry.apply_job("default", "web", web(50), index=1)
    assert registry.apply_job("default", "web", web(70), index=4) == RegistryChange(
        updated=(API_ID,)
    )
    entry = registry.get(API_ID)
    assert entry is not None and entry.policy is not None
    assert entry.policy.checks[0].strategy.config.target == 70  # type: ignore[union-attr]
    assert (entry.create_index, entry.modify_index) == (1, 4)


def test_groups_and_jobs_that_go_away_take_their_policies_with_them() -> None:
    registry = PolicyRegistry()
    registry.apply_job("default", "web", web(extra=MANUAL_GROUP), index=1)
    db_id = group_policy_id("default", "web", "db")
    assert {e.id for e in registry.entries()} == {API_ID, db_id}
    assert registry.apply_job("default", "web", web(), index=2) == RegistryChange(removed=(db_id,))
    assert registry.apply_job("default", "web", None, index=3) == RegistryChange(removed=(API_ID,))
    assert len(registry) == 0
    # Another job's entries are never touched by this one's changes.
    registry.apply_job("default", "web", web(), index=4)
    registry.apply_job("default", "other", None, index=5)
    assert registry.get(API_ID) is not None


def test_disabled_and_manual_policies_are_listed_but_not_evaluated() -> None:
    registry = PolicyRegistry()
    registry.apply_job("default", "web", web(enabled=False, extra=MANUAL_GROUP), index=1)
    api = registry.get(API_ID)
    db = registry.get(group_policy_id("default", "web", "db"))
    assert api is not None and not api.enabled and not api.runnable
    assert db is not None and db.note == NO_POLICY and db.policy is None and not db.runnable
    assert registry.tracked_groups() == set()


def test_a_policy_that_does_not_parse_is_kept_with_its_error() -> None:
    # Registration refuses such a policy; only a job written before that check holds one.
    bad = ScalingPolicy(min=1, max=4, policy={"check": [{"cpu": {"query": "avg_cpu"}}]})
    job = Job(id="old", task_groups=(TaskGroup("g", 1, scaling=bad, tasks=(Task("t", "mock"),)),))
    registry = PolicyRegistry()
    registry.apply_job("default", "old", job, index=1)
    (entry,) = registry.entries()
    assert entry.policy is None and not entry.runnable
    assert 'check "cpu": a strategy "<name>" { ... } block is required' in entry.error


FILE = """
scaling "gpu" {
  enabled = true
  min = 1
  max = 4
  policy {
    check "queue" {
      query = "queued_allocs"
      strategy "target-value" { target = 1 }
    }
    target "fleet" { fleet = "gpu" }
  }
}

scaling "web-extra" {
  enabled = true
  type = "horizontal"
  max = 6
  policy {
    check "mem" {
      query = "max_memory"
      strategy "target-value" { target = 512 }
    }
    target "nomad-target" {
      Job = "web"
      Group = "api"
    }
  }
}
"""


def test_policy_files_register_fleet_and_horizontal_policies() -> None:
    registry = PolicyRegistry()
    change = registry.apply_file("/p/a.hcl", FILE)
    gpu_id, web_id = file_policy_id("/p/a.hcl", "gpu"), file_policy_id("/p/a.hcl", "web-extra")
    assert change == RegistryChange(added=(gpu_id, web_id))
    gpu, extra = registry.get(gpu_id), registry.get(web_id)
    assert gpu is not None and not gpu.note and gpu.runnable  # fleets are evaluated
    assert (gpu.type, gpu.target.fleet, gpu.name) == ("cluster", "gpu", "gpu")
    assert extra is not None and extra.runnable and extra.type == "horizontal"
    assert [e.id for e in registry.for_group("default", "web", "api")] == [web_id]
    assert registry.tracked_groups() == {("default", "web", "api")}  # a fleet reads no group
    # Reloading the file replaces its policies; a broken file leaves one entry with why.
    change = registry.apply_file("/p/a.hcl", FILE.replace("gpu", "tpu"))
    assert change.removed == (gpu_id,) and change.added == (file_policy_id("/p/a.hcl", "tpu"),)
    change = registry.apply_file("/p/a.hcl", "scaling {")
    (broken,) = registry.entries()
    assert broken.error.startswith("/p/a.hcl") and broken.policy is None
    assert registry.remove_file("/p/a.hcl") == RegistryChange(removed=(broken.id,))


def test_a_file_policy_and_a_job_policy_of_one_group_are_both_evaluated() -> None:
    registry = PolicyRegistry()
    registry.apply_job("default", "web", web(), index=1)
    registry.apply_file("/p/a.hcl", FILE)
    ids = {e.id for e in registry.for_group("default", "web", "api")}
    assert ids == {API_ID, file_policy_id("/p/a.hcl", "web-extra")}
    assert registry.tracked_groups() == {("default", "web", "api")}


def test_a_check_that_names_another_group_has_that_group_tracked_too() -> None:
    job = parse_hcl("""
job "web" {
  group "api" {
    scaling {
      min = 1
      max = 10
      policy {
        check "front" {
          query = "taskgroup_avg_cpu/frontend/web"
          strategy "target-value" { target = 50 }
        }
      }
    }
    task "t" {
      driver = "mock"
    }
  }
}
""")
    registry = PolicyRegistry()
    registry.apply_job("default", "web", job, index=3)
    assert registry.tracked_groups() == {("default", "web", "api"), ("default", "web", "frontend")}
