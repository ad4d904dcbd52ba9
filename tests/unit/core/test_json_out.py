"""JSON that strict readers accept: non-finite numbers as strings, read back as floats."""

from __future__ import annotations

import json
import math

import pytest

from kernel_agent.core import json_out
from kernel_agent.core.verdict import Verdict


def strict(text: str):
    """A reader that refuses Infinity and NaN, as jq and JSON.parse do."""

    def refuse(word: str):
        raise ValueError(f"not JSON: {word}")

    return json.loads(text, parse_constant=refuse)


def test_a_verdict_with_infinite_errors_is_valid_json_and_reads_back() -> None:
    verdict = Verdict(
        status="incorrect",
        reason="relative norm error inf exceeds 1e-05",
        checks=[{"case": "c", "rel_norm_error": math.inf, "base_max_abs_error": -math.inf, "x": [math.nan, 1.5]}],
    )
    with pytest.raises(ValueError):
        strict(json.dumps(verdict.to_dict()))  # what `eval --json` printed before
    data = strict(json_out.dumps(verdict.to_dict()))
    check = data["checks"][0]
    assert check["rel_norm_error"] == "inf" and check["base_max_abs_error"] == "-inf" and check["x"][0] == "nan"
    assert json_out.number(check["rel_norm_error"]) == math.inf and math.isnan(json_out.number(check["x"][0]))
    assert json_out.number(check["x"][1]) == 1.5 and json_out.number("fast") is None and json_out.number(True) is None


def test_finite_documents_are_written_as_json_dumps_writes_them() -> None:
    document = {"a": [1, 2.5, {"b": None, "c": "inf text"}], "d": (1, 2)}
    assert json_out.dumps(document, sort_keys=True) == json.dumps(document, sort_keys=True)
