"""Applied policy files over the real registry: kept in the store and loaded again by a new
registry (an autoscaler restart), replaced by name, bounded, deleted as a whole file."""

from __future__ import annotations

import pytest

from actors.autoscaler.core import applied
from actors.autoscaler.core.applied import AppliedPolicies, MemoryPolicyStore, applied_path
from actors.autoscaler.core.registry import PolicyRegistry, file_policy_id
from contracts.errors import ValidationError

POLICY = """
scaling "%s" {
  enabled = true
  max     = 3
  policy {
    check "c" {
      query = "blocked_allocs"
      strategy "fixed-value" { value = 2 }
    }
    target "fleet" { fleet = "sim" }
  }
}
"""


def test_applied_files_survive_a_restart_and_reapply_replaces() -> None:
    store = MemoryPolicyStore()
    first = AppliedPolicies(PolicyRegistry(), store)
    change = first.apply("a.hcl", POLICY % "one")
    one = file_policy_id(applied_path("a.hcl"), "one")
    assert change.added == (one,)
    change = first.apply("a.hcl", POLICY % "two")  # same name: the file's policies replaced
    two = file_policy_id(applied_path("a.hcl"), "two")
    assert (change.added, change.removed) == ((two,), (one,))
    restarted = AppliedPolicies(PolicyRegistry(), store)
    assert restarted.load().added == (two,)
    entry = restarted.registry.get(two)
    assert entry is not None and entry.runnable and entry.raw["check"]
    assert restarted.delete(two).removed == (two,)
    assert store.load() == {} and len(restarted.registry) == 0


def test_bounds_and_bad_input_are_refused_before_anything_is_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = MemoryPolicyStore()
    files = AppliedPolicies(PolicyRegistry(), store)
    with pytest.raises(ValidationError, match="max is required"):
        files.apply("bad.hcl", 'scaling "x" { policy {} }')
    with pytest.raises(ValidationError, match="Name: expected"):
        files.apply("a b", POLICY % "x")
    monkeypatch.setattr(applied, "MAX_APPLIED_FILES", 2)
    files.apply("a.hcl", POLICY % "a")
    files.apply("b.hcl", POLICY % "b")
    with pytest.raises(ValidationError, match="2 policy files are applied already"):
        files.apply("c.hcl", POLICY % "c")
    files.apply("b.hcl", POLICY % "b2")  # replacing one is not one more
    monkeypatch.setattr(applied, "MAX_FILE_POLICIES", 2)
    with pytest.raises(ValidationError, match="3 file policies, more than the 2"):
        files.apply("a.hcl", POLICY % "a" + POLICY % "a2")
    assert sorted(store.load()) == ["a.hcl", "b.hcl"]
