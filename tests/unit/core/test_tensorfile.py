"""The wire format is strict: round trips exactly, refuses every malformed file cleanly.

The 1000-example fuzzing of the decoder stays in tests/e2e/test_tensorfile.py (tens of seconds)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import torch

from kernel_agent.core import tensorfile


def with_header(header: object, payload: bytes = b"\0" * 64) -> bytes:
    raw = json.dumps(header).encode()
    return tensorfile.MAGIC + struct.pack("<Q", len(raw)) + raw + payload


def entry(**fields: object) -> dict:
    return {"dtype": "float32", "shape": [4], "offset": 0, "nbytes": 16, **fields}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.bool])
def test_round_trip_is_bitwise(dtype: torch.dtype) -> None:
    tensors = [torch.randn(3, 5).to(dtype), torch.empty(0, 4, dtype=dtype), torch.randn(()).to(dtype)]
    decoded, meta = tensorfile.decode(tensorfile.encode(tensors, {"k": 1}))
    assert meta == {"k": 1}
    for a, b in zip(tensors, decoded):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def test_a_non_contiguous_tensor_is_written_as_its_values() -> None:
    """A transposed view must arrive as what it shows, not as its storage order."""
    view = torch.arange(12, dtype=torch.float32).reshape(3, 4).t()
    (decoded,), _ = tensorfile.decode(tensorfile.encode([view]))
    assert torch.equal(decoded, view) and decoded.shape == (4, 3)


def test_nan_and_negative_zero_survive_bitwise() -> None:
    tensor = torch.tensor([float("nan"), -0.0, float("inf")])
    (decoded,), _ = tensorfile.decode(tensorfile.encode([tensor]))
    assert torch.equal(decoded.view(torch.int32), tensor.view(torch.int32))


def test_size_limit_is_enforced() -> None:
    blob = tensorfile.encode([torch.zeros(1000)])
    with pytest.raises(tensorfile.TensorFileError, match="limit"):
        tensorfile.decode(blob, max_bytes=100)


def test_lying_header_is_refused() -> None:
    header = b'{"tensors": [{"dtype": "float32", "shape": [1000000], "offset": 0, "nbytes": 4000000}], "meta": {}}'
    blob = tensorfile.MAGIC + struct.pack("<Q", len(header)) + header + b"\0" * 16
    with pytest.raises(tensorfile.TensorFileError, match="payload"):
        tensorfile.decode(blob)


@pytest.mark.parametrize(
    ("blob", "reason"),
    [
        (b"PK\x03\x04 a zip file", "bad magic"),
        (tensorfile.MAGIC + b"\x01", "bad magic"),  # shorter than the length field
        (tensorfile.MAGIC + struct.pack("<Q", 1 << 40) + b"{}", "header length"),
        (tensorfile.MAGIC + struct.pack("<Q", 4) + b"\xff\xfe{}", "not JSON"),
        (with_header([]), "no tensor list"),
        (with_header({"tensors": {}}), "no tensor list"),
        (with_header({"tensors": [], "meta": []}), "meta is not an object"),
        (with_header({"tensors": [entry()] * 257}), "over the limit"),
        (with_header({"tensors": ["float32"]}), "not an object"),
        (with_header({"tensors": [entry(dtype="complex64")]}), "unknown dtype"),
        (with_header({"tensors": [entry(dtype=["float32"])]}), "unknown dtype"),
        (with_header({"tensors": [entry(shape=[-4])]}), "bad shape"),
        (with_header({"tensors": [entry(shape=[True, 4])]}), "bad shape"),  # a bool is not a dimension
        (with_header({"tensors": [entry(shape=[1] * 9)]}), "bad shape"),
        (with_header({"tensors": [entry(shape="4")]}), "bad shape"),
        (with_header({"tensors": [entry(offset=-16)]}), "bad offset"),
        (with_header({"tensors": [entry(offset=0.0)]}), "bad offset"),
        (with_header({"tensors": [entry(nbytes=12)]}), "payload length"),  # 4 float32 are 16 bytes
        (with_header({"tensors": [entry(offset=56)]}), "payload length"),  # runs past the end
    ],
)
def test_each_malformed_field_is_refused_with_its_reason(blob: bytes, reason: str) -> None:
    with pytest.raises(tensorfile.TensorFileError, match=reason):
        tensorfile.decode(blob)


def test_a_well_formed_hand_written_header_decodes() -> None:
    """The refusals above are not a decoder that refuses everything: the same entry, untouched, reads back."""
    payload = struct.pack("<4f", 1.0, 2.0, 3.0, 4.0)
    (tensor,), meta = tensorfile.decode(with_header({"tensors": [entry()], "meta": {"calls": 3}}, payload))
    assert tensor.tolist() == [1.0, 2.0, 3.0, 4.0] and meta == {"calls": 3}


def test_unsupported_dtypes_are_refused_when_writing() -> None:
    with pytest.raises(tensorfile.TensorFileError, match="unsupported dtype"):
        tensorfile.encode([torch.zeros(2, dtype=torch.complex64)])


def test_read_checks_the_size_before_reading_and_names_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "out.katf"
    tensorfile.write(path, [torch.ones(256)], {"role": "candidate"})
    (tensor,), meta = tensorfile.read(path)
    assert torch.equal(tensor, torch.ones(256)) and meta == {"role": "candidate"}
    with pytest.raises(tensorfile.TensorFileError, match="out.katf is .* over the 100-byte limit"):
        tensorfile.read(path, max_bytes=100)
    with pytest.raises(tensorfile.TensorFileError, match="cannot read missing.katf"):
        tensorfile.read(tmp_path / "missing.katf")
