"""Tensors as both sides of the sandbox name them: the dtypes that cross, where a placed input sits in a
segment, and where an output lives in the worker's memory; and the worker's views of a segment.

The trusted side places inputs and reads outputs itself (`host/shm.py`); the worker only maps the segments
it is handed and describes its outputs. What each side says of a tensor is spelled here, once.
"""

from __future__ import annotations

import mmap
import os
import warnings
from dataclasses import dataclass

import torch

# The dtypes that cross the boundary, by the names the layouts and output descriptions carry.
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
MAX_TENSORS = 256
MAX_DIMS = 8


class TransportError(ValueError):
    """A layout or an output description that does not hold (one-line reason)."""


@dataclass(frozen=True)
class Placed:
    """Where one tensor sits in a segment (sent to the worker, who builds a view)."""

    dtype: str
    shape: tuple[int, ...]
    offset: int

    def to_json(self) -> list:
        return [self.dtype, list(self.shape), self.offset]


def map_readonly(fd: int) -> mmap.mmap:
    """A read-only shared view of a segment (the KernelBench weights; the seal refuses anything else)."""
    return mmap.mmap(fd, os.fstat(fd).st_size, mmap.MAP_SHARED, mmap.PROT_READ)


def map_private(fd: int) -> mmap.mmap:
    """The worker's view of its input segment for every call, checked, timed or audited alike: copy-on-write,
    so a kernel that writes into its inputs changes only its own pages (the trusted side finds that bitwise)
    and never the segment; until then each page is the segment's, and shows each call's new inputs."""
    return mmap.mmap(fd, os.fstat(fd).st_size, mmap.MAP_PRIVATE, mmap.PROT_READ | mmap.PROT_WRITE)


def views(segment: mmap.mmap, layout: list) -> list[torch.Tensor]:
    """The worker side: tensors viewing the segment, one per placed input (no copy)."""
    tensors = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "the given buffer is not writable" (the weights): that is the point
        for dtype_name, shape, offset in layout:
            dtype = DTYPES[dtype_name]
            numel = 1
            for dim in shape:
                numel *= dim
            if numel == 0:
                tensors.append(torch.empty(shape, dtype=dtype))
                continue
            tensors.append(torch.frombuffer(segment, dtype=dtype, count=numel, offset=offset).view(shape))
    return tensors


@dataclass(frozen=True)
class OutputRef:
    """An output as the worker describes it: where it lives in the worker's memory."""

    address: int
    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    device: str

    @classmethod
    def of(cls, host: torch.Tensor, device: str) -> OutputRef:
        """The worker side: describe a host tensor (alive until the trusted side has read it) that
        came from `device`."""
        return cls(
            host.data_ptr(),
            DTYPE_NAMES.get(host.dtype, str(host.dtype)),
            tuple(host.shape),
            tuple(host.stride()),
            device,
        )

    def to_json(self) -> list:
        return [self.address, self.dtype, list(self.shape), list(self.strides), self.device]

    @classmethod
    def parse(cls, value: object) -> OutputRef:
        """The trusted side: decode one description from the worker, checking every field's type and range."""
        if not (isinstance(value, list) and len(value) == 5):
            raise TransportError("an output description is not a 5-element list")
        address, dtype, shape, strides, device = value
        if type(address) is not int or address < 0 or address >= 1 << 64:
            raise TransportError("an output address is not a valid pointer")
        if not isinstance(dtype, str) or not isinstance(device, str) or len(device) > 16:
            raise TransportError("an output dtype or device is not a string")
        for dims, what in ((shape, "shape"), (strides, "strides")):
            if not (isinstance(dims, list) and len(dims) <= MAX_DIMS and all(type(d) is int for d in dims)):
                raise TransportError(f"an output {what} is malformed")
        if len(shape) != len(strides) or any(d < 0 for d in shape) or any(s < 0 for s in strides):
            raise TransportError("an output's shape and strides do not match")
        return cls(address, dtype, tuple(shape), tuple(strides), device)

    def span_bytes(self, itemsize: int) -> int:
        """Bytes from the first to one past the last element."""
        if any(d == 0 for d in self.shape):
            return 0
        return (sum((d - 1) * s for d, s in zip(self.shape, self.strides)) + 1) * itemsize
