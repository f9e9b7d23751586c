"""Instances held for blocked gangs: node ID -> the blocked evaluations holding it.

A gang that cannot be placed holds the instances it waits for (`Evaluation.reserved_nodes`
of its blocked evaluation), so that single ranks arriving later do not keep taking them
(the scheduler reads this, see actors/worker/core/scheduler/share.py). The store adds an
evaluation's holds while it is blocked and drops them when it leaves that status.
"""

from __future__ import annotations

from actors.state.cow import CowMap, str_hash
from contracts.evaluation import EvalStatus, Evaluation


def holds_of(ev: Evaluation) -> tuple[str, ...]:
    return ev.reserved_nodes if ev.status is EvalStatus.BLOCKED else ()


class HoldTable:
    __slots__ = ("table",)

    def __init__(self, shards: int = 1) -> None:
        self.table: CowMap[str, tuple[str, ...]] = CowMap(shards, str_hash)

    def add(self, ev: Evaluation) -> None:
        for node_id in holds_of(ev):
            held = self.table.get(node_id) or ()
            if ev.id not in held:
                self.table.set(node_id, (*held, ev.id))

    def remove(self, ev: Evaluation) -> None:
        for node_id in holds_of(ev):
            held = tuple(i for i in self.table.get(node_id) or () if i != ev.id)
            if held:
                self.table.set(node_id, held)
            else:
                self.table.pop(node_id)
