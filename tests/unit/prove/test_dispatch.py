"""Reading a package's dispatch counts: typed, bounded, refused in one line, and held to the expected calls."""

from __future__ import annotations

import json

import pytest

from kernel_agent.prove.dispatch import (
    MAX_KERNELS,
    MAX_REASONS,
    MAX_TEXT,
    DispatchCount,
    DispatchError,
    dispatch_findings,
    parse_counts,
)

GOOD = {
    "rms_norm": {"optimized": 12, "fallback": {}},
    "gelu": {"optimized": 2, "fallback": {"not verified on cpu/float16": 6, "forced by PKG_FORCE_REFERENCE": 0}},
}


def test_a_good_snapshot_parses_as_data_or_json() -> None:
    counts = parse_counts(GOOD)
    assert counts == parse_counts(json.dumps(GOOD))
    assert counts["rms_norm"] == DispatchCount("rms_norm", 12, ())
    assert counts["gelu"].fallbacks == (("not verified on cpu/float16", 6),)  # a zero count is no fallback
    assert (counts["gelu"].calls, counts["gelu"].fell_back) == (8, 6)


@pytest.mark.parametrize(
    "snapshot,reason",
    [
        ([1, 2], "expected an object of kernels, not list"),
        ("{not json", "not JSON"),
        ("[" * 100_000 + "]" * 100_000, "not JSON (maximum recursion depth"),  # nested too deep
        ({"k": 3}, "k: expected"),
        ({"k": {"optimized": 1}}, "k: expected"),
        ({"k": {"optimized": 1, "fallback": {}, "extra": 1}}, "k: expected"),
        ({"k": {"optimized": -1, "fallback": {}}}, "k: optimized: a count must be an integer"),
        ({"k": {"optimized": True, "fallback": {}}}, "a count must be an integer"),
        ({"k": {"optimized": 1.0, "fallback": {}}}, "a count must be an integer"),
        ({"k": {"optimized": 10**30, "fallback": {}}}, "a count must be an integer"),
        ({"k": {"optimized": 1, "fallback": []}}, "fallback must be an object of reasons, not list"),
        ({"k": {"optimized": 1, "fallback": {"why": "3"}}}, "k: why: a count must be an integer"),
        ({"k": {"optimized": 1, "fallback": {"a\x1b[2Jb": 1}}}, "a fallback reason must be printable text"),
        ({"k": {"optimized": 1, "fallback": {"x" * 201: 1}}}, "a fallback reason must be printable text"),
        ({"": {"optimized": 1, "fallback": {}}}, "a kernel name must be printable text"),
        ({f"k{i}": {"optimized": 0, "fallback": {}} for i in range(MAX_KERNELS + 1)}, "kernels, more than"),
        ({"k": {"optimized": 0, "fallback": {f"r{i}": 1 for i in range(MAX_REASONS + 1)}}}, "fallback reasons"),
    ],
)
def test_a_hostile_snapshot_is_refused_in_one_line(snapshot: object, reason: str) -> None:
    with pytest.raises(DispatchError) as error:
        parse_counts(snapshot)
    message = str(error.value)
    assert reason in message and "\n" not in message and len(message) < 300
    findings = dispatch_findings(snapshot, {"k": 1})
    assert findings.lines == (f"dispatch counts refused: {message}",) and not findings.complete


def test_json_text_over_the_bound_is_refused_before_parsing() -> None:
    with pytest.raises(DispatchError, match="more than"):
        parse_counts(" " * (MAX_TEXT + 1))


def test_every_call_on_the_optimized_path_is_complete() -> None:
    findings = dispatch_findings({"rms_norm": {"optimized": 12, "fallback": {}}}, {"rms_norm": 12})
    assert findings.lines == ("rms_norm: 12 of 12 calls on the optimized path",) and findings.complete


def test_all_calls_fell_back_reads_no_kernel_ran() -> None:
    snapshot = {
        "rms_norm": {"optimized": 0, "fallback": {"not verified on cpu/float16": 12}},
        "gelu": {"optimized": 0, "fallback": {"not verified on cpu/float16": 4, "requires TRITON_INTERPRET=1": 2}},
    }
    findings = dispatch_findings(snapshot, {"rms_norm": 12, "gelu": 6})
    assert findings.lines == (
        "no kernel ran: 18 calls fell back (not verified on cpu/float16: 16; requires TRITON_INTERPRET=1: 2)",
        "rms_norm: 0 of 12 calls on the optimized path: 12 fell back (not verified on cpu/float16)",
        "gelu: 0 of 6 calls on the optimized path: 6 fell back (not verified on cpu/float16: 4; "
        "requires TRITON_INTERPRET=1: 2)",
    )
    assert not findings.complete
    one = dispatch_findings({"rms_norm": snapshot["rms_norm"]}, {"rms_norm": 12})
    assert one.lines[0] == "no kernel ran: 12 calls fell back (not verified on cpu/float16)"


def test_partial_missing_and_miscounted_kernels_are_named() -> None:
    snapshot = {
        "rms_norm": {"optimized": 8, "fallback": {"forced by PKG_FORCE_REFERENCE": 4}},
        "gelu": {"optimized": 5, "fallback": {}},
    }
    findings = dispatch_findings(snapshot, {"rms_norm": 12, "gelu": 6, "softmax": 3})
    assert findings.lines == (
        "rms_norm: 8 of 12 calls on the optimized path: 4 fell back (forced by PKG_FORCE_REFERENCE)",
        "gelu: 5 of 6 calls on the optimized path; 5 calls counted where 6 were expected",
        "softmax: no counts from the package (it has no kernel of that name)",
    )
    assert not findings.complete
    extra = dispatch_findings({"gelu": {"optimized": 7, "fallback": {}}}, {"gelu": 6})
    assert extra.lines == ("gelu: 7 of 6 calls on the optimized path; 7 calls counted where 6 were expected",)
    assert not extra.complete


def test_no_call_reached_the_package() -> None:
    findings = dispatch_findings({"gelu": {"optimized": 0, "fallback": {}}}, {"gelu": 6})
    assert findings.lines[0] == "no kernel ran: none of the 6 expected calls reached the package"
    assert not findings.complete
