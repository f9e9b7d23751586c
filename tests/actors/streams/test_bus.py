from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
import redis

from actors.streams import (
    Entry,
    StreamBus,
    StreamNames,
    connect,
    decode_message,
    registry_of,
)
from actors.streams.bus import parse_autoclaim
from contracts.messages import AckOutcome, DeadLetter, EvalAck
from launch.redis_server import EmbeddedRedis

S = "{drover}:test"
G = "g"
# A min-idle-time that no entry reaches during a test unless `make_idle` aged it.
STALE_MS = 60_000
REGISTRY = registry_of(EvalAck, DeadLetter)


def acks(n: int, start: int = 0) -> list[tuple[str, object]]:
    return [
        ("EvalAck", EvalAck(eval_id=f"e{i}", token=f"t{i}", outcome=AckOutcome.ACK))
        for i in range(start, start + n)
    ]


def eval_ids(entries: list[Entry]) -> list[str]:
    return [decode_message(e.fields, REGISTRY)[1].eval_id for e in entries]  # type: ignore[attr-defined]


# -- client ------------------------------------------------------------------------------------


def test_client_has_no_read_timeout_and_no_builtin_retry(client: redis.Redis) -> None:
    kwargs = client.connection_pool.connection_kwargs
    assert kwargs["socket_timeout"] is None
    assert kwargs["health_check_interval"] == 0
    conn = client.connection_pool.get_connection()
    try:
        assert conn.retry.get_retries() == 0
        assert conn.socket_timeout is None
    finally:
        client.connection_pool.release(conn)


def test_tcp_urls_get_the_same_settings() -> None:
    r = connect("redis://127.0.0.1:6399/2")
    kwargs = r.connection_pool.connection_kwargs
    assert (kwargs["host"], kwargs["port"], kwargs["db"]) == ("127.0.0.1", 6399, 2)
    assert kwargs["socket_timeout"] is None
    assert kwargs["retry"].get_retries() == 0


def test_blocking_read_returns_empty_after_its_block(
    bus: StreamBus, client: redis.Redis, blocked_in: Callable[[str], int]
) -> None:
    bus.ensure_group(S, G)
    assert bus.read_group(S, G, "c", 10, None) == []  # own PEL (empty), then ">" unblocked
    replies: list[list[Entry]] = []
    reader = threading.Thread(
        target=lambda: replies.append(bus.read_group(S, G, "c", 10, 120_000)), daemon=True
    )
    reader.start()
    # It blocks in Redis (no answer at once); ended as its timeout would end it, it gives [].
    assert client.client_unblock(blocked_in("xreadgroup"), error=False)
    reader.join(timeout=30)
    assert replies == [[]]


def test_blocking_read_wakes_for_a_new_entry(
    bus: StreamBus, blocked_in: Callable[[str], int]
) -> None:
    bus.ensure_group(S, G)
    assert bus.read_group(S, G, "c", 10, None) == []
    replies: list[list[Entry]] = []
    reader = threading.Thread(
        target=lambda: replies.append(bus.read_group(S, G, "c", 10, 120_000)), daemon=True
    )
    reader.start()
    blocked_in("xreadgroup")
    ids = bus.publish(S, acks(1))
    reader.join(timeout=30)
    assert [[(e.id, e.deliveries) for e in entries] for entries in replies] == [[(ids[0], 1)]]


def test_bus_refuses_a_decoding_client(redis_server: EmbeddedRedis) -> None:
    with pytest.raises(ValueError, match="decode_responses"):
        StreamBus(redis.Redis.from_url(redis_server.url, decode_responses=True))


def test_stream_names_share_one_hash_tag() -> None:
    names = StreamNames("c1")
    keys = [names.log, names.deliveries, names.plans, names.tokens_key, names.plan_results("w")]
    assert all(k.startswith("{c1}:") for k in keys)
    assert len(set(keys)) == len(keys)
    with pytest.raises(ValueError):
        names.responses("")
    with pytest.raises(ValueError):
        StreamNames("a:b")


# -- publish and plain reads -------------------------------------------------------------------


def test_publish_range_and_tail(bus: StreamBus) -> None:
    trace = {"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01"}
    ids = bus.publish(S, acks(3), trace=trace)
    assert len(ids) == 3 and ids == sorted(ids)
    entries = bus.range(S)
    assert [e.id for e in entries] == ids
    assert eval_ids(entries) == ["e0", "e1", "e2"]
    assert decode_message(entries[0].fields, REGISTRY)[2] == trace
    assert [e.id for e in bus.range(S, f"({ids[0]}", "+", count=1)] == [ids[1]]
    assert [e.id for e in bus.tail(S, ids[0], 10)] == ids[1:]
    assert bus.tail(S, ids[-1], 10, block_ms=50) == []
    assert bus.publish(S, []) == []


def test_publish_trims_approximately(bus: StreamBus, client: redis.Redis) -> None:
    bus.publish(S, acks(2000), maxlen=500)
    assert 500 <= client.xlen(S) < 700


def test_publish_ten_thousand_in_one_pipeline(bus: StreamBus, client: redis.Redis) -> None:
    ids = bus.publish(S, acks(10_000))
    assert len(set(ids)) == 10_000
    assert client.xlen(S) == 10_000


# -- consumer groups ---------------------------------------------------------------------------


def test_ensure_group_is_idempotent(bus: StreamBus, client: redis.Redis) -> None:
    assert bus.ensure_group(S, G) is True
    assert bus.ensure_group(S, G) is False
    assert client.exists(S)  # MKSTREAM


def test_read_group_ack_and_summary(bus: StreamBus) -> None:
    bus.ensure_group(S, G)
    ids = bus.publish(S, acks(5))
    first = bus.read_group(S, G, "c1", 3, 100)
    assert [e.id for e in first] == ids[:3]
    assert all(e.deliveries == 1 for e in first)
    summary = bus.pending_summary(S, G)
    assert summary is not None
    assert (summary.pending, summary.undelivered, summary.last_delivered_id) == (3, 2, ids[2])
    assert summary.consumers["c1"].pending == 3
    assert bus.ack(S, G, [e.id for e in first]) == 3
    assert bus.ack(S, G, []) == 0
    assert [e.id for e in bus.read_group(S, G, "c1", 10, 100)] == ids[3:]
    assert bus.pending_summary(S, "nope") is None
    assert bus.pending_summary("{drover}:missing", G) is None


def test_restarted_consumer_resumes_its_own_pending_entries(
    bus: StreamBus, redis_server: EmbeddedRedis
) -> None:
    bus.ensure_group(S, G)
    ids = bus.publish(S, acks(4))
    assert len(bus.read_group(S, G, "w1", 10, 100)) == 4  # then "dies" without acking
    bus.ack(S, G, ids[:1])
    reborn = StreamBus(connect(redis_server.url))
    again = reborn.read_group(S, G, "w1", 2, 100)
    assert [e.id for e in again] == ids[1:3]
    assert [e.deliveries for e in again] == [2, 2]
    reborn.ack(S, G, [e.id for e in again])
    assert [e.id for e in reborn.read_group(S, G, "w1", 10, 100)] == ids[3:]
    new = reborn.publish(S, acks(1, 10))
    # The PEL was read once (ids[3] stays pending, un-acked): now only new entries come.
    assert [e.id for e in reborn.read_group(S, G, "w1", 10, 100)] == new
    reborn.rewind(S, G, "w1")
    assert [e.id for e in reborn.read_group(S, G, "w1", 10, 100)] == [ids[3], *new]


def test_nogroup_recreates_the_group(bus: StreamBus, client: redis.Redis) -> None:
    bus.ensure_group(S, G)
    bus.read_group(S, G, "c", 10, None)
    ids = bus.publish(S, acks(2))
    client.xgroup_destroy(S, G)
    assert [e.id for e in bus.read_group(S, G, "c", 10, 100)] == ids


def test_own_pel_skips_and_acks_trimmed_entries(
    bus: StreamBus, client: redis.Redis, redis_server: EmbeddedRedis
) -> None:
    bus.ensure_group(S, G)
    ids = bus.publish(S, acks(3))
    bus.read_group(S, G, "w1", 10, 100)
    client.xtrim(S, maxlen=1, approximate=False)
    reborn = StreamBus(connect(redis_server.url))
    assert [e.id for e in reborn.read_group(S, G, "w1", 10, 100)] == ids[2:]
    assert client.xpending(S, G)["pending"] == 1


def test_claim_stale_moves_a_dead_consumers_entries(
    bus: StreamBus, make_idle: Callable[..., None]
) -> None:
    bus.ensure_group(S, G)
    ids = bus.publish(S, acks(5))
    bus.read_group(S, G, "dead", 10, 100)
    assert bus.claim_stale(S, G, "alive", STALE_MS, 10).entries == []  # not idle long enough
    make_idle(S, G, "dead", ids)
    result = bus.claim_stale(S, G, "alive", STALE_MS, 3)
    assert [e.id for e in result.entries] == ids[:3]
    assert [e.deliveries for e in result.entries] == [2, 2, 2]
    assert result.trimmed == []
    make_idle(S, G, "alive", ids[:3])
    make_idle(S, G, "dead", ids[3:])
    rest = bus.claim_stale(S, G, "alive", STALE_MS, 10)
    assert [e.id for e in rest.entries] == ids  # its own idle entries too
    summary = bus.pending_summary(S, G)
    assert summary is not None and summary.consumers["alive"].pending == 5
    assert summary.consumers["dead"].pending == 0


def test_claim_stale_acks_and_reports_trimmed_entries(
    bus: StreamBus, client: redis.Redis, make_idle: Callable[..., None]
) -> None:
    bus.ensure_group(S, G)
    ids = bus.publish(S, acks(4))
    bus.read_group(S, G, "dead", 10, 100)
    make_idle(S, G, "dead", ids)
    client.xtrim(S, maxlen=1, approximate=False)  # 6.2: XAUTOCLAIM yields (None, None)s
    client.xdel(S, ids[3])
    bus.publish(S, acks(1, 9))
    result = bus.claim_stale(S, G, "alive", STALE_MS, 10)
    assert result.entries == []
    assert sorted(result.trimmed) == ids
    assert client.xpending(S, G)["pending"] == 0


def test_claim_stale_tells_trimmed_entries_from_its_own_live_ones(
    bus: StreamBus, client: redis.Redis, make_idle: Callable[..., None]
) -> None:
    bus.ensure_group(S, G)
    ids = bus.publish(S, acks(4))
    bus.read_group(S, G, "alive", 1, 100)
    bus.read_group(S, G, "dead", 10, 100)
    make_idle(S, G, "alive", ids[:1])
    make_idle(S, G, "dead", ids[1:])
    client.xdel(S, ids[1])
    bus.rewind(S, G, "alive")
    assert [e.id for e in bus.read_group(S, G, "alive", 10, None)] == ids[:1]  # idle reset
    result = bus.claim_stale(S, G, "alive", STALE_MS, 10)
    assert result.trimmed == [ids[1]]
    assert [(e.id, e.deliveries) for e in result.entries] == [(ids[2], 2), (ids[3], 2)]
    summary = bus.pending_summary(S, G)
    assert summary is not None and summary.consumers["alive"].pending == 3


def test_claim_stale_honours_count_across_rounds(bus: StreamBus, client: redis.Redis) -> None:
    bus.ensure_group(S, G)
    ids = bus.publish(S, acks(6))
    bus.read_group(S, G, "dead", 10, 100)
    client.xdel(S, ids[0], ids[2])
    result = bus.claim_stale(S, G, "alive", 0, 3)
    assert [e.id for e in result.entries] == [ids[1], ids[3], ids[4]]
    assert result.trimmed == [ids[0], ids[2]]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ([b"0-0", []], ("0-0", [], [], 0)),
        (  # Redis 6.2
            [b"5-0", [(b"1-0", {b"t": b"x"}), (None, None), None]],
            ("5-0", [Entry("1-0", {b"t": b"x"})], [], 2),
        ),
        (  # Redis >= 7: deleted ids in a third element
            [b"0-0", [(b"3-0", {b"t": b"y"})], [b"1-0", b"2-0"]],
            ("0-0", [Entry("3-0", {b"t": b"y"})], ["1-0", "2-0"], 0),
        ),
    ],
)
def test_both_xautoclaim_reply_shapes(reply: list[object], expected: tuple[object, ...]) -> None:
    assert parse_autoclaim(reply) == expected


def test_dead_letter_writes_a_dead_letter_and_acks(bus: StreamBus, client: redis.Redis) -> None:
    bus.ensure_group(S, G)
    (entry_id,) = bus.publish(S, acks(1))
    (entry,) = bus.read_group(S, G, "c", 10, 100)
    trace = {"traceparent": "00-" + "c" * 32 + "-" + "d" * 16 + "-01"}
    bus.dead_letter(S, entry.id, "c", "it broke", {b"t": b"\xff", b"b": b"x"}, group=G, trace=trace)
    assert client.xpending(S, G)["pending"] == 0
    (letter,) = bus.range(bus.names.dead_letter)
    kind, message, got_trace = decode_message(letter.fields, REGISTRY)
    assert kind == "DeadLetter" and got_trace == trace
    assert message == DeadLetter(S, entry_id, "c", "it broke", {"t": "\\xff", "b": "x"})


def test_resp3_replies_are_understood(
    redis_server: EmbeddedRedis, client: redis.Redis, make_idle: Callable[..., None]
) -> None:
    r3 = redis.Redis.from_url(redis_server.url, protocol=3, socket_timeout=None)
    bus = StreamBus(r3)
    bus.ensure_group(S, G)
    ids = bus.publish(S, acks(2))
    assert [e.id for e in bus.read_group(S, G, "c", 10, 100)] == ids
    assert bus.read_group(S, G, "c", 10, 50) == []
    assert [e.id for e in bus.tail(S, "0", 10)] == ids
    assert bus.tail(S, ids[-1], 10, block_ms=50) == []
    make_idle(S, G, "c", ids)
    assert [e.id for e in bus.claim_stale(S, G, "d", STALE_MS, 10).entries] == ids
    r3.close()
