"""What a worker's replies may claim, held on the trusted side (`host/session.py`): a `describe` reply becomes a
typed record only with one finite, positive claim per call and one description per call; an output description
only as a bounded list of well-formed entries. Anything else is the candidate's refusal, never an exception."""

from __future__ import annotations

import math

import pytest

from kernel_agent.core.verdict import Status
from kernel_agent.sandbox.host.session import Described, WorkerFailure, described_reply, output_refs
from kernel_agent.sandbox.tensors import MAX_TENSORS, OutputRef

REF = [4096, "float32", [2, 3], [3, 1], "cpu"]


def reply(**fields: object) -> dict[str, object]:
    good = {"ok": True, "host_ms": [0.5, 0.25], "device_ms": None, "outputs": [[REF], [REF]], "inputs": [[], []]}
    return good | fields


def test_a_well_formed_description_is_a_typed_record() -> None:
    assert described_reply(reply(), 2, cuda=False) == Described([0.5, 0.25], None, [[REF], [REF]], [[], []])
    on_gpu = described_reply(reply(host_ms=[1, 2], device_ms=[0.75, 1.5]), 2, cuda=True)
    assert on_gpu.host_ms == [1.0, 2.0] and on_gpu.device_ms == [0.75, 1.5]


@pytest.mark.parametrize(
    ("fields", "cuda", "reason"),
    [
        ({"host_ms": [0.5]}, False, "malformed timings"),
        ({"host_ms": [0.5, -1.0]}, False, "malformed timings"),
        ({"host_ms": [0.5, math.nan]}, False, "malformed timings"),
        ({"host_ms": [0.5, True]}, False, "malformed timings"),
        ({"host_ms": "fast"}, False, "malformed timings"),
        ({"device_ms": None}, True, "malformed timings"),
        ({"outputs": [[REF]]}, False, "not one list per call"),
        ({"inputs": None}, False, "not one list per call"),
    ],
)
def test_a_description_off_its_shape_is_refused(fields: dict[str, object], cuda: bool, reason: str) -> None:
    with pytest.raises(WorkerFailure) as refused:
        described_reply(reply(**fields), 2, cuda)
    assert refused.value.status == Status.REJECTED and reason in refused.value.reason


def test_output_descriptions_are_decoded_field_by_field_and_bounded() -> None:
    assert output_refs([REF], "outputs") == [OutputRef(4096, "float32", (2, 3), (3, 1), "cpu")]
    for bad, reason in [
        ({"0": REF}, "not a list of at most"),
        ([REF] * (MAX_TENSORS + 1), "not a list of at most"),
        ([[-1, "float32", [2], [1], "cpu"]], "not a valid pointer"),
        ([[4096, "float32", [2, 3], [1], "cpu"]], "shape and strides do not match"),
    ]:
        with pytest.raises(WorkerFailure) as refused:
            output_refs(bad, "inputs")
        assert refused.value.status == Status.REJECTED and reason in refused.value.reason, bad
