"""The generated fast decoders agree with the validating decoder on every record type, and
hand anything doubtful back to it so errors still name their path."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson
import pytest

from contracts import (
    Affinity,
    AllocatedDevice,
    AllocatedResources,
    Allocation,
    AllocMetric,
    CodecError,
    Constraint,
    DesiredUpdates,
    DeviceInstance,
    DeviceRequest,
    DriverInfo,
    Evaluation,
    Job,
    Node,
    NodeDeviceResource,
    NodeResources,
    Plan,
    PlanAnnotations,
    PlanResult,
    RejectedNode,
    RescheduleEvent,
    Resources,
    ScalingPolicy,
    Spread,
    SpreadTarget,
    Task,
    TaskGroup,
    UpdateStrategy,
    from_wire,
    to_wire,
)
from contracts.codec import _decoder_for_type, to_lean_wire
from contracts.fast_decode import Slow, fast_decoder
from contracts.messages import EvalDelivery, PlanSubmission

TASK = Task(
    name="t",
    driver="mock",
    config={"run_for": "1m", "nested": {"a": [1, 2]}},
    env={"A": "1"},
    resources=Resources(
        cpu=250,
        memory_mb=128,
        devices=(
            DeviceRequest("nvidia/gpu", 2, (Constraint("${device.attr.memory}", "40 GiB", ">="),)),
        ),
    ),
    constraints=(Constraint("${attr.kernel.name}", "linux"),),
    affinities=(Affinity("${node.datacenter}", "dc1", "=", 30),),
)
JOB = Job(
    id="web",
    name="web",
    datacenters=("dc1", "dc2"),
    spreads=(Spread("${node.datacenter}", 50, (SpreadTarget("dc1", 70),)),),
    task_groups=(
        TaskGroup(
            "g",
            3,
            scaling=ScalingPolicy(min=1, max=5, policy={"cooldown": "1m"}),
            tasks=(TASK,),
            update=UpdateStrategy(max_parallel=2),
        ),
    ),
    meta={"team": "a"},
    version=4,
)
NODE = Node(
    id="n1",
    attributes={"kernel.name": "linux"},
    drivers={"mock": DriverInfo()},
    node_resources=NodeResources(
        cpu=4000,
        memory_mb=8192,
        devices=(
            NodeDeviceResource(
                "nvidia",
                "gpu",
                "A100",
                (DeviceInstance("g0"), DeviceInstance("g1", False)),
                {"memory": "80 GiB"},
            ),
        ),
    ),
).with_computed_class()
ALLOC = Allocation(
    id="a1",
    name="web.g[0]",
    node_id="n1",
    job_id="web",
    task_group="g",
    allocated_resources=AllocatedResources(
        250, 128, 0, (AllocatedDevice("nvidia", "gpu", "A100", ("g0",)),)
    ),
    reschedule_events=(RescheduleEvent(5, "a0", "n0"),),
)
EVAL = Evaluation(
    id="e1",
    job_id="web",
    failed_tg_allocs={"g": AllocMetric(nodes_evaluated=3, dimension_exhausted={"cpu": 2})},
    class_eligibility={"v1:1": True},
    queued_allocations={"g": 2},
    plan_annotations=PlanAnnotations({"g": DesiredUpdates(place=3)}),
)
PLAN = Plan(eval_id="e1", node_update={"n1": (ALLOC,)}, node_allocation={"n1": (ALLOC,)})
SAMPLES = [
    JOB,
    NODE,
    ALLOC,
    EVAL,
    PLAN,
    PlanResult(
        node_allocation={"n1": (ALLOC,)},
        rejected_nodes=(RejectedNode("n2", "cpu exhausted"),),
        refresh_index=9,
    ),
    PlanSubmission(PLAN, "reply", 2, (EVAL,)),
    EvalDelivery(EVAL, "token", 7),
]


@pytest.mark.parametrize("encode", [to_wire, to_lean_wire], ids=["full", "lean"])
@pytest.mark.parametrize("record", SAMPLES, ids=lambda r: type(r).__name__)
def test_fast_and_validating_decoders_agree(record: object, encode: Any) -> None:
    """On the full form and on the lean one (fields holding their default left out)."""
    wire = orjson.loads(orjson.dumps(encode(record)))
    fast = fast_decoder(type(record), True)(wire)
    slow = _decoder_for_type(type(record))(wire, "$", "error")
    assert fast == slow == record


def test_fast_path_declines_bad_input_and_the_error_names_the_path() -> None:
    wire = orjson.loads(orjson.dumps(to_wire(JOB)))
    wire["TaskGroups"][0]["Tasks"][0]["Resources"]["CPU"] = "lots"
    with pytest.raises(Slow):
        fast_decoder(Job, True)(wire)
    with pytest.raises(
        CodecError, match=r"\$\.TaskGroups\[0\]\.Tasks\[0\]\.Resources\.CPU: expected an integer"
    ):
        from_wire(Job, wire)


def test_unknown_fields_are_refused_only_in_strict_mode() -> None:
    wire = orjson.loads(orjson.dumps(to_wire(ALLOC))) | {"Extra": 1}
    with pytest.raises(CodecError, match=r"\$\.Extra: unknown field"):
        from_wire(Allocation, wire)
    assert from_wire(Allocation, wire, unknown="ignore") == ALLOC


def test_missing_fields_take_defaults_and_nulls_mean_default() -> None:
    decoded = from_wire(Allocation, {"ID": "x", "NodeID": None})
    assert decoded == dataclasses.replace(Allocation(id="x"))
    with pytest.raises(CodecError, match=r"\$\.ID: required field is missing"):
        from_wire(Allocation, {"Name": "x"})


def test_compact_alloc_entries_round_trip_mixed_groups() -> None:
    from contracts.state_log import (
        LogEntry,
        UpsertAllocRows,
        UpsertAllocs,
        decode_entry,
        encode_entry,
    )

    stopped = dataclasses.replace(ALLOC, id="a2", desired_status="stop", create_index=4)
    placed = [
        dataclasses.replace(ALLOC, id=f"p{i}", name=f"web.g[{i}]", node_id=f"n{i}")
        for i in range(5)
    ]
    entry = LogEntry(9, 2, UpsertAllocs((stopped, *placed, ALLOC), evals=(EVAL,)))
    raw = encode_entry(entry)
    assert len(orjson.loads(raw)["Change"]["AllocGroups"]) == 2
    assert decode_entry(raw) == entry
    # A follower may leave the groups unbuilt; they expand to the same records, in order,
    # and encode as the entry they came from.
    compact = decode_entry(raw, compact=True)
    assert isinstance(compact.change, UpsertAllocRows)
    assert [len(g.rows) for g in compact.change.groups] == [1, 6]
    assert compact.change.expanded() == entry.change
    assert encode_entry(compact) == raw


@pytest.mark.parametrize("compact", [False, True])
def test_compact_alloc_rows_are_validated_with_their_path(compact: bool) -> None:
    from contracts.state_log import LogEntry, UpsertAllocs, decode_entry, encode_entry

    data = orjson.loads(encode_entry(LogEntry(1, 0, UpsertAllocs((ALLOC,)))))
    data["Change"]["AllocGroups"][0]["Rows"][0][6] = "seven"
    with pytest.raises(
        CodecError, match=r"\$\.Change\.AllocGroups\[0\]\.Rows\[0\]: expected \[id, name"
    ):
        decode_entry(orjson.dumps(data), compact=compact)
    data["Change"]["AllocGroups"][0]["Shared"]["JobVersion"] = "x"
    with pytest.raises(
        CodecError, match=r"AllocGroups\[0\]\.Shared\.JobVersion: expected an integer"
    ):
        decode_entry(orjson.dumps(data), compact=compact)


def test_plain_alloc_entries_are_still_accepted() -> None:
    from contracts.state_log import decode_entry

    plain = {"Index": 3, "Term": 1, "Type": "UpsertAllocs", "Change": {"Allocs": [to_wire(ALLOC)]}}
    assert decode_entry(orjson.dumps(plain)).change.allocs == (ALLOC,)  # type: ignore[union-attr]


def test_a_records_generic_decoder_is_compiled_once() -> None:
    # Custom wire forms (plans, client reports) call it for every message they decode.
    from contracts import Plan
    from contracts.codec import generic_decoder

    assert generic_decoder(Plan) is generic_decoder(Plan)
    assert generic_decoder(Allocation)(to_wire(ALLOC), "$", "error") == ALLOC


# -- the fallback: only declined input falls back, and it is counted ----------------------------


def _fallbacks(cls: type) -> int:
    from contracts.codec import fast_path_fallbacks

    return fast_path_fallbacks().get(f"{cls.__module__}.{cls.__qualname__}", 0)


@pytest.mark.parametrize("record", SAMPLES, ids=lambda r: type(r).__name__)
def test_valid_input_never_falls_back(record: object) -> None:
    wire = orjson.loads(orjson.dumps(to_wire(record)))
    before = _fallbacks(type(record))
    assert from_wire(type(record), wire) == record
    assert _fallbacks(type(record)) == before


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("Count", "lots", r"\$\.TaskGroups\[0\]\.Count: expected an integer"),
        ("Count", True, r"\$\.TaskGroups\[0\]\.Count: expected an integer"),
        ("Tasks", {"not": "a list"}, r"\$\.TaskGroups\[0\]\.Tasks: expected a list"),
        ("Name", None, r"\$\.TaskGroups\[0\]\.Name: expected a string"),
    ],
    ids=["string-for-int", "bool-for-int", "object-for-list", "null-for-required"],
)
def test_bad_input_falls_back_counted_and_the_error_names_the_path(
    field: str, value: object, error: str
) -> None:
    wire = orjson.loads(orjson.dumps(to_wire(JOB)))
    wire["TaskGroups"][0][field] = value
    before = _fallbacks(Job)
    with pytest.raises(CodecError, match=error):
        from_wire(Job, wire)
    assert _fallbacks(Job) == before + 1


def test_a_bad_enum_value_declines_with_slow_and_the_error_names_the_path() -> None:
    wire = orjson.loads(orjson.dumps(to_wire(ALLOC)))
    for bad in ("sleeping", ["running"], 3):  # unknown, unhashable, wrong type
        wire["ClientStatus"] = bad
        with pytest.raises(Slow):
            fast_decoder(Allocation, True)(wire)
        before = _fallbacks(Allocation)
        with pytest.raises(CodecError, match=r"\$\.ClientStatus: expected one of pending"):
            from_wire(Allocation, wire)
        assert _fallbacks(Allocation) == before + 1


def test_a_missing_required_field_and_an_unknown_one_fall_back_counted() -> None:
    before = _fallbacks(Allocation)
    with pytest.raises(CodecError, match=r"\$\.ID: required field is missing"):
        from_wire(Allocation, {"Name": "x"})
    with pytest.raises(CodecError, match=r"\$\.Extra: unknown field"):
        from_wire(Allocation, to_wire(ALLOC) | {"Extra": 1})
    assert _fallbacks(Allocation) == before + 2


def test_enum_members_decode_on_the_fast_path() -> None:
    # In-process data (to_wire without a JSON round trip) carries enum members, not strings.
    wire = to_wire(ALLOC)
    assert fast_decoder(Allocation, True)(wire) == ALLOC


@pytest.mark.parametrize("error", [ZeroDivisionError, KeyError, TypeError, ValueError])
def test_a_bug_in_a_generated_decoder_propagates_instead_of_falling_back(
    monkeypatch: pytest.MonkeyPatch, error: type[Exception]
) -> None:
    from contracts import fast_decode

    def broken(value: object) -> object:
        raise error("generated code is wrong")

    monkeypatch.setitem(fast_decode._cache, (Allocation, True), broken)
    before = _fallbacks(Allocation)
    with pytest.raises(error, match="generated code is wrong") as raised:
        from_wire(Allocation, to_wire(ALLOC))
    assert type(raised.value) is error  # not a CodecError from the validating path
    assert _fallbacks(Allocation) == before


def test_every_record_with_a_decodable_shape_compiles_a_fast_decoder(
    codec_records: set[type],
) -> None:
    # A compile error now propagates from from_wire: every record the codec decodes must
    # compile (an Envelope carries raw bytes and a LogEntry a union: both have their own codec).
    records = codec_records
    from contracts.messages import Envelope
    from contracts.state_log import LogEntry

    assert len(records) > 40
    for cls in records - {Envelope, LogEntry}:
        for strict in (True, False):
            fast_decoder(cls, strict)


def test_a_tuple_of_records_takes_the_fast_path_record_by_record() -> None:
    """The log's lists of evaluations (`tuple[Evaluation, ...]`) decode each record on its
    fast path; a bad one falls back, counted, and the error names its index."""
    evals = (EVAL, dataclasses.replace(EVAL, id="other"))
    wire = orjson.loads(orjson.dumps(to_wire(evals)))
    before = _fallbacks(Evaluation)
    assert from_wire(tuple[Evaluation, ...], wire) == evals
    assert from_wire(tuple[Evaluation, ...], []) == ()
    assert _fallbacks(Evaluation) == before
    wire[1]["Priority"] = "high"
    with pytest.raises(CodecError, match=r"\$\[1\]\.Priority: expected an integer"):
        from_wire(tuple[Evaluation, ...], wire)
    assert _fallbacks(Evaluation) == before + 1
    with pytest.raises(CodecError, match=r"\$: expected a list"):
        from_wire(tuple[Evaluation, ...], {"not": "a list"})


def test_defaults_left_out_are_fresh_where_mutable_and_shared_where_not() -> None:
    """An empty tuple default is a constant; a dict default is a new dict per record (one
    record's meta written to must not show up in the next)."""
    decode = fast_decoder(Task, True)
    first, second = decode({"Name": "a"}), decode({"Name": "b", "Meta": None})
    assert first.constraints == () and second.constraints == ()
    assert first.meta == {} and second.meta == {}
    assert first.meta is not second.meta and first.config is not second.config
    assert first.resources == Resources() and first.resources is not second.resources


def test_a_nested_records_decoder_is_called_directly_once_compiled() -> None:
    """A nested record's decoder is compiled at its first value (records refer to each
    other); from then on the decoders that call it hold it, not the deferring stand-in."""
    from contracts.fast_decode import _Lazy

    decode = fast_decoder(TaskGroup, True)
    wire = orjson.loads(orjson.dumps(to_wire(TaskGroup(name="g", tasks=(Task(name="t"),)))))
    assert decode(wire) == TaskGroup(name="g", tasks=(Task(name="t"),))
    task_decoder = decode.__globals__[f"_record_{id(Task)}_1"]
    assert not isinstance(task_decoder, _Lazy)
    assert task_decoder is fast_decoder(Task, True)
    assert decode(wire) == TaskGroup(name="g", tasks=(Task(name="t"),))


def test_a_decoded_record_is_its_own_class_and_stays_frozen() -> None:
    """Records are built through a writable twin of their class and then given their own
    class: what comes out is indistinguishable from a constructed record."""
    decoded = fast_decoder(Evaluation, True)(orjson.loads(orjson.dumps(to_wire(EVAL))))
    assert type(decoded) is Evaluation and decoded == EVAL
    with pytest.raises(dataclasses.FrozenInstanceError):
        decoded.id = "changed"  # type: ignore[misc]
    assert dataclasses.replace(decoded, id="other").id == "other"
