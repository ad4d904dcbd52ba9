"""The shared-memory transport: the sealed input segment and reads of a frozen process's memory."""

from __future__ import annotations

import mmap
import os
import signal
import subprocess
import sys
import textwrap

import pytest
import torch

from kernel_agent.sandbox.host.shm import InputSegment, MemoryReader
from kernel_agent.sandbox.tensors import OutputRef, TransportError, map_readonly, views


def test_placed_inputs_round_trip_through_a_read_only_view() -> None:
    segment = InputSegment(1 << 20)
    inputs = [
        torch.randn(3, 17),
        torch.arange(5, dtype=torch.int64),
        torch.empty(0, 4),
        torch.ones(2, dtype=torch.bfloat16),
    ]
    layout = [p.to_json() for p in segment.place(inputs)]
    seen = views(map_readonly(segment.fd), layout)
    assert all(torch.equal(a, b) and a.dtype == b.dtype for a, b in zip(inputs, seen))
    assert all(entry[2] % 64 == 0 for entry in layout)  # aligned offsets
    segment.close()


def test_the_segment_cannot_be_written_shrunk_or_remapped_writable_by_its_reader() -> None:
    segment = InputSegment(1 << 20)
    segment.place([torch.ones(1024)])
    with pytest.raises(PermissionError):
        mmap.mmap(segment.fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    with pytest.raises(PermissionError):
        os.pwrite(segment.fd, b"x", 0)
    with pytest.raises(PermissionError):
        os.ftruncate(segment.fd, 4096)
    # A reopened descriptor (what a sandbox could get through /proc/self/fd) is bound by the same seals.
    reopened = os.open(f"/proc/self/fd/{segment.fd}", os.O_RDWR)
    with pytest.raises(PermissionError):
        os.pwrite(reopened, b"x", 0)
    os.close(reopened)
    segment.close()


def test_the_trusted_side_reads_a_frozen_process_tensor_by_its_description() -> None:
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent("""
            import time, torch
            from kernel_agent.sandbox.tensors import OutputRef
            t = torch.arange(12, dtype=torch.float32).reshape(3, 4).t()   # non-contiguous
            print(OutputRef.of(t, "cpu").to_json(), flush=True)
            time.sleep(60)
        """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        ref = OutputRef.parse(eval(child.stdout.readline()))  # noqa: S307 - our own child's JSON list
        os.kill(child.pid, signal.SIGSTOP)
        reader = MemoryReader(child.pid)
        got = reader.read(ref, limit_bytes=1 << 20)
        assert torch.equal(got, torch.arange(12, dtype=torch.float32).reshape(3, 4).t())
        with pytest.raises(TransportError, match="over the"):
            reader.read(ref, limit_bytes=8)
        with pytest.raises(TransportError, match="not readable"):
            reader.read(OutputRef(16, "float32", (4,), (1,), "cpu"), limit_bytes=1 << 20)
        reader.close()
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize(
    "value",
    [
        [1, "float32", [2], [1]],
        ["0x10", "float32", [2], [1], "cpu"],
        [-1, "float32", [2], [1], "cpu"],
        [16, "float32", [2, 2], [1], "cpu"],
        [16, "float32", [-2], [1], "cpu"],
        [16, 3, [2], [1], "cpu"],
    ],
)
def test_malformed_output_descriptions_are_refused(value: list) -> None:
    with pytest.raises(TransportError):
        OutputRef.parse(value)
