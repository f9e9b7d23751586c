from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from actors.streams import (
    Delivery,
    GroupConsumer,
    StreamBus,
    connect,
    decode_message,
    registry_of,
)
from contracts.messages import AckOutcome, DeadLetter, EvalAck
from launch.redis_server import EmbeddedRedis

S = "{drover}:work"
G = "workers"
REGISTRY = registry_of(EvalAck)
TRACE = {"traceparent": "00-" + "e" * 32 + "-" + "f" * 16 + "-01"}


def ack(i: int, token: str = "") -> EvalAck:
    return EvalAck(eval_id=f"e{i}", token=token or f"t{i}", outcome=AckOutcome.ACK)


class Recorder:
    """A handler that records batches and raises for tokens in `poison` (until `heal`)."""

    def __init__(self, poison: set[str] | None = None, fail_times: int | None = None) -> None:
        self.batches: list[list[Delivery]] = []
        self.poison = poison or set()
        self.fail_times = fail_times
        self.failures = 0

    def __call__(self, batch: list[Delivery]) -> None:
        self.batches.append(batch)
        bad = [d for d in batch if d.message.token in self.poison]  # type: ignore[attr-defined]
        if bad and (self.fail_times is None or self.failures < self.fail_times):
            self.failures += 1
            raise RuntimeError(f"cannot handle {bad[0].message_id}")

    @property
    def handled(self) -> list[str]:
        return [d.message.eval_id for b in self.batches for d in b]  # type: ignore[attr-defined]


def sid(entry_id: bytes | str) -> str:
    return entry_id.decode() if isinstance(entry_id, bytes) else entry_id


def dead_letters(bus: StreamBus) -> list[DeadLetter]:
    registry = registry_of(DeadLetter)
    out = []
    for entry in bus.range(bus.names.dead_letter):
        _, letter, _ = decode_message(entry.fields, registry)
        assert isinstance(letter, DeadLetter)
        out.append(letter)
    return out


@pytest.fixture
def make_consumer(bus: StreamBus) -> Callable[..., GroupConsumer]:
    def make(handler: Recorder, name: str = "w1", **options: Any) -> GroupConsumer:
        options.setdefault("block_ms", 50)
        options.setdefault("retry_delay_ms", 0)
        return GroupConsumer(bus, S, G, name, REGISTRY, handler, **options)  # type: ignore[arg-type]

    return make


def test_batches_are_decoded_handled_and_acked(
    bus: StreamBus, client: redis.Redis, make_consumer: Callable[..., GroupConsumer]
) -> None:
    handler = Recorder()
    consumer = make_consumer(handler)
    assert consumer.poll_once() == 0  # creates the group, blocks briefly
    ids = bus.publish(S, [("EvalAck", ack(i)) for i in range(5)], trace=TRACE)
    assert consumer.poll_once() == 5
    (batch,) = handler.batches
    assert [d.message_id for d in batch] == ids
    assert batch[0] == Delivery(ids[0], "EvalAck", ack(0), TRACE)
    assert client.xpending(S, G)["pending"] == 0


def test_bad_messages_are_dead_lettered_and_the_loop_goes_on(
    bus: StreamBus, client: redis.Redis, make_consumer: Callable[..., GroupConsumer]
) -> None:
    handler = Recorder()
    consumer = make_consumer(handler)
    consumer.poll_once()
    bus.publish(S, [("EvalAck", ack(1))])
    garbage = sid(client.xadd(S, {b"junk": b"\x00\xff"}))
    unknown = sid(client.xadd(S, {b"t": b"Surprise", b"b": b"{}"}))
    wrong = sid(
        client.xadd(S, {b"t": b"EvalAck", b"b": b'{"EvalID": 7, "Token": "t", "Outcome": "ack"}'})
    )
    broken = sid(client.xadd(S, {b"t": b"EvalAck", b"b": b"{"}))
    bus.publish(S, [("EvalAck", ack(2))])
    assert consumer.poll_once() == 6
    assert handler.handled == ["e1", "e2"]
    letters = {d.message_id: d for d in dead_letters(bus)}
    assert set(letters) == {garbage, unknown, wrong, broken}
    assert "missing field 't'" in letters[garbage].reason
    assert letters[garbage].fields == {"junk": "\x00\\xff"}
    assert "unknown message type 'Surprise'" in letters[unknown].reason
    assert "$.EvalID: expected a string, got 7" in letters[wrong].reason
    assert "not valid JSON" in letters[broken].reason
    assert all(d.stream == S and d.consumer == "w1" for d in letters.values())
    assert client.xpending(S, G)["pending"] == 0
    bus.publish(S, [("EvalAck", ack(3))])
    assert consumer.poll_once() == 1
    assert handler.handled == ["e1", "e2", "e3"]


def test_handler_failures_are_retried_then_dead_lettered(
    bus: StreamBus, client: redis.Redis, make_consumer: Callable[..., GroupConsumer]
) -> None:
    handler = Recorder(poison={"bad"})
    consumer = make_consumer(handler, max_deliveries=3)
    consumer.poll_once()
    ids = bus.publish(S, [("EvalAck", ack(1)), ("EvalAck", ack(2, "bad")), ("EvalAck", ack(3))])
    # Batch fails, then one by one: e1 and e3 settle, e2 stays pending (delivery 1).
    assert consumer.poll_once() == 2
    assert handler.handled == ["e1", "e2", "e3", "e1", "e2", "e3"]
    assert client.xpending(S, G)["pending"] == 1
    assert consumer.poll_once() == 0  # delivery 2, from this consumer's PEL
    assert consumer.poll_once() == 1  # delivery 3 of 3: dead-lettered
    assert handler.handled.count("e2") == 4
    (letter,) = dead_letters(bus)
    assert letter.message_id == ids[1]
    assert "delivery 3 of 3" in letter.reason
    assert f"RuntimeError: cannot handle {ids[1]}" in letter.reason
    assert client.xpending(S, G)["pending"] == 0
    assert consumer.poll_once() == 0
    assert handler.handled.count("e2") == 4


def test_a_transient_failure_is_retried_after_the_delay(
    bus: StreamBus, client: redis.Redis, make_consumer: Callable[..., GroupConsumer]
) -> None:
    now = [100.0]
    handler = Recorder(poison={"flaky"}, fail_times=1)
    consumer = make_consumer(handler, retry_delay_ms=1000, clock=lambda: now[0])
    consumer.poll_once()
    bus.publish(S, [("EvalAck", ack(1, "flaky"))])
    assert consumer.poll_once() == 0
    assert consumer.poll_once() == 0  # not yet due: reads new entries only
    now[0] += 1.0
    assert consumer.poll_once() == 1
    assert handler.handled == ["e1", "e1"]
    assert dead_letters(bus) == []
    assert client.xpending(S, G)["pending"] == 0


def test_a_restarted_consumer_handles_what_it_had_read(
    bus: StreamBus, redis_server: EmbeddedRedis, client: redis.Redis
) -> None:
    bus.ensure_group(S, G)
    bus.publish(S, [("EvalAck", ack(i)) for i in range(3)])
    assert len(bus.read_group(S, G, "w1", 10, 100)) == 3  # ...and the process dies
    handler = Recorder()
    reborn = GroupConsumer(
        StreamBus(connect(redis_server.url)), S, G, "w1", REGISTRY, handler, block_ms=50
    )
    assert reborn.poll_once() == 3
    assert handler.handled == ["e0", "e1", "e2"]
    assert client.xpending(S, G)["pending"] == 0


def test_an_entry_that_keeps_crashing_its_consumers_is_dead_lettered_unhandled(
    bus: StreamBus, client: redis.Redis, redis_server: EmbeddedRedis
) -> None:
    bus.ensure_group(S, G)
    (entry_id,) = bus.publish(S, [("EvalAck", ack(1))])
    for _ in range(3):  # three consumer processes died holding it
        bus.rewind(S, G, "w1")
        assert [e.id for e in bus.read_group(S, G, "w1", 10, 50)] == [entry_id]
    handler = Recorder()
    reborn = StreamBus(connect(redis_server.url))
    consumer = GroupConsumer(reborn, S, G, "w1", REGISTRY, handler, max_deliveries=3, block_ms=50)
    assert consumer.poll_once() == 1
    assert handler.batches == []
    (letter,) = dead_letters(bus)
    assert letter.message_id == entry_id
    assert "delivered 4 times (max 3)" in letter.reason
    assert client.xpending(S, G)["pending"] == 0


def test_claim_stale_takes_over_a_dead_consumers_entries(
    bus: StreamBus,
    client: redis.Redis,
    make_consumer: Callable[..., GroupConsumer],
    make_idle: Callable[..., None],
) -> None:
    bus.ensure_group(S, G)
    ids = bus.publish(S, [("EvalAck", ack(i)) for i in range(3)])
    bus.read_group(S, G, "dead", 10, 100)
    handler = Recorder()
    consumer = make_consumer(handler, name="alive")
    assert consumer.claim_stale(min_idle_ms=60_000) == 0  # the owner may still be working
    make_idle(S, G, "dead", ids)
    assert consumer.claim_stale(min_idle_ms=60_000) == 3
    assert handler.handled == ["e0", "e1", "e2"]
    assert client.xpending(S, G)["pending"] == 0


def test_run_until_stopped(bus: StreamBus, make_consumer: Callable[..., GroupConsumer]) -> None:
    handler = Recorder()
    consumer = make_consumer(handler)
    stop = threading.Event()
    thread = threading.Thread(
        target=consumer.run, args=(stop,), kwargs={"claim_min_idle_ms": 10}, daemon=True
    )
    thread.start()
    try:
        bus.publish(S, [("EvalAck", ack(i)) for i in range(10)])
        deadline = time.monotonic() + 30
        while len(handler.handled) < 10:
            assert time.monotonic() < deadline, f"only {handler.handled} handled"
            time.sleep(0.01)
        assert sorted(handler.handled) == sorted(f"e{i}" for i in range(10))
    finally:
        stop.set()
        thread.join(timeout=30)  # the loop checks the event at least every block_ms
    assert not thread.is_alive()


def test_a_handler_that_acks_with_its_answers_is_not_acked_again(
    bus: StreamBus, client: redis.Redis, make_consumer: Callable[..., GroupConsumer]
) -> None:
    """`handler_acks`: a batch handled in full is acked by the handler, in the pipeline of
    its answers; one that fails is retried one by one and settled as usual."""
    acked_by_consumer: list[list[str]] = []
    real_ack = bus.ack

    def ack_spy(stream: str, group: str, ids: Any) -> int:
        acked_by_consumer.append(list(ids))
        return real_ack(stream, group, ids)

    class Answering(Recorder):
        def __call__(self, batch: list[Delivery]) -> None:
            super().__call__(batch)
            answers = [("answers", "EvalAck", d.message) for d in batch]
            bus.publish_each(answers, ack=(S, G, [d.message_id for d in batch]))

    handler = Answering(poison={"t1"}, fail_times=1)
    consumer = make_consumer(handler, handler_acks=True)
    consumer.poll_once()
    bus.ack = ack_spy  # type: ignore[method-assign]
    bus.publish(S, [("EvalAck", ack(i)) for i in range(3)])
    assert consumer.poll_once() == 3  # failed as a batch, then handled one by one
    assert client.xpending(S, G)["pending"] == 0
    assert acked_by_consumer == []  # each was acked by its own answer's pipeline
    assert [e[1][b"t"] for e in client.xrange("answers")] == [b"EvalAck"] * 3


def test_an_answer_that_cannot_be_written_is_logged_and_the_rest_go_out_acked(
    bus: StreamBus, client: redis.Redis, make_consumer: Callable[..., GroupConsumer]
) -> None:
    consumer = make_consumer(Recorder())
    consumer.poll_once()  # the group
    ids = bus.publish(S, [("EvalAck", ack(i)) for i in range(2)])
    client.xreadgroup(G, "w1", {S: ">"})
    client.set("not-a-stream", "x")
    answers = [("not-a-stream", "EvalAck", ack(0)), ("answers", "EvalAck", ack(1))]
    written = bus.publish_each(answers, ack=(S, G, ids))
    assert len(written) == 1 and client.xlen("answers") == 1
    assert client.xpending(S, G)["pending"] == 0
