"""Policy files applied through the API (`drover scaling policy apply FILE`,
`POST /v1/scaling/policies`), kept in a store (Redis: a hash `{prefix}:scaling-policies`,
name -> HCL text) so that a restarted autoscaler loads them again with the policy dir's.

An applied file is registered under the path `applied/<name>`: applying the same name
again replaces its policies; deleting one of its policies removes the whole file (with
any other policy it holds). Policies of the policy dir are not deleted here (remove the
file). Bounded: a file's size, the applied files, and the file policies known in all.
"""

from __future__ import annotations

import re
from typing import Protocol

from actors.autoscaler.core.registry import PolicyRegistry, RegistryChange
from contracts.autoscaling import ClusterPolicy, parse_cluster_policy_file
from contracts.errors import NotFoundError, ValidationError

APPLIED_PREFIX = "applied/"
MAX_POLICY_FILE_BYTES = 64 * 1024
MAX_APPLIED_FILES = 64
MAX_FILE_POLICIES = 1024  # the policies of every file, applied or in the policy dir
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def policies_key(prefix: str) -> str:
    """The Redis hash of applied files, under the system's stream prefix (its hash tag)."""
    return f"{{{prefix}}}:scaling-policies"


def applied_path(name: str) -> str:
    return APPLIED_PREFIX + name


def check_policy_file(name: str, text: str) -> list[ClusterPolicy]:
    """The file's policies; ValidationError naming the field and value otherwise."""
    if not _NAME.match(name):
        raise ValidationError(
            [f"Name: expected 1-128 of letters, digits, '.', '_', '-', got {name!r}"]
        )
    size = len(text.encode())
    if size > MAX_POLICY_FILE_BYTES:
        raise ValidationError(
            [f"Text: {size} bytes, more than the {MAX_POLICY_FILE_BYTES} allowed"]
        )
    return parse_cluster_policy_file(text, applied_path(name))


class PolicyStore(Protocol):
    def load(self) -> dict[str, str]: ...
    def save(self, name: str, text: str) -> None: ...
    def drop(self, name: str) -> None: ...


class MemoryPolicyStore:
    def __init__(self) -> None:
        self.files: dict[str, str] = {}

    def load(self) -> dict[str, str]:
        return dict(self.files)

    def save(self, name: str, text: str) -> None:
        self.files[name] = text

    def drop(self, name: str) -> None:
        self.files.pop(name, None)


class AppliedPolicies:
    """Applied files over a registry and a store (the caller holds the registry's lock)."""

    def __init__(self, registry: PolicyRegistry, store: PolicyStore) -> None:
        self.registry = registry
        self.store = store

    def load(self) -> RegistryChange:
        """Register every stored file (at start)."""
        added: list[str] = []
        for name, text in sorted(self.store.load().items()):
            added += self.registry.apply_file(applied_path(name), text).added
        return RegistryChange(added=tuple(added))

    def apply(self, name: str, text: str) -> RegistryChange:
        parsed = check_policy_file(name, text)
        path = applied_path(name)
        files = self.registry.file_paths()
        if path not in files and sum(p.startswith(APPLIED_PREFIX) for p in files) >= (
            MAX_APPLIED_FILES
        ):
            raise ValidationError([f"{MAX_APPLIED_FILES} policy files are applied already"])
        others = sum(1 for e in self.registry.entries() if e.origin == "file" and e.path != path)
        if others + len(parsed) > MAX_FILE_POLICIES:
            raise ValidationError(
                [f"{others + len(parsed)} file policies, more than the {MAX_FILE_POLICIES} allowed"]
            )
        self.store.save(name, text)  # stored first: what is registered survives a restart
        return self.registry.apply_file(path, text)

    def delete(self, policy_id: str) -> RegistryChange:
        """Remove the applied file holding the policy. NotFoundError: no such file policy;
        ValidationError: a job's policy, or one of the policy dir's files."""
        entry = self.registry.get(policy_id)
        if entry is None:
            raise NotFoundError(f'scaling policy "{policy_id}" not found')
        if entry.origin != "file":
            raise ValidationError(
                [f"policy \"{policy_id}\" is a job group's: change the job's scaling block"]
            )
        if not entry.path.startswith(APPLIED_PREFIX):
            raise ValidationError(
                [f'policy "{policy_id}" is from the policy dir\'s {entry.path}: remove the file']
            )
        self.store.drop(entry.path[len(APPLIED_PREFIX) :])
        return self.registry.remove_file(entry.path)
