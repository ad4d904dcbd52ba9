"""A small, strict tensor file format for crossing the sandbox boundary.

Why not pickle or torch.load: the trusted side reads files the candidate's
process wrote, and unpickling hostile bytes runs code. Layout:
`KATF1\\n` + 8-byte little-endian header length + JSON header + raw payloads.
The decoder checks every length, dtype and shape before it touches a byte.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import torch

MAGIC = b"KATF1\n"
MAX_HEADER_BYTES = 1 << 20
MAX_TENSORS = 256
MAX_DIMS = 8
DTYPES: dict[str, torch.dtype] = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


class TensorFileError(ValueError):
    """The file is not a well-formed tensor file (one-line reason)."""


def encode(tensors: list[torch.Tensor], meta: dict[str, Any] | None = None) -> bytes:
    entries, payloads, offset = [], [], 0
    for tensor in tensors:
        if tensor.dtype not in DTYPE_NAMES:
            raise TensorFileError(f"unsupported dtype {tensor.dtype}")
        data = tensor.detach().to("cpu").contiguous()
        raw = data.reshape(-1).view(torch.uint8).numpy().tobytes() if data.numel() else b""
        entries.append({"dtype": DTYPE_NAMES[tensor.dtype], "shape": list(data.shape), "offset": offset, "nbytes": len(raw)})
        payloads.append(raw)
        offset += len(raw)
    header = json.dumps({"tensors": entries, "meta": meta or {}}).encode()
    return MAGIC + struct.pack("<Q", len(header)) + header + b"".join(payloads)


def decode(blob: bytes, max_bytes: int | None = None) -> tuple[list[torch.Tensor], dict[str, Any]]:
    if max_bytes is not None and len(blob) > max_bytes:
        raise TensorFileError(f"file is {len(blob)} bytes, over the {max_bytes}-byte limit")
    if not blob.startswith(MAGIC) or len(blob) < len(MAGIC) + 8:
        raise TensorFileError("bad magic: not a tensor file")
    (header_len,) = struct.unpack("<Q", blob[len(MAGIC) : len(MAGIC) + 8])
    start = len(MAGIC) + 8
    if header_len > MAX_HEADER_BYTES or start + header_len > len(blob):
        raise TensorFileError("header length out of range")
    try:
        header = json.loads(blob[start : start + header_len])
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TensorFileError(f"header is not JSON: {exc}") from None
    if not isinstance(header, dict) or not isinstance(header.get("tensors"), list):
        raise TensorFileError("header has no tensor list")
    meta = header.get("meta", {})
    if not isinstance(meta, dict):
        raise TensorFileError("header meta is not an object")
    entries = header["tensors"]
    if len(entries) > MAX_TENSORS:
        raise TensorFileError(f"{len(entries)} tensors, over the limit of {MAX_TENSORS}")
    payload = memoryview(blob)[start + header_len :]
    tensors = [_decode_entry(entry, payload) for entry in entries]
    return tensors, meta


def _decode_entry(entry: Any, payload: memoryview) -> torch.Tensor:
    if not isinstance(entry, dict):
        raise TensorFileError("tensor entry is not an object")
    dtype = DTYPES.get(entry.get("dtype")) if isinstance(entry.get("dtype"), str) else None
    shape, offset, nbytes = entry.get("shape"), entry.get("offset"), entry.get("nbytes")
    if dtype is None:
        raise TensorFileError(f"unknown dtype {entry.get('dtype')!r}")
    if not isinstance(shape, list) or len(shape) > MAX_DIMS or not all(type(d) is int and d >= 0 for d in shape):
        raise TensorFileError(f"bad shape {shape!r}")
    if type(offset) is not int or type(nbytes) is not int or offset < 0 or nbytes < 0:
        raise TensorFileError("bad offset or length")
    numel = 1
    for dim in shape:
        numel *= dim
    itemsize = torch.empty((), dtype=dtype).element_size()
    if numel * itemsize != nbytes or offset + nbytes > len(payload):
        raise TensorFileError("payload length does not match shape and dtype")
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    raw = bytearray(payload[offset : offset + nbytes])
    return torch.frombuffer(raw, dtype=torch.uint8).view(dtype).reshape(shape)


def write(path: Path, tensors: list[torch.Tensor], meta: dict[str, Any] | None = None) -> None:
    path.write_bytes(encode(tensors, meta))


def read(path: Path, max_bytes: int | None = None) -> tuple[list[torch.Tensor], dict[str, Any]]:
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise TensorFileError(f"cannot read {path.name}: {exc.strerror}") from None
    if max_bytes is not None and size > max_bytes:
        raise TensorFileError(f"{path.name} is {size} bytes, over the {max_bytes}-byte limit")
    return decode(path.read_bytes(), max_bytes)
