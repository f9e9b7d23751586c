"""A consumer-group loop: read a batch, decode it, hand it to a handler, ack or retry.

Delivery is at least once, so handlers must be idempotent: an entry is acked only after the
handler returned, and a crash in between delivers it again (to the restarted consumer through
its PEL, or to another one through `claim_stale`).

Failure policy:
- an entry that cannot be decoded (missing fields, unknown type, bad JSON, a codec error) is
  dead-lettered with the reason and acked at once: retrying cannot fix it;
- when the handler raises on a batch, each entry is retried alone, so one poison message does
  not take its batch-mates down with it; entries that still fail stay pending and are read
  again (from this consumer's PEL) after `retry_delay_ms`;
- an entry whose handler failed on its `max_deliveries`-th delivery is dead-lettered with the
  exception text and acked; one delivered more often than that (its consumers crashed or hung
  before settling it: a poison message that kills the process) is dead-lettered unhandled.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import NamedTuple

import redis

from actors.streams.bus import Entry, StreamBus
from actors.streams.envelope import BadMessage, decode_message, trace_of

log = logging.getLogger(__name__)


class Delivery(NamedTuple):
    """One decoded entry, as handed to a handler."""

    message_id: str
    type: str
    message: object
    trace: dict[str, str]


Handler = Callable[[list[Delivery]], None]


class GroupConsumer:
    """Consumes `stream` as `consumer` of `group`. Not thread-safe: one thread per instance;
    several instances (with distinct consumer names) may share a StreamBus."""

    def __init__(
        self,
        bus: StreamBus,
        stream: str,
        group: str,
        consumer: str,
        registry: Mapping[str, type],
        handler: Handler,
        *,
        batch: int = 256,
        block_ms: int = 2000,
        handler_acks: bool = False,
        max_deliveries: int = 5,
        retry_delay_ms: int = 500,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if batch < 1 or max_deliveries < 1 or block_ms < 1 or retry_delay_ms < 0:
            raise ValueError("batch, block_ms, max_deliveries must be >= 1, retry_delay_ms >= 0")
        self.bus = bus
        self.stream = stream
        self.group = group
        self.consumer = consumer
        self.registry = registry
        self.handler = handler
        self.batch = batch
        self.block_ms = block_ms
        # The handler acks every entry of a batch it returns from (with its answers, in one
        # round trip); the consumer acks only what it settles otherwise.
        self.handler_acks = handler_acks
        self.max_deliveries = max_deliveries
        self.retry_delay_ms = retry_delay_ms
        self._clock = clock
        self._group_ready = False
        self._retry_at: float | None = None

    def poll_once(self, *, wait: bool = True) -> int:
        """Read and process one batch; returns how many entries were settled (handled and
        acked, or dead-lettered). Blocks up to `block_ms` when nothing is waiting, unless
        `wait` is False (the caller has other work at hand)."""
        self._ensure_group()
        if self._retry_at is not None and self._clock() >= self._retry_at:
            self._retry_at = None
            self.bus.rewind(self.stream, self.group, self.consumer)
        entries = self.bus.read_group(
            self.stream, self.group, self.consumer, self.batch, self.block_ms if wait else None
        )
        return self._process(entries)

    def claim_stale(self, min_idle_ms: int) -> int:
        """Take over entries left pending by dead consumers for `min_idle_ms`, process them."""
        self._ensure_group()
        result = self.bus.claim_stale(
            self.stream, self.group, self.consumer, min_idle_ms, self.batch
        )
        return self._process(result.entries)

    def run(
        self,
        stop_event: threading.Event,
        *,
        claim_min_idle_ms: int | None = None,
        claim_every_s: float = 30.0,
        max_backoff_s: float = 5.0,
    ) -> None:
        """`poll_once` until `stop_event` is set (checked at least every `block_ms`). With
        `claim_min_idle_ms`, also claims dead consumers' entries every `claim_every_s`.
        Connection errors back off and retry; other Redis errors propagate."""
        failures = 0
        next_claim = self._clock()
        while not stop_event.is_set():
            try:
                if claim_min_idle_ms is not None and self._clock() >= next_claim:
                    next_claim = self._clock() + claim_every_s
                    self.claim_stale(claim_min_idle_ms)
                self.poll_once()
                failures = 0
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                failures += 1
                delay = min(max_backoff_s, 0.05 * 2**failures)
                log.warning(
                    "%s/%s: Redis unreachable (%s); retry in %.2fs", *self._at(), exc, delay
                )
                stop_event.wait(delay)

    # -- internals ----------------------------------------------------------------------------

    def _ensure_group(self) -> None:
        if not self._group_ready:
            self.bus.ensure_group(self.stream, self.group)
            self._group_ready = True

    def _at(self) -> tuple[str, str]:
        return self.stream, self.consumer

    def _process(self, entries: list[Entry]) -> int:
        settled = 0
        good: list[tuple[Entry, Delivery]] = []
        for entry in entries:
            if entry.deliveries > self.max_deliveries:
                # Never acked nor failed cleanly: it probably crashed or hung its consumers.
                self._dead_letter(
                    entry,
                    f"delivered {entry.deliveries} times (max {self.max_deliveries}) without "
                    "being acked; its consumers may have crashed on it",
                )
                settled += 1
                continue
            try:
                type_name, message, trace = decode_message(entry.fields, self.registry)
            except BadMessage as exc:
                self._dead_letter(entry, exc.reason)
                settled += 1
                continue
            good.append((entry, Delivery(entry.id, type_name, message, trace)))
        if not good:
            return settled
        try:
            self.handler([d for _, d in good])
        except Exception as exc:
            if len(good) == 1:
                failed = [(good[0][0], exc)]
            else:
                log.warning(
                    "%s/%s: handler failed on a batch of %d (%r); retrying one by one",
                    *self._at(),
                    len(good),
                    exc,
                )
                failed = self._one_by_one(good)
            settled += len(good) - len(failed)
            settled += self._settle_failures(failed)
        else:
            if not self.handler_acks:
                self.bus.ack(self.stream, self.group, [e.id for e, _ in good])
            settled += len(good)
        return settled

    def _one_by_one(self, good: list[tuple[Entry, Delivery]]) -> list[tuple[Entry, Exception]]:
        done: list[str] = []
        failed: list[tuple[Entry, Exception]] = []
        for entry, delivery in good:
            try:
                self.handler([delivery])
            except Exception as exc:
                failed.append((entry, exc))
            else:
                done.append(entry.id)
        if not self.handler_acks:
            self.bus.ack(self.stream, self.group, done)
        return failed

    def _settle_failures(self, failed: list[tuple[Entry, Exception]]) -> int:
        """Dead-letter entries out of deliveries; schedule a retry for the rest."""
        settled = 0
        for entry, exc in failed:
            if entry.deliveries >= self.max_deliveries:
                reason = (
                    f"handler failed on delivery {entry.deliveries} of {self.max_deliveries}: "
                    f"{type(exc).__name__}: {exc}"
                )
                self._dead_letter(entry, reason)
                settled += 1
            else:
                log.warning(
                    "%s/%s: handler failed on %s (delivery %d of %d): %r",
                    *self._at(),
                    entry.id,
                    entry.deliveries,
                    self.max_deliveries,
                    exc,
                )
                if self._retry_at is None:
                    self._retry_at = self._clock() + self.retry_delay_ms / 1000
        return settled

    def _dead_letter(self, entry: Entry, reason: str) -> None:
        self.bus.dead_letter(
            self.stream,
            entry.id,
            self.consumer,
            reason,
            entry.fields,
            group=self.group,
            trace=trace_of(entry.fields),
        )
