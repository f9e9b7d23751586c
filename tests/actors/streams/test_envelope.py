from __future__ import annotations

import orjson
import pytest

from actors.streams import (
    BadMessage,
    decode_envelope,
    decode_message,
    encode_envelope,
    encode_message,
    message_type,
    registry_of,
)
from contracts.evaluation import Evaluation
from contracts.messages import AckOutcome, Envelope, EvalAck, EvalDelivery
from contracts.state_log import LogEntry, UpsertEvals

REGISTRY = registry_of(EvalAck, EvalDelivery, LogEntry)
TRACE = {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01", "tracestate": "k=v"}


def test_message_round_trip_with_trace() -> None:
    ack = EvalAck(eval_id="e1", token="t1", outcome=AckOutcome.NACK, worker="w1", reason="x")
    fields = encode_message(message_type(ack), ack, TRACE)
    assert fields[b"t"] == b"EvalAck"
    assert orjson.loads(fields[b"b"])["EvalID"] == "e1"
    assert fields[b"tp"] == TRACE["traceparent"].encode()
    assert fields[b"ts"] == b"k=v"
    assert decode_message(fields, REGISTRY) == ("EvalAck", ack, TRACE)


def test_nested_records_and_log_entries_round_trip() -> None:
    delivery = EvalDelivery(eval=Evaluation(id="e1", priority=70), token="t", wait_index=3)
    assert decode_message(encode_message("EvalDelivery", delivery), REGISTRY)[1] == delivery
    entry = LogEntry(index=7, term=2, change=UpsertEvals(evals=(Evaluation(id="e2"),)))
    assert decode_message(encode_message("LogEntry", entry), REGISTRY)[1] == entry


def test_envelope_without_trace_has_no_trace_fields() -> None:
    fields = encode_envelope(Envelope("EvalAck", b"{}"))
    assert set(fields) == {b"t", b"b"}
    assert decode_envelope(fields) == Envelope("EvalAck", b"{}", {})


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, "no fields"),
        ({b"b": b"{}"}, "missing field 't'"),
        ({b"t": b"EvalAck"}, "missing field 'b'"),
        ({b"t": b"\xff\xfe", b"b": b"{}"}, "field 't' is not UTF-8"),
        ({b"t": b"Bogus", b"b": b"{}"}, "unknown message type 'Bogus'"),
        ({b"t": b"EvalAck", b"b": b"{not json"}, "bad EvalAck body: $: not valid JSON"),
        ({b"t": b"EvalAck", b"b": b"[1]"}, "bad EvalAck body: $: expected an object"),
        (
            {b"t": b"EvalAck", b"b": b'{"EvalID": "e", "Token": 5, "Outcome": "ack"}'},
            "bad EvalAck body: $.Token: expected a string, got 5",
        ),
        (
            {b"t": b"EvalAck", b"b": b'{"EvalID": "e", "Token": "t", "Outcome": "maybe"}'},
            "bad EvalAck body: $.Outcome: expected one of ack, nack",
        ),
        (
            {
                b"t": b"EvalDelivery",
                b"b": b'{"Eval": {"ID": "e", "Priority": "hi"}, "Token": "t", "WaitIndex": 1}',
            },
            "$.Eval.Priority: expected an integer",
        ),
        ({b"t": b"LogEntry", b"b": b'{"Index": 1}'}, "bad LogEntry body: $.Term: required"),
    ],
)
def test_bad_messages_name_the_problem(fields: dict[bytes, bytes], expected: str) -> None:
    with pytest.raises(BadMessage) as info:
        decode_message(fields, REGISTRY)
    assert expected in info.value.reason
    assert str(info.value) == info.value.reason
