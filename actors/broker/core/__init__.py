"""The broker's pure core: Nomad's EvalBroker and BlockedEvals with no Ray, Redis or threads."""

from actors.broker.core.blocked_evals import (
    BlockedEvals,
    BlockedStats,
    BlockOutcome,
    BlockResult,
    Unblocked,
    duplicate_blocked_description,
)
from actors.broker.core.clock import Clock, ManualClock
from actors.broker.core.errors import (
    EvalBrokerError,
    NackTimeoutReachedError,
    NotOutstandingError,
    TokenMismatchError,
)
from actors.broker.core.eval_broker import EvalBroker, JobKey, job_key
from actors.broker.core.records import (
    CANCELED_DESCRIPTION,
    FAILED_QUEUE,
    BrokerStats,
    Delivery,
    Location,
    SchedulerStats,
    delivery_limit_description,
)

__all__ = [
    "CANCELED_DESCRIPTION",
    "FAILED_QUEUE",
    "BlockOutcome",
    "BlockResult",
    "BlockedEvals",
    "BlockedStats",
    "BrokerStats",
    "Clock",
    "Delivery",
    "EvalBroker",
    "EvalBrokerError",
    "JobKey",
    "Location",
    "ManualClock",
    "NackTimeoutReachedError",
    "NotOutstandingError",
    "SchedulerStats",
    "TokenMismatchError",
    "Unblocked",
    "delivery_limit_description",
    "duplicate_blocked_description",
    "job_key",
]
