"""The cluster's scheduler configuration (Nomad's structs.SchedulerConfiguration), set with
`/v1/operator/scheduler/configuration` and read by every scheduler from its replica.

Preemption is on for system jobs and off for the other types by default, as in Nomad; the
algorithm is binpack or spread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from contracts.fast_init import install_fast_inits


class SchedulerAlgorithm(StrEnum):
    BINPACK = "binpack"
    SPREAD = "spread"


@dataclass(frozen=True, slots=True)
class PreemptionConfig:
    system_scheduler_enabled: bool = True
    sys_batch_scheduler_enabled: bool = False
    batch_scheduler_enabled: bool = False
    service_scheduler_enabled: bool = False

    def enabled_for(self, job_type: str) -> bool:
        return {
            "system": self.system_scheduler_enabled,
            "sysbatch": self.sys_batch_scheduler_enabled,
            "batch": self.batch_scheduler_enabled,
            "service": self.service_scheduler_enabled,
        }.get(job_type, False)


@dataclass(frozen=True, slots=True)
class SchedulerConfiguration:
    scheduler_algorithm: SchedulerAlgorithm = SchedulerAlgorithm.BINPACK
    preemption_config: PreemptionConfig = field(default_factory=PreemptionConfig)
    memory_oversubscription_enabled: bool = False
    reject_job_registration: bool = False
    pause_eval_broker: bool = False
    create_index: int = 0
    modify_index: int = 0


DEFAULT_SCHEDULER_CONFIG = SchedulerConfiguration()


install_fast_inits(__name__)
