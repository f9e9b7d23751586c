"""The state log's compact form of client reports (UpdateAllocsClientStatus)."""

from __future__ import annotations

import dataclasses

import orjson
import pytest

from contracts import ClientStatus
from contracts.codec import CodecError, to_wire
from contracts.state_log import (
    AllocClientUpdate,
    LogEntry,
    UpdateAllocsClientStatus,
    UpdateClientStatusRows,
    decode_entry,
    encode_entry,
)

RUNNING = "Tasks are running"


def reports() -> UpdateAllocsClientStatus:
    return UpdateAllocsClientStatus(
        (
            AllocClientUpdate("a1", ClientStatus.RUNNING, RUNNING, 10, "n1"),
            AllocClientUpdate("a2", ClientStatus.RUNNING, RUNNING, 10, "n2"),
            AllocClientUpdate("a3", ClientStatus.COMPLETE, "done", 10, "n1"),
            AllocClientUpdate("a4", ClientStatus.RUNNING, RUNNING, 10, ""),
            AllocClientUpdate("a5", ClientStatus.FAILED, "boom", 11, "n3"),
        )
    )


def test_client_reports_round_trip_in_order_grouped_by_runs() -> None:
    entry = LogEntry(4, 2, reports(), request_id="r1")
    raw = encode_entry(entry)
    groups = orjson.loads(raw)["Change"]["UpdateGroups"]
    # Runs of equal status, description and time share one group; order is kept.
    assert [(g["ClientStatus"], len(g["Rows"])) for g in groups] == [
        ("running", 2),
        ("complete", 1),
        ("running", 1),
        ("failed", 1),
    ]
    assert decode_entry(raw) == entry
    # Read compact, the runs stay runs of rows; they expand to the same reports.
    compact = decode_entry(raw, compact=True)
    assert isinstance(compact.change, UpdateClientStatusRows)
    assert [(g.proto.client_status, g.rows) for g in compact.change.groups] == [
        (ClientStatus.RUNNING, [["a1", "n1"], ["a2", "n2"]]),
        (ClientStatus.COMPLETE, [["a3", "n1"]]),
        (ClientStatus.RUNNING, [["a4", ""]]),
        (ClientStatus.FAILED, [["a5", "n3"]]),
    ]
    assert compact.change.expanded() == entry.change
    assert encode_entry(compact) == raw


def test_followers_can_decode_only_terminal_reports() -> None:
    entry = LogEntry(4, 2, reports())
    change = decode_entry(encode_entry(entry), terminal_updates_only=True).change
    assert isinstance(change, UpdateAllocsClientStatus)
    assert [u.alloc_id for u in change.updates] == ["a3", "a5"]
    # The plain (older) form is filtered the same way.
    plain = {
        "Index": 4,
        "Term": 2,
        "Type": "UpdateAllocsClientStatus",
        "Change": to_wire(reports()),
    }
    change = decode_entry(orjson.dumps(plain), terminal_updates_only=True).change
    assert isinstance(change, UpdateAllocsClientStatus)
    assert [u.alloc_id for u in change.updates] == ["a3", "a5"]


def test_plain_client_report_entries_are_still_accepted() -> None:
    plain = {
        "Index": 4,
        "Term": 2,
        "Type": "UpdateAllocsClientStatus",
        "Change": to_wire(reports()),
    }
    assert decode_entry(orjson.dumps(plain)) == LogEntry(4, 2, reports())


@pytest.mark.parametrize("compact", [False, True])
def test_compact_client_reports_are_validated_with_their_path(compact: bool) -> None:
    data = orjson.loads(encode_entry(LogEntry(1, 0, reports())))
    data["Change"]["UpdateGroups"][1]["Rows"][0] = ["a3", 7]
    with pytest.raises(CodecError, match=r"\$\.Change\.UpdateGroups\[1\]\.Rows\[0\]: expected"):
        decode_entry(orjson.dumps(data), compact=compact)
    data = orjson.loads(encode_entry(LogEntry(1, 0, reports())))
    data["Change"]["UpdateGroups"][0]["ClientStatus"] = "sleeping"
    with pytest.raises(CodecError, match=r"UpdateGroups\[0\]\.ClientStatus: expected one of"):
        decode_entry(orjson.dumps(data))
    data = orjson.loads(encode_entry(LogEntry(1, 0, reports())))
    del data["Change"]["UpdateGroups"][2]["ModifyTime"]
    with pytest.raises(CodecError, match=r"UpdateGroups\[2\]: expected an object with"):
        decode_entry(orjson.dumps(data))
    data["Change"] = {"UpdateGroups": {}}
    with pytest.raises(CodecError, match=r"\$\.Change\.UpdateGroups: expected a list"):
        decode_entry(orjson.dumps(data))


def test_trace_context_rides_in_the_entry() -> None:
    from contracts.state_log import LogEntry, UpsertEvals, decode_entry, encode_entry

    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    entry = LogEntry(3, 1, UpsertEvals(()), trace={"": parent, "eval-1": parent})
    assert decode_entry(encode_entry(entry)).trace == {"": parent, "eval-1": parent}
    assert b"Trace" not in encode_entry(LogEntry(4, 1, UpsertEvals(())))
    bad = encode_entry(entry).replace(b'"eval-1":"00', b'"eval-1":7,"x":"00')
    try:
        decode_entry(bad)
    except ValueError as exc:
        assert "$.Trace" in str(exc)
    else:
        raise AssertionError("a bad Trace field must be refused")


def test_the_commit_time_rides_in_the_entry() -> None:
    from contracts.state_log import LogEntry, UpsertEvals, decode_entry, encode_entry

    entry = LogEntry(3, 1, UpsertEvals(()), committed_ns=1_764_000_000_123_456_789)
    assert decode_entry(encode_entry(entry)).committed_ns == 1_764_000_000_123_456_789
    assert b"Time" not in encode_entry(LogEntry(4, 1, UpsertEvals(())))
    assert decode_entry(encode_entry(LogEntry(4, 1, UpsertEvals(())))).committed_ns == 0
    data = orjson.loads(encode_entry(entry))
    data["Time"] = "yesterday"
    with pytest.raises(CodecError, match=r"\$\.Time"):
        decode_entry(orjson.dumps(data))


def test_client_reports_travel_as_rows_and_the_object_form_is_still_read() -> None:
    from contracts.codec import dumps, from_wire, loads
    from contracts.messages import LeaderRequest, RequestKind

    request = LeaderRequest(RequestKind.CLIENT_UPDATES, updates=reports().updates)
    wire = orjson.loads(dumps(request))
    assert wire["Updates"][0] == ["a1", "running", RUNNING, 10, "n1"]
    assert loads(LeaderRequest, dumps(request)) == request
    as_object = {
        "AllocID": "a9",
        "ClientStatus": "failed",
        "ClientDescription": "boom",
        "ModifyTime": 3,
        "NodeID": "n9",
    }
    assert from_wire(AllocClientUpdate, as_object) == AllocClientUpdate(
        "a9", ClientStatus.FAILED, "boom", 3, "n9"
    )
    wire["Updates"][1] = ["a2", "sleeping", "", 0, "n2"]
    with pytest.raises(CodecError, match=r"\$\.Updates\[1\]: expected \[AllocID, ClientStatus"):
        from_wire(LeaderRequest, wire)
    wire["Updates"][1] = {"AllocID": "a2", "ClientStatus": "running", "Bogus": 1}
    with pytest.raises(CodecError, match=r"\$\.Updates\[1\]\.Bogus: unknown field"):
        from_wire(LeaderRequest, wire)


def test_a_follower_that_never_reads_jobs_gets_a_registration_as_its_evals() -> None:
    from contracts import EvalStatus, Evaluation, Job
    from contracts.state_log import UpsertEvals, UpsertJob

    ev = Evaluation(id="e1", job_id="web", status=EvalStatus.PENDING)
    raw = encode_entry(LogEntry(7, 1, UpsertJob(Job(id="web", name="web"), (ev,))))
    full = decode_entry(raw).change
    assert isinstance(full, UpsertJob) and full.job.id == "web"
    # As the store stamps them: the registration's index is the job's new modify index.
    stamped = dataclasses.replace(ev, job_modify_index=7)
    assert decode_entry(raw, jobs_as_evals=True).change == UpsertEvals((stamped,))
    # The job is never decoded; the evaluations still are, with their path.
    data = orjson.loads(raw)
    data["Change"]["Job"] = {"nonsense": True}
    assert decode_entry(orjson.dumps(data), jobs_as_evals=True).change == UpsertEvals((stamped,))
    data["Change"]["Evals"][0]["Status"] = 5
    with pytest.raises(CodecError, match=r"\$\.Change\.Evals\[0\]\.Status"):
        decode_entry(orjson.dumps(data), jobs_as_evals=True)


def test_keep_job_reads_the_registrations_it_accepts_whole() -> None:
    from contracts import Evaluation, Job
    from contracts.state_log import UpsertEvals, UpsertJob

    ev = Evaluation(id="e1", job_id="web")
    raw = encode_entry(LogEntry(3, 1, UpsertJob(Job(id="web", name="web"), (ev,))))
    seen: list[dict[str, object]] = []

    def keep(change: dict[str, object]) -> bool:
        seen.append(change)
        return change["Job"]["ID"] == "web"  # type: ignore[index]

    whole = decode_entry(raw, jobs_as_evals=True, keep_job=keep).change
    assert isinstance(whole, UpsertJob) and whole.job.id == "web"
    assert seen and seen[0]["Evals"]
    as_evals = decode_entry(raw, jobs_as_evals=True, keep_job=lambda change: False).change
    assert isinstance(as_evals, UpsertEvals) and [e.id for e in as_evals.evals] == ["e1"]
    # Without jobs_as_evals every registration is whole, keep_job or not.
    assert isinstance(decode_entry(raw, keep_job=lambda change: False).change, UpsertJob)


def _entries_writing_evals() -> list[LogEntry]:
    from contracts import Allocation, EvalStatus, Evaluation, Job
    from contracts.state_log import DeleteEvals, PurgeJob, UpsertAllocs, UpsertEvals, UpsertJob

    ev = Evaluation(id="e1", job_id="web")
    blocked = Evaluation(id="e2", job_id="web", status=EvalStatus.BLOCKED)
    evals = (ev, blocked)
    alloc = Allocation(id="a1", eval_id="e1", node_id="n1", job_id="web", task_group="g")
    return [
        LogEntry(3, 1, UpsertJob(Job(id="web", name="web"), evals)),
        LogEntry(4, 1, UpsertAllocs((alloc,), evals)),
        LogEntry(5, 1, UpsertEvals(evals)),
        LogEntry(6, 1, PurgeJob("default", "web", evals)),
        LogEntry(7, 1, DeleteEvals(("e1",), ("a1",))),
    ]


def _never(raw: dict[str, object]) -> bool:
    return False


def _blocked(raw: dict[str, object]) -> bool:
    return raw.get("Status") == "blocked"


@pytest.mark.parametrize("compact", [False, True])
@pytest.mark.parametrize("entry", _entries_writing_evals(), ids=lambda e: type(e.change).__name__)
def test_keep_eval_decodes_only_the_evaluations_it_accepts(entry: LogEntry, compact: bool) -> None:
    """The client agent reads no evaluation, the autoscaler only blocked ones: every entry
    as a plain follower reads it, less the evaluations refused (left undecoded, even when
    malformed); GC's deletions stay."""
    from contracts.state_log import DeleteEvals

    raw = encode_entry(entry)
    whole = decode_entry(raw, compact=compact).change
    none = decode_entry(raw, compact=compact, keep_eval=_never).change
    blocked = decode_entry(raw, compact=compact, keep_eval=_blocked).change

    assert type(none) is type(whole) is type(blocked)
    if isinstance(whole, DeleteEvals):
        assert none == blocked == whole
        return
    assert [e.id for e in whole.evals] == ["e1", "e2"]  # type: ignore[union-attr]
    assert none == dataclasses.replace(whole, evals=())  # type: ignore[type-var]
    assert blocked == dataclasses.replace(whole, evals=whole.evals[1:])  # type: ignore[union-attr,type-var]
    data = orjson.loads(raw)
    data["Change"]["Evals"][0]["Priority"] = "high"  # the refused one, malformed
    with pytest.raises(CodecError, match=r"\$\.Change\.Evals\[0\]\.Priority"):
        decode_entry(orjson.dumps(data), compact=compact)
    assert decode_entry(orjson.dumps(data), compact=compact, keep_eval=_blocked).change == blocked


def test_keep_eval_applies_to_registrations_read_as_evals_and_plain_plan_entries() -> None:
    from contracts import Allocation, EvalStatus, Evaluation, Job
    from contracts.codec import to_lean_wire
    from contracts.state_log import UpsertAllocs, UpsertEvals, UpsertJob

    ev = Evaluation(id="e1", job_id="web")
    blocked = Evaluation(id="e2", job_id="web", status=EvalStatus.BLOCKED)
    raw = encode_entry(LogEntry(3, 1, UpsertJob(Job(id="web", name="web"), (ev, blocked))))
    as_evals = decode_entry(raw, jobs_as_evals=True, keep_eval=_blocked).change
    assert isinstance(as_evals, UpsertEvals) and [e.id for e in as_evals.evals] == ["e2"]

    alloc = Allocation(id="a1", eval_id="e1", node_id="n1", job_id="web", task_group="g")
    change = UpsertAllocs((alloc,), (ev, blocked))
    # The object form (allocations as records), as entries before AllocGroups were written.
    plain = orjson.dumps(
        {"Index": 4, "Term": 1, "Type": "UpsertAllocs", "Change": to_lean_wire(change)}
    )
    assert decode_entry(plain).change == change
    assert decode_entry(plain, keep_eval=_never).change == UpsertAllocs((alloc,))
    skipped = decode_entry(plain, skip_allocs=True, keep_eval=_blocked).change
    assert skipped == UpsertAllocs((), (blocked,))
    # An Evals that is no list is left to the decoder, which names it.
    data = orjson.loads(plain)
    data["Change"]["Evals"] = "e1"
    with pytest.raises(CodecError, match=r"\$\.Change\.Evals"):
        decode_entry(orjson.dumps(data), keep_eval=_never)


@pytest.mark.parametrize("terminal_only", [False, True])
def test_a_bad_report_status_is_refused_by_every_follower(terminal_only: bool) -> None:
    # Followers that keep only terminal reports skip the others undecoded, but a status
    # that is no status at all (unknown, or not even a string) is an error for them too.
    for bad in ("sleeping", ["running"], None):
        data = orjson.loads(encode_entry(LogEntry(1, 0, reports())))
        data["Change"]["UpdateGroups"][0]["ClientStatus"] = bad
        with pytest.raises(CodecError, match=r"UpdateGroups\[0\]\.ClientStatus: expected"):
            decode_entry(orjson.dumps(data), terminal_updates_only=terminal_only, compact=True)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("Index", "7", r"\$\.Index: expected an integer"),
        ("Term", True, r"\$\.Term: expected an integer"),
        ("RequestID", 5, r"\$\.RequestID: expected a string"),
        ("Time", 1.5, r"\$\.Time: expected an integer"),
        ("Extra", 1, r"\$\.Extra: unknown field"),
        ("Type", "Nothing", r"\$\.Type: expected one of"),
    ],
)
def test_an_entrys_own_fields_are_validated_with_their_path(
    key: str, value: object, message: str
) -> None:
    data = orjson.loads(encode_entry(LogEntry(3, 1, reports(), "r1", committed_ns=9)))
    data[key] = value
    with pytest.raises(CodecError, match=message):
        decode_entry(orjson.dumps(data))
    del data[key]
    if key in ("Index", "Term", "Type"):
        with pytest.raises(CodecError, match=rf"\$\.{key}: required field is missing"):
            decode_entry(orjson.dumps(data))
