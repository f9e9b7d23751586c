"""bench.fuzz with a hundred generated inputs per surface: every bad input is refused the way
its surface promises (a 4xx with the state unchanged, or the parser's own error), and the
harness itself counts what escapes."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st

from bench import fuzz


@pytest.mark.parametrize("surface", sorted(fuzz.SURFACES))
def test_every_surface_refuses_bad_input_cleanly(surface: str) -> None:
    result = fuzz.SURFACES[surface](100)
    assert result["inputs"] == 100
    assert result["failures"] == 0, result["examples"]


def test_the_harness_reports_what_escapes() -> None:
    def check(value: int) -> str | None:
        if value % 2:
            raise KeyError(value)
        return "odd handling" if value == 4 else None

    result = fuzz.run_surface(st.integers(0, 9), check, 50)
    assert 0 < result["inputs"] <= 50 and result["failures"] > 0  # 10 values: fewer runs
    assert any(e.startswith("KeyError") for e in result["examples"])


def test_the_api_check_sees_a_5xx_and_a_refusal_that_wrote() -> None:
    client, backend = fuzz._api()
    check = fuzz._api_check(client, backend)
    assert check("POST", "/v1/jobs", b"{}") is None  # a 400, nothing written
    assert check("GET", "/v1/nodes", b"") is None
    written = check("POST", "/v1/job/web/scale", b'{"Count": 2, "Target": {"Group": "frontend"}}')
    assert written is None  # accepted: a 200 may write


def test_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert fuzz.main(["--n", "20", "--surfaces", "stream,job-hcl"]) == 0
    line = capsys.readouterr().out
    assert '"inputs":40' in line and '"failures":0' in line
    with pytest.raises(SystemExit):
        fuzz.main(["--surfaces", "nope"])
