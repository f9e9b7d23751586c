"""Why the broker refused an ack, nack or timer call (Nomad's eval_broker.go errors)."""

from __future__ import annotations

ACK_AFTER_TIMEOUT = "Evaluation ID Ack'd after Nack timer expiration"
TIMEOUT_REACHED = "evaluation nack timeout reached"


class EvalBrokerError(Exception):
    """Base class: the caller's delivery is not (or no longer) the outstanding one."""

    def __init__(self, eval_id: str, message: str) -> None:
        super().__init__(f"{message}: {eval_id}")
        self.eval_id = eval_id


class NotOutstandingError(EvalBrokerError):
    """The eval is not delivered and unacknowledged ("Evaluation ID not found")."""

    def __init__(self, eval_id: str) -> None:
        super().__init__(eval_id, "Evaluation ID not found")


class TokenMismatchError(EvalBrokerError):
    """The eval is outstanding under another delivery's token."""

    def __init__(self, eval_id: str) -> None:
        super().__init__(eval_id, "Token does not match for Evaluation ID")


class NackTimeoutReachedError(EvalBrokerError):
    """The nack timer fired first: the delivery was nacked and the eval will be redelivered."""

    def __init__(self, eval_id: str, message: str = ACK_AFTER_TIMEOUT) -> None:
        super().__init__(eval_id, message)
