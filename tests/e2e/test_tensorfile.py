"""The wire format is strict: round trips exactly, refuses every malformed file cleanly."""

from __future__ import annotations

import struct

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_agent.core import tensorfile


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.bool])
def test_round_trip_is_bitwise(dtype: torch.dtype) -> None:
    tensors = [torch.randn(3, 5).to(dtype), torch.empty(0, 4, dtype=dtype), torch.randn(()).to(dtype)]
    decoded, meta = tensorfile.decode(tensorfile.encode(tensors, {"k": 1}))
    assert meta == {"k": 1}
    for a, b in zip(tensors, decoded):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def test_size_limit_is_enforced() -> None:
    blob = tensorfile.encode([torch.zeros(1000)])
    with pytest.raises(tensorfile.TensorFileError, match="limit"):
        tensorfile.decode(blob, max_bytes=100)


def test_lying_header_is_refused() -> None:
    header = b'{"tensors": [{"dtype": "float32", "shape": [1000000], "offset": 0, "nbytes": 4000000}], "meta": {}}'
    blob = tensorfile.MAGIC + struct.pack("<Q", len(header)) + header + b"\0" * 16
    with pytest.raises(tensorfile.TensorFileError, match="payload"):
        tensorfile.decode(blob)


@settings(max_examples=1000, deadline=None)
@given(st.binary(max_size=512))
def test_random_bytes_never_raise_anything_but_a_clean_error(blob: bytes) -> None:
    try:
        tensorfile.decode(tensorfile.MAGIC + blob)
    except tensorfile.TensorFileError:
        pass


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=1000, deadline=None)
@given(JSON_VALUES)
def test_random_json_headers_are_refused_cleanly(header_value: object) -> None:
    import json

    header = json.dumps({"tensors": [header_value], "meta": {}}).encode()
    blob = tensorfile.MAGIC + struct.pack("<Q", len(header)) + header + b"\0" * 64
    try:
        tensorfile.decode(blob)
    except tensorfile.TensorFileError:
        pass
