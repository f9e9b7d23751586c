"""Bad request bodies of the dispatch, deployment and scheduler-configuration endpoints: a
400 naming the field and the value, before anything reaches the leader."""

from __future__ import annotations

import pytest

from .conftest import Client


@pytest.mark.parametrize(
    ("path", "body", "error"),
    [
        (
            "/v1/job/convert/dispatch",
            {"Meta": {"input": 1}},
            "Meta.input: expected a string, got 1",
        ),
        ("/v1/job/convert/dispatch", {"Payload": 5}, "Payload: expected a string, got 5"),
        (
            "/v1/job/convert/dispatch",
            {"IdempotencyToken": []},
            "IdempotencyToken: expected a string",
        ),
        ("/v1/deployment/pause/d1", {"Pause": "yes"}, 'Pause: expected a boolean, got "yes"'),
        ("/v1/deployment/promote/d1", {"Groups": "web"}, 'Groups: expected a list, got "web"'),
        (
            "/v1/deployment/allocation-health/d1",
            {"HealthyAllocationIDs": [3]},
            "HealthyAllocationIDs[0]: expected a string, got 3",
        ),
        (
            "/v1/operator/scheduler/configuration",
            {"SchedulerAlgorithm": "fastest"},
            "SchedulerAlgorithm",
        ),
    ],
)
def test_a_bad_field_is_a_400_that_names_it(
    call: Client, path: str, body: dict, error: str
) -> None:
    reply = call("POST", path, body)
    assert reply.status == 400, reply.body
    assert error in str(reply.body)


def test_a_check_and_set_index_must_be_a_number(call: Client) -> None:
    reply = call("PUT", "/v1/operator/scheduler/configuration", {}, cas="abc")
    assert reply.status == 400 and reply.body == "cas: expected an index, got 'abc'"
