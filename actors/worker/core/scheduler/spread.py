"""The spread stanza's score component (Nomad's spread.go)."""

from __future__ import annotations

from dataclasses import dataclass

from actors.worker.core.scheduler.context import EvalContext, PropertySet
from contracts import Job, Node, Spread, TaskGroup

IMPLICIT_TARGET = "*"


@dataclass(slots=True)
class _SpreadInfo:
    pset: PropertySet
    weight: int
    desired: dict[str, float]  # value -> desired count; empty = even spread


class SpreadScorer:
    """Boosts nodes whose attribute value is below its desired share of the group's count."""

    def __init__(self, ctx: EvalContext, job: Job, tg: TaskGroup) -> None:
        spreads: list[Spread] = list(job.spreads) + list(tg.spreads)
        self.sum_weights = sum(s.weight for s in spreads) or 1
        self.infos: list[_SpreadInfo] = []
        for spread in spreads:
            desired: dict[str, float] = {}
            total_percent = 0
            for target in spread.spread_target:
                desired[target.value] = target.percent * tg.count / 100.0
                total_percent += target.percent
            if spread.spread_target and total_percent < 100:
                desired[IMPLICIT_TARGET] = (100 - total_percent) * tg.count / 100.0
            pset = ctx.property_set(spread.attribute, tg.name)
            self.infos.append(_SpreadInfo(pset, spread.weight, desired))

    def score(self, node: Node) -> float:
        total = 0.0
        for info in self.infos:
            value, used = info.pset.used(node)
            if value is None:
                total -= 1.0  # lacking the attribute: the lowest possible score
                continue
            if not info.desired:
                total += even_spread_boost(info.pset.counts, value)
                continue
            desired = info.desired.get(value)
            if desired is None:
                desired = info.desired.get(IMPLICIT_TARGET)
            if desired is None or desired == 0:
                total -= 1.0
                continue
            weight = info.weight / self.sum_weights
            total += ((desired - (used + 1)) / desired) * weight
        return total


def even_spread_boost(counts: dict[str, int], value: str) -> float:
    """With no targets: favour values with fewer allocations than the busiest one."""
    used = {k: v for k, v in counts.items() if v > 0}
    if not used:
        return 0.0
    current = counts.get(value, 0)
    min_count = min(used.values())
    max_count = max(used.values())
    if current < min_count:
        return 1.0 if current == 0 else (min_count - current) / min_count
    if current != min_count:
        return (min_count - current) / min_count
    if min_count == max_count:
        return -1.0
    return (max_count - current) / min_count
