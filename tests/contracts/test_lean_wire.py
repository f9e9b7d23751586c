"""The lean wire form (to_lean_wire): fields holding their default are left out, and every
decoder reads it back as the very record that was encoded."""

from __future__ import annotations

import dataclasses

import orjson
import pytest

from contracts import (
    Allocation,
    EvalStatus,
    Evaluation,
    Job,
    Resources,
    Task,
    TaskGroup,
    from_wire,
    to_wire,
)
from contracts.codec import _decoder_for_type, lean_dumps, to_lean_wire
from contracts.fast_decode import fast_decoder
from contracts.messages import EvalDelivery, LeaderRequest, RequestKind
from contracts.state_log import LogEntry, UpsertJob, decode_entry, encode_entry

TASK = Task("srv", "mock", {"run_for": "1h"}, resources=Resources(10, 16))
SMALL_JOB = Job("j", "j", datacenters=("dc1",), task_groups=(TaskGroup("app", tasks=(TASK,)),))


def _both_decoders(cls: type, wire: object) -> tuple[object, object]:
    wire = orjson.loads(orjson.dumps(wire))
    return fast_decoder(cls, True)(wire), _decoder_for_type(cls)(wire, "$", "error")


def test_fields_holding_their_default_are_left_out_and_others_kept() -> None:
    evaluation = Evaluation(id="e1", job_id="j", priority=70, status=EvalStatus.PENDING)
    wire = to_lean_wire(evaluation)
    assert wire["Priority"] == 70  # not the default 50: sent
    assert "Status" not in wire and "Namespace" not in wire and "FailedTGAllocs" not in wire
    assert set(to_wire(evaluation)) > set(wire)


def test_a_falsy_value_that_is_not_the_default_is_sent() -> None:
    group = TaskGroup("app", count=0, tasks=(TASK,))  # the default count is 1
    assert to_lean_wire(group)["Count"] == 0
    assert from_wire(TaskGroup, to_lean_wire(group)).count == 0
    quick = dataclasses.replace(TASK, kill_timeout_s=0.0)  # the default is 5.0
    assert to_lean_wire(quick)["KillTimeoutS"] == 0.0


def test_an_int_is_not_taken_for_an_equal_float_default() -> None:
    # 5 == 5.0, but the wire keeps what the record holds: only a float 5.0 is the default.
    task = dataclasses.replace(TASK, kill_timeout_s=5)
    assert to_lean_wire(task)["KillTimeoutS"] == 5
    assert "KillTimeoutS" not in to_lean_wire(TASK)


@pytest.mark.parametrize(
    "record",
    [
        SMALL_JOB,
        dataclasses.replace(SMALL_JOB, priority=90, meta={"a": "b"}, stop=True),
        Evaluation(id="e1", job_id="j"),
        Allocation(id="a1", name="j.app[0]", node_id="n1", job_id="j", task_group="app"),
        EvalDelivery(Evaluation(id="e1", job_id="j"), "token", 7),
        LeaderRequest(RequestKind.REGISTER_JOB, request_id="r1", job=SMALL_JOB),
    ],
    ids=lambda r: type(r).__name__,
)
def test_both_decoders_read_the_lean_form_back_as_the_record(record: object) -> None:
    fast, slow = _both_decoders(type(record), to_lean_wire(record))
    assert fast == slow == record
    assert len(lean_dumps(record)) < len(orjson.dumps(to_wire(record)))


def test_every_record_made_of_its_defaults_is_read_back_from_the_lean_form(
    codec_records: set[type],
) -> None:
    """A record of defaults only is the worst case for leaving fields out: all of them go."""
    records = codec_records
    built = 0
    for cls in records:
        try:
            default = cls()
        except (TypeError, ValueError):
            continue  # required fields, or defaults that do not validate alone
        built += 1
        fast, slow = _both_decoders(cls, to_lean_wire(default))
        assert fast == slow == default, cls.__name__
    assert built > 20


def test_a_registration_entry_is_lean_and_decodes_to_the_same_entry() -> None:
    entry = LogEntry(7, 1, UpsertJob(SMALL_JOB, (Evaluation(id="e1", job_id="j"),)), "r1")
    raw = encode_entry(entry)
    assert b'"Constraints"' not in raw and b'"Priority"' not in raw
    assert decode_entry(raw) == entry
