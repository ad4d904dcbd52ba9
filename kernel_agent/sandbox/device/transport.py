"""How a device tensor crosses between the orchestrator and a worker: a typed handle and the transport that
makes and opens it. The real transport is torch's CUDA IPC; tests use a fake one (a CPU machine has no second
CUDA context to share with), so everything above this interface is tested without a GPU."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")
ITEM_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4}
ITEM_BYTES |= {"int16": 2, "int8": 1, "uint8": 1, "bool": 1}
MAX_DIMS = 16
MAX_HANDLE_HEX = 512  # a cudaIpcMemHandle is 64 bytes; torch adds its own header


class HandleError(ValueError):
    """A handle description that is not well-formed (from a worker: the candidate's verdict, never a crash)."""


@dataclass(frozen=True)
class TensorSpec:
    """What one tensor of a request is: enough to allocate it on either side."""

    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * ITEM_BYTES[self.dtype]


@dataclass(frozen=True)
class Handle:
    """One shared device tensor: the IPC handle of its allocation (hex), where the tensor's storage starts in it
    and how many bytes that storage spans, and the view (shape, strides, offset in elements) over it."""

    ipc: str
    storage_offset_bytes: int
    storage_bytes: int
    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0  # the view's offset in elements into its storage
    extra: str = ""  # the transport's own fields (torch: ref-counter and event handles), opaque here

    @property
    def spec(self) -> TensorSpec:
        return TensorSpec(self.shape, self.dtype)

    def reach_bytes(self) -> int:
        """The bytes the view reaches from its own first element (what must lie inside the mapped allocation)."""
        return max(0, self.span_bytes() - self.offset * ITEM_BYTES[self.dtype])

    def span_bytes(self) -> int:
        """The bytes the view reaches in its storage (0 for an empty tensor)."""
        if any(s == 0 for s in self.shape):
            return 0
        last = self.offset + sum((n - 1) * st for n, st in zip(self.shape, self.strides))
        return (last + 1) * ITEM_BYTES[self.dtype]

    def to_json(self) -> dict[str, Any]:
        return {
            "ipc": self.ipc,
            "storage_offset_bytes": self.storage_offset_bytes,
            "storage_bytes": self.storage_bytes,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "strides": list(self.strides),
            "offset": self.offset,
            "extra": self.extra,
        }

    @classmethod
    def parse(cls, data: object) -> Handle:
        """A handle from a worker's reply, every field checked for type and range before anything uses it."""
        if not isinstance(data, dict) or set(data) != set(FIELDS):
            raise HandleError("a device handle must be an object of exactly its fields")
        ints = ("storage_offset_bytes", "storage_bytes", "offset")
        if not all(_natural(data[k]) for k in ints):
            raise HandleError("a device handle's offsets and sizes must be non-negative integers")
        if data["dtype"] not in DTYPES:
            raise HandleError(f"a device handle names an unknown dtype {str(data['dtype'])[:20]!r}")
        shape, strides = data["shape"], data["strides"]
        if not (isinstance(shape, list) and isinstance(strides, list) and len(shape) == len(strides) <= MAX_DIMS):
            raise HandleError("a device handle's shape and strides must be lists of one length")
        if not all(_natural(v) for v in shape + strides):
            raise HandleError("a device handle's shape and strides must be non-negative integers")
        for key in ("ipc", "extra"):
            if not isinstance(data[key], str) or len(data[key]) > MAX_HANDLE_HEX:
                raise HandleError(f"a device handle's {key} must be a short string")
        values = {**data, "shape": tuple(shape), "strides": tuple(strides)}
        return cls(**values)


FIELDS = ("ipc", "storage_offset_bytes", "storage_bytes", "dtype", "shape", "strides", "offset", "extra")


def _natural(value: object) -> bool:
    return type(value) is int and 0 <= value < 1 << 62


class Transport(Protocol):
    """Device tensors shared across processes. The orchestrator allocates, fills and opens; the worker opens the
    inputs it is given and exports its outputs."""

    def allocate(self, spec: TensorSpec) -> Any: ...

    def export(self, tensor: Any) -> Handle: ...

    def open(self, handle: Handle) -> Any: ...

    def mapped_bytes(self, tensor: Any) -> int | None:
        """Bytes from an opened tensor's first element to the end of its allocation (None: unknown)."""
        ...

    def synchronize(self) -> None: ...

    def close(self) -> None:
        """Unmap whatever was opened (the evaluation is over)."""
        ...
