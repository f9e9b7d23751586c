"""The outbox against a real Redis: what is queued together goes out in one pipeline, in
order, each entry once; an entry Redis refuses fails alone; a batch that cannot be written
fails every entry of it; stopping writes what is queued and refuses what comes after."""

from __future__ import annotations

import threading

import pytest
import redis

from actors.streams import StreamBus
from actors.streams.outbox import OutboxStopped, StreamOutbox


def fields(n: int) -> dict[bytes, bytes]:
    return {b"n": str(n).encode()}


def written(client: redis.Redis, stream: str) -> list[int]:
    return [int(f[b"n"]) for _id, f in client.xrange(stream)]


def test_entries_queued_together_go_out_in_batches_in_order(
    client: redis.Redis, bus: StreamBus
) -> None:
    failures: list[BaseException] = []
    outbox = StreamOutbox(bus, "test-outbox", max_batch=256)
    for n in range(600):  # queued before its thread runs: all waiting at once
        outbox.put("out", fields(n), failures.append)
    outbox.start()
    outbox.stop()
    assert written(client, "out") == list(range(600))
    assert (outbox.batches, outbox.entries, failures) == (3, 600, [])  # 256 + 256 + 88


def test_many_threads_each_entry_once_and_each_threads_in_order(
    client: redis.Redis, bus: StreamBus
) -> None:
    outbox = StreamOutbox(bus, "test-outbox").start()
    failures: list[BaseException] = []

    def send(thread: int) -> None:
        for i in range(100):
            outbox.put("many", fields(thread * 1000 + i), failures.append)

    threads = [threading.Thread(target=send, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    outbox.stop()
    seen = written(client, "many")
    assert sorted(seen) == sorted(t * 1000 + i for t in range(8) for i in range(100))
    for t in range(8):
        assert [n for n in seen if n // 1000 == t] == [t * 1000 + i for i in range(100)]
    assert failures == [] and outbox.entries == 800 and outbox.batches <= 800


def test_an_entry_redis_refuses_fails_alone(client: redis.Redis, bus: StreamBus) -> None:
    client.set("not-a-stream", "x")
    outcomes: dict[int, BaseException] = {}
    outbox = StreamOutbox(bus, "test-outbox")
    for n, stream in enumerate(["fine", "not-a-stream", "fine"]):
        outbox.put(stream, fields(n), lambda error, n=n: outcomes.__setitem__(n, error))
    outbox.start()
    outbox.stop()
    assert written(client, "fine") == [0, 2]
    assert list(outcomes) == [1] and "WRONGTYPE" in str(outcomes[1])
    assert outbox.entries == 2


def test_a_batch_that_cannot_be_written_fails_every_entry_and_a_bad_callback_stops_none(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    missing = tmp_path_factory.mktemp("no-redis") / "redis.sock"
    unreachable = StreamBus(redis.Redis(unix_socket_path=str(missing)))
    errors: list[BaseException] = []

    def raising(_error: BaseException) -> None:
        raise RuntimeError("a caller's bug")

    outbox = StreamOutbox(unreachable, "test-outbox")
    outbox.put("out", fields(0), raising)
    for n in range(1, 3):
        outbox.put("out", fields(n), errors.append)
    outbox.start()
    outbox.stop()
    assert len(errors) == 2 and all(isinstance(e, redis.ConnectionError) for e in errors)
    assert (outbox.batches, outbox.entries) == (0, 0)


def test_after_stop_an_entry_fails_at_once(client: redis.Redis, bus: StreamBus) -> None:
    outbox = StreamOutbox(bus, "test-outbox").start()
    outbox.stop()
    errors: list[BaseException] = []
    outbox.put("late", fields(0), errors.append)
    assert len(errors) == 1 and isinstance(errors[0], OutboxStopped)
    assert not client.exists("late")
    with pytest.raises(ValueError, match="max_batch"):
        StreamOutbox(bus, "bad", max_batch=0)
