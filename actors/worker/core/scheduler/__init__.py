"""Nomad's scheduling pipeline, one concern per module.

reconcile   desired vs actual: what to place, stop, update or migrate
feasible    which nodes can run a group at all (constraints, drivers, devices, node classes)
rank        how well a feasible node fits (bin packing, anti-affinity, affinity, penalties)
spread      the spread stanza's score component
select      the limit and max-score stages that pick one node
stack       the chain above, composed per task group
generic     the service and batch schedulers (retry loop, blocked evals)
system      the system scheduler (one allocation per eligible node)
"""

from actors.worker.core.scheduler.factory import new_scheduler
from actors.worker.core.scheduler.generic import GenericScheduler
from actors.worker.core.scheduler.planner import Planner
from actors.worker.core.scheduler.system import SystemScheduler

__all__ = ["GenericScheduler", "Planner", "SystemScheduler", "new_scheduler"]
