"""Instances on their way out: drained first, removed once the drain is over.

A deleted fleet (and, later, a fleet scaled in) does not purge its instances at once: the
agent hosting them asks the leader to drain each one (Nomad's drain: service work migrates at
once, batch work and runs' ranks finish or are forced off at the deadline), and releases an
instance, which removes it from the cluster, only once its drain has completed. Completion is
read from the agent's replica of the log: the node record, committed after the drain was
asked, with no drain strategy left and still ineligible. An instance already draining is
not asked again, so its deadline stands, unless the deletion is forced (`again`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from contracts import Node, NodeEligibility

NodeLookup = Callable[[str], Node | None]


class Retirement:
    def __init__(self) -> None:
        # node ID -> the replica's index when its drain was asked
        self._asked_at: dict[str, int] = {}
        self._seen: set[str] = set()  # tracked instances the replica has shown

    def __len__(self) -> int:
        return len(self._asked_at)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._asked_at

    def begin(
        self, node_ids: Iterable[str], index: int, lookup: NodeLookup, *, again: bool = False
    ) -> list[str]:
        """Track `node_ids` from replica `index` on; returns those to ask a drain for: not
        already draining nor tracked, unless `again` (a forced deletion after a graceful
        one: its drain replaces theirs). An instance the replica does not show yet is asked
        too: its registration went to the leader first, on the same stream."""
        ask: list[str] = []
        for node_id in node_ids:
            tracked = node_id in self._asked_at
            if not tracked:
                self._asked_at[node_id] = index
            node = lookup(node_id)
            if again or (not tracked and (node is None or node.drain_strategy is None)):
                ask.append(node_id)
        return ask

    def drained(self, lookup: NodeLookup) -> list[str]:
        """Tracked instances whose drain is over (or which are gone, once seen): stop
        tracking them and return them, for release."""
        done = []
        for node_id, asked in self._asked_at.items():
            node = lookup(node_id)
            if node is not None:
                self._seen.add(node_id)
            if _over(node, asked, seen=node_id in self._seen):
                done.append(node_id)
        for node_id in done:
            del self._asked_at[node_id]
            self._seen.discard(node_id)
        return done

    def forget(self, node_ids: Iterable[str]) -> None:
        for node_id in node_ids:
            self._asked_at.pop(node_id, None)
            self._seen.discard(node_id)


def _over(node: Node | None, asked_at: int, *, seen: bool) -> bool:
    if node is None:
        return seen  # removed from the cluster; never shown yet: its registration is on its way
    return (
        node.drain_strategy is None
        and node.scheduling_eligibility is NodeEligibility.INELIGIBLE
        and node.modify_index > asked_at
    )
