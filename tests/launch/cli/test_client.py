"""The CLI's HTTP client and entry point, against a canned server: where the address and the
token come from, what a request carries, and how every failure becomes one line on stderr
with a non-zero exit."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import pytest

from launch.cli import main
from launch.cli.client import ApiClient, CliError, segment

Cli = Callable[..., tuple[int, str, str]]


def test_address_and_token_come_from_the_environment_unless_flags_say_otherwise(
    cli: Cli, canned: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    canned.answer("GET", "/v1/jobs", [])
    host_port = canned.address.removeprefix("http://")
    monkeypatch.setenv("DROVER_ADDR", host_port)  # no scheme: http is assumed
    monkeypatch.setenv("DROVER_TOKEN", "env-token")
    assert cli("job", "status") == (0, "No running jobs\n", "")

    monkeypatch.setenv("DROVER_ADDR", "http://127.0.0.1:9")  # nothing listens there
    assert cli("-address", canned.address, "-token", "flag-token", "job", "status")[0] == 0
    assert cli("--address", canned.address, "--token", "", "job", "status")[0] == 0
    env, flags, none = canned.requests
    assert (env.path, env.query) == ("/v1/jobs", {"namespace": "default"})
    assert env.headers["X-Nomad-Token"] == "env-token"
    assert flags.headers["X-Nomad-Token"] == "flag-token"
    assert "X-Nomad-Token" not in none.headers  # an empty token sends none


def test_a_request_escapes_ids_drops_unset_query_values_and_reads_the_index(canned: Any) -> None:
    canned.answer("GET", "/v1/jobs", [{"ID": "a"}], index=42)
    client = ApiClient(canned.address + "/", token="")
    assert client.addr == canned.address  # paths are appended to it as they are
    assert client.request("GET", "/v1/jobs", query={"prefix": None, "namespace": "*"}) == (
        [{"ID": "a"}],
        42,
    )
    assert canned.requests[-1].query == {"namespace": "*"}

    job_id = "web/blue green?"
    with pytest.raises(CliError):
        client.get(f"/v1/job/{segment(job_id)}")
    assert canned.requests[-1].path == "/v1/job/web%2Fblue%20green%3F"

    canned.answer("POST", "/v1/job/x/evaluate", {"EvalID": "e1"})
    assert client.post("/v1/job/x/evaluate") == {"EvalID": "e1"}
    sent = canned.requests[-1]
    assert sent.body == {} and sent.headers["Content-Type"] == "application/json"


def test_http_errors_and_an_unreachable_agent_are_one_line_with_exit_1(
    cli: Cli, canned: Any
) -> None:
    canned.answer("GET", "/v1/job/web", "job not found\n", status=404)
    code, out, err = cli("-address", canned.address, "job", "status", "web")
    assert (code, out, err) == (1, "", "drover: GET /v1/job/web: 404 job not found\n")
    canned.answer("GET", "/v1/nodes", "", status=500)  # no message: the status's reason
    code, _, err = cli("-address", canned.address, "node", "status")
    assert (code, err) == (1, "drover: GET /v1/nodes: 500 Internal Server Error\n")

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code, _, err = cli("-address", f"127.0.0.1:{port}", "eval", "list")
    assert code == 1 and err.count("\n") == 1
    assert err.startswith(f"drover: cannot reach the drover agent at http://127.0.0.1:{port} (")
    assert err.endswith("is `drover agent -dev` running, and is DROVER_ADDR right?\n")


def test_usage_errors_exit_2(cli: Cli, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in ([], ["job"], ["job", "status", "-bogus"], ["job", "scale", "web", "g", "many"]):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 2
        assert "usage: drover" in capsys.readouterr().err
    code, _, err = cli("agent")  # only -dev exists so far
    assert (code, err) == (2, "drover: agent: only -dev mode is available so far\n")
