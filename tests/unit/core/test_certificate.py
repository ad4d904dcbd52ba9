"""A certificate survives its own JSON, and a file that is not one is refused with one line."""

from __future__ import annotations

import json

import pytest

from kernel_agent.core.certificate import (
    Against,
    Bundle,
    Certificate,
    CertificateError,
    Checks,
    Device,
    Origin,
    Review,
    ShapeSpeedup,
    VerdictPart,
)


def sample() -> Certificate:
    return Certificate(
        kernel="cpp_softmax",
        problem="cpp_softmax",
        kind="native",
        backend="cpp",
        variant="pip",
        run_id=3,
        candidate_id=7,
        problem_hash="ab" * 32,
        reference_sha256="cd" * 32,
        baseline_sha256="ef" * 32,
        candidate_sha256="01" * 32,
        diff_vs_baseline="--- a\n+++ b\n",
        verdict=VerdictPart(
            status="faster",
            reason="",
            speedup=1.5,
            ci=[1.4, 1.6],
            ci_level="95%",
            rounds=30,
            record_candidate=7,
            pending="",
            per_shape=[ShapeSpeedup([64, 512], "float32", 1.5, [1.4, 1.6], 0.3, 0.2)],
            against={"eager": Against(1.2, [1.1, 1.3]), "compile": Against(None, None, "no point")},
        ),
        checks=Checks(10, 10, [[1, 1]], [[64, 512]], ["float32"], ["normal"], {"[1, 1] float32": 5}, {}),
        isolation="bubblewrap",
        device=Device("cpu", "Xeon", None, None, 1, "linux"),
        versions={"torch": "2.5", "triton": None},
        review=Review([], [], None, None, None),
        origin=Origin("openai", "openai", "m", "http://127.0.0.1", "12" * 32, {"system.j2": "34" * 32}),
        evaluated_at="2026-12-04T00:00:00",
        files={"_kernel_cpp_softmax.py": "56" * 32},
    )


def test_a_certificate_and_its_bundle_round_trip_through_json() -> None:
    c = sample()
    assert Certificate.from_json(json.loads(json.dumps(c.to_json()))) == c
    bundle = Bundle("softmaxes", "pip", "pip", [c])
    assert Bundle.from_json(json.loads(json.dumps(bundle.to_json()))) == bundle


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"schema": "other"}, "not a kernel-agent certificate"),
        ({"schema_version": 2}, "schema version 2"),
        ({"surprise": 1}, "unknown field(s) surprise"),
        ({"run_id": "3"}, "run_id has the wrong type"),
        ({"origin": "openai"}, "origin must be an object"),
    ],
)
def test_a_changed_certificate_is_refused_with_one_line(change: dict, says: str) -> None:
    data = {**sample().to_json(), **change}
    with pytest.raises(CertificateError, match=None) as caught:
        Certificate.from_json(data)
    assert says in str(caught.value) and "\n" not in str(caught.value)
