"""The sealed input segment, in-process: what the worker's views see, and what an earlier call leaves behind (nothing).

The seals against a reader, and reads of a frozen process's memory, are tests/e2e/test_shm.py (a child process)."""

from __future__ import annotations

import errno
import fcntl
import os

import pytest
import torch

from kernel_agent.sandbox.host.shm import ALIGN, SEGMENT_EXTRA, InputSegment, nbytes, read_bound, segment_bytes
from kernel_agent.sandbox.tensors import OutputRef, TransportError, map_readonly, views


@pytest.fixture
def segment() -> InputSegment:
    segment = InputSegment(1 << 20)
    yield segment
    segment.close()


def test_placed_inputs_come_back_through_the_workers_views(segment: InputSegment) -> None:
    inputs = [
        torch.randn(3, 17),
        torch.arange(5, dtype=torch.int64),
        torch.empty(0, 4),
        torch.ones(2, dtype=torch.bfloat16),
        torch.tensor([True, False, True]),
        torch.randn(4, 6).t(),
    ]  # the last one not contiguous
    layout = [p.to_json() for p in segment.place(inputs)]
    seen = views(map_readonly(segment.fd), layout)
    assert all(
        a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b) for a, b in zip(inputs, seen, strict=True)
    )
    offsets = [entry[2] for entry in layout]
    assert offsets == [0, 256, 320, 320, 384, 448]  # each start aligned to 64 bytes; an empty tensor takes no room
    assert all(offset % ALIGN == 0 for offset in offsets)
    assert segment.used == 448 + 128


def test_a_smaller_placement_zeroes_the_tail_the_larger_one_left(segment: InputSegment) -> None:
    """The segment holds this call's inputs and nothing a later call could read of an earlier one."""
    reader = map_readonly(segment.fd)
    segment.place([torch.full((1000,), 7.0)])
    assert reader[0:4] == torch.tensor([7.0]).numpy().tobytes()
    segment.place([torch.full((10,), 3.0)])
    assert views(reader, [["float32", [10], 0]])[0].eq(3.0).all()
    assert reader[64:4000] == bytes(3936)  # past the new layout's aligned end
    assert segment.used == 64


def test_a_smaller_placement_zeroes_the_padding_too(segment: InputSegment) -> None:
    """Bytes 40..64 lie between the new input's end and the next 64-byte boundary: still part of the earlier inputs."""
    reader = map_readonly(segment.fd)
    segment.place([torch.full((1000,), 7.0)])
    segment.place([torch.full((10,), 3.0)])
    assert reader[40:64] == bytes(24)


def test_placement_refuses_what_the_worker_could_not_read(segment: InputSegment) -> None:
    with pytest.raises(TransportError, match="unsupported input dtype"):
        segment.place([torch.zeros(2, dtype=torch.complex64)])


@pytest.mark.parametrize(
    ("shape", "strides", "span"),
    [((3, 4), (4, 1), 48), ((4, 3), (1, 4), 48), ((2, 0, 5), (0, 5, 1), 0), ((5,), (0,), 4), ((), (), 4)],
)
def test_an_output_spans_from_its_first_to_past_its_last_element(shape: tuple, strides: tuple, span: int) -> None:
    """The bound the trusted side checks before reading a frozen worker's memory."""
    ref = OutputRef.parse([4096, "float32", list(shape), list(strides), "cpu"])
    assert ref.span_bytes(4) == span


def test_read_bound_is_generous_but_finite() -> None:
    assert nbytes([torch.zeros(3, 4), torch.zeros(2, dtype=torch.float64)]) == 64
    assert read_bound(64) == 4 * 64 + (1 << 20)


def test_the_segment_is_sized_to_one_request_not_to_the_host() -> None:
    """Its holes and its size are memory no rlimit or RSS counts (issue 31 B): the largest call's inputs plus
    room for one request of several short calls, and a placement past that is refused with the numbers."""
    assert segment_bytes(1 << 20) == 64 << 20  # 64 calls of a 1 MiB set
    assert segment_bytes(1 << 30) == (1 << 30) + SEGMENT_EXTRA
    segment = InputSegment(segment_bytes(4096))
    try:
        assert segment.capacity == os.fstat(segment.fd).st_size < 1 << 20
        with pytest.raises(TransportError, match="more than the"):
            segment.place([torch.zeros(1 << 20)])
    finally:
        segment.close()


def test_a_worker_gets_a_read_only_descriptor_it_cannot_fill(segment: InputSegment) -> None:
    reader = segment.reader_fd()
    try:
        assert fcntl.fcntl(reader, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY
        with pytest.raises(OSError) as raised:
            os.posix_fallocate(reader, 0, segment.capacity)  # pins pages inside the size through a writable one
        assert raised.value.errno == errno.EBADF
    finally:
        os.close(reader)
