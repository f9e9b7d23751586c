"""A batch's unfenced requests commit together (staged): one durable commit for the batch,
each decided on the state the ones before it left, answered only once durable; a fenced
request in the middle flushes what is staged before it commits alone; and a staged commit
the log refuses rebuilds the store from the log and retries each request alone, applied
exactly once."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from actors.leader.durable_log import NotLeaderError
from actors.leader.service import LeaderService
from actors.streams.names import LEADER_GROUP
from contracts import EvalStatus, Evaluation, Job, Resources, Task, TaskGroup
from contracts.messages import LeaderRequest, LeaderResponse, RequestKind
from contracts.state_log import LogEntry, UpsertEvals


def register(job_id: str, reply_to: str = "svc:reply") -> LeaderRequest:
    task = Task(name="t", driver="mock", resources=Resources(cpu=100, memory_mb=64))
    job = Job(id=job_id, name=job_id, task_groups=(TaskGroup("g", 1, tasks=(task,)),))
    return LeaderRequest(
        RequestKind.REGISTER_JOB, request_id=f"reg-{job_id}", reply_to=reply_to, job=job
    )


def answers(harness: Any) -> dict[str, LeaderResponse]:
    """The first answer to each request (a retried batch may answer one again)."""
    out: dict[str, LeaderResponse] = {}
    for answer in harness.answers():
        assert isinstance(answer, LeaderResponse)
        out.setdefault(answer.request_id, answer)
    return out


def test_a_batch_of_requests_is_one_commit_and_each_sees_the_last(harness: Any) -> None:
    service: LeaderService = harness.leader()
    commits, log = service.stats.commits, harness.log_length()
    # The same job twice: the second registration is decided on the first's version.
    harness.send(register("a"), register("b"), register("c"))
    harness.send(
        LeaderRequest(
            RequestKind.REGISTER_JOB,
            request_id="reg-a-again",
            reply_to="svc:reply",
            job=Job(id="a", name="a", priority=70, task_groups=register("a").job.task_groups),
        )
    )
    assert service.poll_once() == 4

    assert service.stats.commits == commits + 1
    assert harness.log_length() == log + 4 == service.store.latest_index()
    got = answers(harness)
    assert set(got) == {"reg-a", "reg-b", "reg-c", "reg-a-again"}
    assert all(r.ok for r in got.values())
    assert got["reg-a"].index < got["reg-b"].index < got["reg-c"].index < got["reg-a-again"].index
    assert [v.version for v in service.store.job_versions("default", "a")] == [1, 0]
    # Every entry says when the leader committed it.
    assert all(e.committed_ns > 0 for e in service.durable.entries_after(log))
    # What the followers will read is what the leader applied.
    restarted = harness.leader()
    assert restarted.store.latest_index() == service.store.latest_index()
    assert [v.version for v in restarted.store.job_versions("default", "a")] == [1, 0]


def test_a_fenced_request_flushes_the_staged_ones_first(harness: Any, client: redis.Redis) -> None:
    service: LeaderService = harness.leader()
    service.handle(register("a"))
    (evaluation,) = service.store.evals_by_job("default", "a")
    client.hset(harness.names.tokens_key, evaluation.id, "tok")
    done = LeaderRequest(
        RequestKind.UPDATE_EVALS,
        request_id="final",
        reply_to="svc:reply",
        evals=(Evaluation(id=evaluation.id, job_id="a", status=EvalStatus.COMPLETE),),
        fence_eval_id=evaluation.id,
        fence_token="tok",
    )
    commits = service.stats.commits
    harness.send(register("b"), done, register("c"))
    assert service.poll_once() == 3
    # b staged, flushed by the fenced update, which commits alone; then c staged and flushed.
    assert service.stats.commits == commits + 3
    got = answers(harness)
    assert all(r.ok for r in got.values()), got
    assert got["reg-b"].index < got["final"].index < got["reg-c"].index
    final = service.store.eval(evaluation.id)
    assert final is not None and final.status is EvalStatus.COMPLETE


def test_a_refused_staged_commit_rebuilds_the_store_and_applies_each_request_once(
    harness: Any, client: redis.Redis
) -> None:
    service: LeaderService = harness.leader()
    real_commit = service.durable.commit
    intruded: list[int] = []

    def commit_after_an_intruder(expected: int, entries: Any, fences: Any, **more: Any) -> Any:
        if len(entries) > 1 and not intruded:
            # Something else appended to the log under the staged entries (a leader holding
            # its term never sees this; the store must not keep what was staged on it).
            intruder = LogEntry(expected + 1, service.stats.term, UpsertEvals(()))
            assert real_commit(expected, [intruder], [None]).ok
            intruded.append(expected + 1)
        return real_commit(expected, entries, fences, **more)

    service.durable.commit = commit_after_an_intruder  # type: ignore[method-assign]
    harness.send(register("a"), register("b"))
    # The batch fails, the store is rebuilt, and the consumer retries each message alone.
    for _ in range(5):
        service.poll_once()
    assert intruded
    got = answers(harness)
    assert set(got) == {"reg-a", "reg-b"} and all(r.ok for r in got.values())
    state = service.store
    assert state.job("default", "a") is not None and state.job("default", "b") is not None
    # Each applied once, after the intruder; the store equals the log.
    assert len(state.job_versions("default", "a")) == 1
    rebuilt = harness.leader()
    assert rebuilt.store.latest_index() == state.latest_index() == harness.log_length()
    assert sorted(e.job_id for e in rebuilt.store.evals()) == ["a", "b"]


def test_answers_and_acks_leave_with_the_flush_and_not_before(
    harness: Any, client: redis.Redis
) -> None:
    """No answer for a staged request leaves before its entry is in the log: the batch's
    commit carries its answers and acks its messages, in one script (one round trip)."""
    service: LeaderService = harness.leader()
    real_commit = service.durable.commit
    before_commit: list[tuple[int, int]] = []

    def watching(expected: int, entries: Any, fences: Any, **more: Any) -> Any:
        before_commit.append((len(harness.answers()), pending(client, harness)))
        return real_commit(expected, entries, fences, **more)

    service.durable.commit = watching  # type: ignore[method-assign]
    published: list[object] = []
    service.bus.publish_each = lambda *a, **k: published.append(a)  # type: ignore[method-assign]
    harness.send(register("a"), register("b"))
    service.poll_once()
    assert before_commit == [(0, 2)]  # one commit; nothing answered or acked before it
    assert published == []  # nothing sent apart from the commit
    got = answers(harness)
    assert set(got) == {"reg-a", "reg-b"} and all(r.ok for r in got.values())
    assert max(r.index for r in got.values()) == harness.log_length()
    assert pending(client, harness) == 0


def test_an_answer_that_cannot_be_written_leaves_the_commit_and_the_others(
    harness: Any, client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """A reply stream that is not a stream (someone's string key): the batch commits, the
    other answer goes out, every message is acked, and the failure is logged."""
    service: LeaderService = harness.leader()
    client.set("not-a-stream", "x")
    harness.send(register("a", reply_to="not-a-stream"), register("b"))
    with caplog.at_level("ERROR"):
        service.poll_once()
    assert set(answers(harness)) == {"reg-b"}
    assert service.store.job("default", "a") is not None
    assert service.store.latest_index() == harness.log_length()
    assert pending(client, harness) == 0
    assert "answer 1" in caplog.text and "WRONGTYPE" in caplog.text
    assert client.get("not-a-stream") == b"x"


def pending(client: redis.Redis, harness: Any) -> int:
    """The leader's messages read but not acked."""
    return int(client.xpending(harness.names.requests, LEADER_GROUP)["pending"])


def test_a_request_that_raises_leaves_the_staged_ones_durable(harness: Any) -> None:
    """A bug in one request's handling must not leave the requests staged before it applied
    but not durable: they are flushed, and the retried batch answers them from the log."""
    service: LeaderService = harness.leader()
    real_handle = service.core.handle

    def failing_once(request: LeaderRequest) -> Any:
        if request.request_id == "reg-bad" and not failed:
            failed.append(request.request_id)
            raise RuntimeError("a bug in the core")
        return real_handle(request)

    failed: list[str] = []
    service.core.handle = failing_once  # type: ignore[method-assign]
    harness.send(register("a"), register("bad"), register("c"))
    for _ in range(5):
        service.poll_once()
    assert failed == ["reg-bad"]
    got = answers(harness)
    assert set(got) == {"reg-a", "reg-bad", "reg-c"} and all(r.ok for r in got.values())
    # Answered in full before the error went up, not with a bare index on the retry.
    (evaluation,) = service.store.evals_by_job("default", "a")
    assert got["reg-a"].eval_id == evaluation.id and got["reg-a"].job_modify_index
    # Every job once, and the store is exactly the log.
    for job_id in ("a", "bad", "c"):
        assert len(service.store.job_versions("default", job_id)) == 1
    rebuilt = harness.leader()
    assert rebuilt.store.latest_index() == service.store.latest_index() == harness.log_length()


def test_a_flush_that_cannot_reach_redis_rebuilds_the_store_from_the_log(harness: Any) -> None:
    """The store must never stay ahead of the log: answers from it would claim commits
    that a restarted leader does not know."""
    service: LeaderService = harness.leader()
    real_commit = service.durable.commit
    failed: list[int] = []

    def reset_once(expected: int, entries: Any, fences: Any, **more: Any) -> Any:
        if len(entries) > 1 and not failed:
            failed.append(len(entries))
            raise redis.ConnectionError("connection reset before the script ran")
        return real_commit(expected, entries, fences, **more)

    service.durable.commit = reset_once  # type: ignore[method-assign]
    harness.send(register("a"), register("b"))
    for _ in range(5):
        service.poll_once()
    assert failed == [2]
    got = answers(harness)
    assert set(got) == {"reg-a", "reg-b"} and all(r.ok and r.eval_id for r in got.values())
    assert service.store.latest_index() == harness.log_length()
    restarted = harness.leader()
    assert restarted.store.job("default", "a") is not None
    assert restarted.store.job("default", "b") is not None


def test_a_deposed_leader_stops_deciding_and_its_loop_ends(harness: Any) -> None:
    old: LeaderService = harness.leader()
    harness.leader()  # a newer term
    reloads: list[int] = []
    real_reload = old._reload
    old._reload = lambda: (reloads.append(1), real_reload())[1]  # type: ignore[method-assign]
    harness.send(*(register(f"j{i}") for i in range(8)))
    with pytest.raises(NotLeaderError):
        old.poll_once()
    with pytest.raises(NotLeaderError):
        old.poll_once()  # and on every turn after
    assert reloads == [] and harness.log_length() == 0


class RecordingFeed:
    """A hosted broker's view: each entry it is handed, checked durable when handed."""

    def __init__(self, harness: Any) -> None:
        self.harness = harness
        self.indexes: list[int] = []
        self.resets = 0
        self.restored: list[str] = []  # the jobs of the pending evals restored
        self.restored_at = 0

    def reset(self) -> None:
        self.resets += 1
        self.indexes = []

    def restore(self, state: Any, tail: Any = ()) -> None:
        assert state.latest_index() == self.harness.log_length()  # rebuilt from all of it
        self.restored = sorted(e.job_id for e in state.evals() if e.status is EvalStatus.PENDING)
        self.restored_at = state.latest_index()

    def on_commit(self, entry: LogEntry, state: Any) -> None:
        assert entry.index <= self.harness.log_length(), "handed an entry not yet durable"
        assert state.latest_index() >= entry.index  # and already applied
        self.indexes.append(entry.index)


def test_the_hosted_broker_is_handed_entries_only_once_durable_and_again_after_a_rebuild(
    harness: Any,
) -> None:
    first = harness.leader()
    first.handle(register("old"))  # in the log before the next leader starts
    feed = RecordingFeed(harness)
    service = LeaderService(harness.client, harness.names, broker=feed)
    service.start()
    # A rebuilt store hands over what is pending in it, not every entry again.
    assert feed.resets == 1 and feed.indexes == [] and feed.restored == ["old"]
    started_at = harness.log_length()
    harness.send(register("a"), register("b"), register("c"))  # staged, one flush
    service.poll_once()
    assert feed.indexes == list(range(started_at + 1, harness.log_length() + 1))

    real_commit = service.durable.commit

    def refused(expected: int, entries: Any, fences: Any, **more: Any) -> Any:
        intruder = LogEntry(expected + 1, service.stats.term, UpsertEvals(()))
        assert real_commit(expected, [intruder], [None]).ok
        service.durable.commit = real_commit  # type: ignore[method-assign]
        return real_commit(expected, entries, fences, **more)

    service.durable.commit = refused  # type: ignore[method-assign]
    harness.send(register("d"), register("e"))
    for _ in range(5):
        service.poll_once()
    # The refused batch was never handed over; the rebuild restored what was pending, and
    # the entries after it were handed over once each.
    assert feed.resets == 2 and feed.restored == ["a", "b", "c", "old"]
    assert feed.indexes == list(range(feed.restored_at + 1, harness.log_length() + 1))
    assert len(feed.indexes) == 2  # d and e, retried one by one after the rebuild
