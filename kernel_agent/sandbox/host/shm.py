"""The trusted side's end of the shared memory: a sealed input segment it writes, and reads of frozen memory.

Inputs: the trusted side owns a memfd, maps it writable, then seals it
(`F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL`): the worker
can map it read-only and nothing more; a write from the candidate faults instead of changing what the
trusted side compares (its references come from its own copies anyway). The
trusted side writes a request's inputs while the sandbox is frozen, just before
that request, so no input exists anywhere the candidate can read before its
request (within a request of several short calls, later calls' inputs are there
early; the request's time is shared equally among its calls, so using them early
buys nothing).

Outputs: the worker reports where each output lives in its own memory
(address, shape, strides, dtype); the trusted side reads those bytes itself, from
`/proc/PID/mem`, while the sandbox is frozen right after the call. Nothing the
candidate does later changes what was read, and no copy of every output runs
inside the candidate's process (the trusted side reads only the calls it audits).

What both sides say of a tensor (dtype names, a placement, an output's description) is `sandbox/tensors.py`.
"""

from __future__ import annotations

import fcntl
import hashlib
import math
import mmap
import os
from dataclasses import dataclass

import torch

from kernel_agent.sandbox.tensors import DTYPE_NAMES, DTYPES, OutputRef, Placed, TransportError

ALIGN = 64
F_SEAL_FUTURE_WRITE = 0x0010  # Linux 5.1; not every Python names it
SEGMENT_EXTRA = 64 << 20  # room beyond the largest call's inputs for a request of several short calls


def _nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def _aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def aligned_bytes(tensors: list[torch.Tensor]) -> int:
    """What placing `tensors` takes of a segment."""
    return sum(_aligned(_nbytes(t)) for t in tensors)


def layout_of(tensors: list[torch.Tensor]) -> list[Placed]:
    """Where `place` puts `tensors`: each at the next 64-byte boundary, in order."""
    layout, offset = [], 0
    for tensor in tensors:
        if tensor.dtype not in DTYPE_NAMES:
            raise TransportError(f"unsupported input dtype {tensor.dtype}")
        layout.append(Placed(DTYPE_NAMES[tensor.dtype], tuple(tensor.shape), offset))
        offset += _aligned(_nbytes(tensor))
    return layout


def segment_bytes(largest_inputs: int) -> int:
    """An input segment's size: the largest call's inputs, plus room for a request of several short calls
    (at most SEGMENT_EXTRA: `ab_timing.request_shape` never asks for more calls than fit)."""
    largest = max(_aligned(largest_inputs), ALIGN)
    return _page_aligned(largest + min(63 * largest, SEGMENT_EXTRA))


def _page_aligned(n: int) -> int:
    return (n + mmap.PAGESIZE - 1) // mmap.PAGESIZE * mmap.PAGESIZE


class InputSegment:
    """The trusted side's end of one worker's input segment.

    Sized to what the evaluation places in one request (`segment_bytes`), never more: a worker that reads
    its holes or allocates inside it pins memory no rlimit or RSS counts, so its size is part of the
    booking. Sealed (a sealed segment cannot grow or be re-mapped writable, even by us); the worker gets
    a read-only descriptor (`reader_fd`), so it cannot fallocate inside it either."""

    def __init__(self, capacity: int) -> None:
        self.fd = os.memfd_create("", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        os.fchmod(self.fd, 0o400)  # no other uid may reopen it through /proc (a memfd is created 0777)
        self.capacity = _page_aligned(max(capacity, ALIGN))
        os.ftruncate(self.fd, self.capacity)
        self.map: mmap.mmap | None = mmap.mmap(
            self.fd, self.capacity, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE
        )
        fcntl.fcntl(
            self.fd,
            fcntl.F_ADD_SEALS,
            fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | F_SEAL_FUTURE_WRITE | fcntl.F_SEAL_SEAL,
        )
        self.used = 0  # bytes the last placement wrote

    def place(self, tensors: list[torch.Tensor]) -> list[Placed]:
        """Copy `tensors` into the segment (call while the sandbox is frozen); return their layout.

        Whatever an earlier, larger placement left beyond the new inputs is zeroed: the segment
        holds this call's inputs and nothing another call will get later."""
        need = aligned_bytes(tensors)
        if need > self.capacity:
            raise TransportError(f"one request's inputs need {need} bytes, more than the {self.capacity}-byte segment")
        assert self.map is not None
        layout, offset = [], 0
        for tensor in tensors:
            if tensor.dtype not in DTYPE_NAMES:
                raise TransportError(f"unsupported input dtype {tensor.dtype}")
            source = tensor.detach().contiguous()
            size = _nbytes(source)
            if size:
                target = torch.frombuffer(self.map, dtype=torch.uint8, count=size, offset=offset)
                target.copy_(source.reshape(-1).view(torch.uint8))
            layout.append(Placed(DTYPE_NAMES[tensor.dtype], tuple(source.shape), offset))
            if _aligned(size) > size and offset + size < self.used:  # the padding after it, too
                torch.frombuffer(self.map, dtype=torch.uint8, count=_aligned(size) - size, offset=offset + size).zero_()
            offset += _aligned(size)
        if self.used > offset:
            torch.frombuffer(self.map, dtype=torch.uint8, count=self.used - offset, offset=offset).zero_()
        self.used = offset
        return layout

    def reader_fd(self) -> int:
        """A new read-only descriptor of the segment, for a worker (the caller closes it once passed)."""
        return os.open(f"/proc/self/fd/{self.fd}", os.O_RDONLY | os.O_CLOEXEC)

    def close(self) -> None:
        if self.map is not None:
            self.map.close()
            self.map = None
        try:
            os.close(self.fd)
        except OSError:
            pass


# ---- outputs: the trusted side reads the frozen worker's memory -----------------------------


@dataclass(frozen=True)
class ExpectedOutput:
    """What the reference returns for one output at a case: every description is held to it before a byte
    is read or allocated (a stride-0 view of 4 bytes can describe terabytes)."""

    shape: tuple[int, ...]
    dtype: torch.dtype

    @classmethod
    def of(cls, tensor: torch.Tensor) -> ExpectedOutput:
        return cls(tuple(tensor.shape), tensor.dtype)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * torch.empty((), dtype=self.dtype).element_size()


def expected_outputs(tensors: tuple[torch.Tensor, ...] | list[torch.Tensor]) -> tuple[ExpectedOutput, ...]:
    return tuple(ExpectedOutput.of(t) for t in tensors)


def mismatch(refs: list[OutputRef], expected: tuple[ExpectedOutput, ...]) -> str | None:
    """Why the described outputs cannot be the expected ones (count, shape, dtype), or None. Worded as the
    comparison words them."""
    if len(refs) != len(expected):
        return f"returned {len(refs)} output(s), expected {len(expected)}"
    for i, (ref, want) in enumerate(zip(refs, expected)):
        if ref.shape != want.shape:
            return f"output {i}: shape {list(ref.shape)}, expected {list(want.shape)}"
        if DTYPES.get(ref.dtype) != want.dtype:
            named = f"torch.{ref.dtype}" if ref.dtype in DTYPES else repr(ref.dtype)
            return f"output {i}: dtype {named}, expected {want.dtype}"
    return None


class MemoryReader:
    """Reads tensors out of a frozen sandbox process's memory (`/proc/PID/mem`)."""

    def __init__(self, pid: int) -> None:
        self.fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)

    def read(self, ref: OutputRef, limit_bytes: int) -> torch.Tensor:
        """The tensor `ref` describes, copied into this process. The dtype is read as the worker
        names it (a wrong dtype is the comparison's to report); the span must stay within `limit_bytes`."""
        dtype = DTYPES.get(ref.dtype)
        if dtype is None:
            raise TransportError(f"output dtype {ref.dtype!r} is not one the trusted side reads")
        itemsize = torch.empty((), dtype=dtype).element_size()
        span = ref.span_bytes(itemsize)
        if math.prod(ref.shape) * itemsize > limit_bytes:  # what .contiguous() below would allocate
            raise TransportError(f"an output of shape {list(ref.shape)} is over the {limit_bytes}-byte bound")
        if span > limit_bytes:
            raise TransportError(f"an output spans {span} bytes, over the {limit_bytes}-byte bound for this call")
        if span == 0:
            return torch.empty(ref.shape, dtype=dtype)
        buffer = torch.empty(span, dtype=torch.uint8)
        view = memoryview(buffer.numpy()).cast("B")
        done = 0
        while done < span:
            try:
                got = os.preadv(self.fd, [view[done:]], ref.address + done)
            except OSError as exc:
                raise TransportError(f"output memory at {ref.address:#x} is not readable ({exc.strerror})") from None
            if got <= 0:
                raise TransportError(f"output memory at {ref.address:#x} ended early")
            done += got
        flat = buffer.view(dtype)
        return torch.as_strided(flat, ref.shape, ref.strides).contiguous()

    def digest(self, address: int, nbytes: int, chunk_bytes: int = 64 << 20) -> bytes | None:
        """A hash of `nbytes` of the process's memory at `address` (None where it cannot be read)."""
        digest = hashlib.blake2b(digest_size=16)
        buffer = bytearray(min(chunk_bytes, max(1, nbytes)))
        done = 0
        while done < nbytes:
            size = min(len(buffer), nbytes - done)
            try:
                got = os.preadv(self.fd, [memoryview(buffer)[:size]], address + done)
            except (OSError, OverflowError):
                return None
            if got <= 0:
                return None
            digest.update(memoryview(buffer)[:got])
            done += got
        return digest.digest()

    def matches(self, ref: OutputRef, expected: torch.Tensor, chunk_bytes: int = 64 << 20) -> bool:
        """Whether the memory `ref` names holds exactly `expected` (dtype, shape and bits), compared a
        chunk at a time so a large input is never copied whole into this process."""
        if DTYPES.get(ref.dtype) != expected.dtype or ref.shape != tuple(expected.shape):
            return False
        contiguous = expected.contiguous()
        if ref.strides != tuple(contiguous.stride()):
            return torch.equal(self.read(ref, 4 * _nbytes(expected) + ALIGN), contiguous)
        flat = contiguous.reshape(-1).view(torch.uint8) if contiguous.numel() else torch.empty(0, dtype=torch.uint8)
        buffer = torch.empty(min(chunk_bytes, max(1, flat.numel())), dtype=torch.uint8)
        view = memoryview(buffer.numpy()).cast("B")
        for start in range(0, flat.numel(), chunk_bytes):
            size = min(chunk_bytes, flat.numel() - start)
            try:
                got = os.preadv(self.fd, [view[:size]], ref.address + start)
            except OSError:
                return False
            if got != size or not torch.equal(buffer[:size], flat[start : start + size]):
                return False
        return True

    def close(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass


def read_bound(expected_bytes: int) -> int:
    """The most bytes the trusted side reads for one call: a generous multiple of what it expects."""
    return 4 * expected_bytes + (1 << 20)


def nbytes(tensors: list[torch.Tensor] | tuple[torch.Tensor, ...]) -> int:
    return sum(_nbytes(t) for t in tensors)
