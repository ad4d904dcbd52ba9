"""Starting one sandboxed worker: its config and logs created afresh in a prepared work dir, its input
(and KernelBench state) segments handed over read-only, its cgroups joined and its rlimits, cores and
address layout set between fork and exec, under the isolation layer's command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kernel_agent.core.verdict import Status, StatusError
from kernel_agent.sandbox.host.groups import SandboxGroups, timing_cpus
from kernel_agent.sandbox.host.isolation import (
    WALL_LAYERS,
    Isolation,
    Limits,
    needed_read_paths,
    package_dir,
    prepare_workdir,
    sandbox_env,
    wrap,
    write_trusted,
)
from kernel_agent.sandbox.host.shm import ALIGN, InputSegment, nbytes
from kernel_agent.sandbox.host.spawn import spawn
from kernel_agent.sandbox.protocol import WorkerFds, die_with_parent
from kernel_agent.sandbox.tensors import Placed

ADDR_NO_RANDOMIZE = 0x0040000


class WorkerFailure(StatusError):
    """The worker ended the exchange with a verdict-worthy status."""


@dataclass
class WorkerSpec:
    role: str  # "candidate" or "baseline"
    source: Path  # the module to import inside the sandbox
    entry: str  # "kernel", "ModelNew" or "Model"
    device: str
    threads: int
    env: dict[str, str]
    extra_ro: tuple[Path, ...] = ()
    masked: tuple[Path, ...] = ()  # hidden from the worker (bwrap only)
    state: tuple[list[str], list[torch.Tensor], list[Any]] | None = None  # KernelBench: (names, tensors, init args)
    prefault_bytes: int = 0  # heap the worker backs at start, before anything else allocates (both sides alike)
    memory_bytes: int = 0  # the evaluation's memory booking: the sandbox's memory cgroup limit (0: none)
    build_store: str | None = None  # where the trusted build's library is, as the sandbox sees it
    gpu_data: str = "host"  # "device": inputs and outputs cross through CUDA IPC (DESIGN.md section 18)


@dataclass
class Launched:
    """A started worker: its process, the two pipe ends the trusted side keeps, its groups and segments."""

    process: subprocess.Popen[bytes]
    to_worker: int
    from_worker: int
    groups: SandboxGroups
    state_segment: InputSegment | None
    state_layout: list[Placed] | None


def launch_worker(
    spec: WorkerSpec, tag: str, workdir: Path, isolation: Isolation, limits: Limits, segment: InputSegment
) -> Launched:
    """Start the worker for `spec`; a failure of the setup in the child is a `crashed` verdict."""
    config_path, sandbox_log = _write_config(spec, tag, workdir, isolation)
    readers = [segment.reader_fd()]  # the worker's descriptors are read-only: nothing to grow or fill
    state_segment, state_layout = None, None
    if spec.state is not None:
        state_segment = InputSegment(nbytes(spec.state[1]) + ALIGN * len(spec.state[1]))
        state_layout = state_segment.place(spec.state[1])
        readers.append(state_segment.reader_fd())
    cpus = timing_cpus(spec.threads) if spec.device == "cpu" else None
    groups = SandboxGroups(f"{spec.role}-{os.getpid()}", cpus, spec.memory_bytes)
    # Requests go to the worker on one pipe, replies come back on the other.
    to_worker_r, to_worker = os.pipe()
    from_worker, from_worker_w = os.pipe()
    # -P: the work dir (cwd) is never on sys.path, so nothing planted there is imported.
    command = wrap(
        [sys.executable, "-P", "-s", "-B", "-m", "kernel_agent.sandbox.inside.start", str(config_path)],
        isolation,
        workdir,
        extra_ro=spec.extra_ro,
        masked=spec.masked,
        gpu=spec.device == "cuda",
    )
    env = sandbox_env({"PYTHONPATH": str(package_dir().parent), **spec.env}, workdir)
    joined = groups.joined()

    def setup() -> None:
        die_with_parent()  # unshare and setpriv go with the orchestrator (bwrap has --die-with-parent)
        for group in joined:
            group.join()
        limits.apply()
        if cpus:
            os.sched_setaffinity(0, cpus)
        _same_layout()

    fds = WorkerFds(to_worker_r, from_worker_w, *readers)
    stderr_fd = os.open(sandbox_log, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        process = spawn(command, fds, env, str(workdir), stderr_fd, setup)
    except subprocess.SubprocessError as exc:  # the setup in the child (cgroups, limits, affinity) failed
        groups.remove()
        for fd in (to_worker, from_worker):
            os.close(fd)
        if state_segment is not None:
            state_segment.close()
        reason = f"the sandbox could not start: {exc} (its cgroup, limits or cores)"
        raise WorkerFailure(Status.CRASHED, reason) from None
    finally:
        os.close(stderr_fd)
        for fd in readers:
            os.close(fd)
        os.close(to_worker_r)
        os.close(from_worker_w)
    return Launched(process, to_worker, from_worker, groups, state_segment, state_layout)


def _write_config(spec: WorkerSpec, tag: str, workdir: Path, isolation: Isolation) -> tuple[Path, Path]:
    """The worker's config, its log and its launcher's log, created afresh in the prepared work dir (never
    through a name the sandbox could have planted): (config, launcher's log)."""
    log = workdir / f"{tag}.log"
    config = {
        "workdir": str(workdir),
        "log": str(log),
        "source": str(spec.source),
        "entry": spec.entry,
        "device": spec.device,
        "threads": spec.threads,
        "prefault_bytes": spec.prefault_bytes,
        "build_store": spec.build_store,
        "gpu_data": spec.gpu_data,
        "readable": [str(p) for p in needed_read_paths(spec.extra_ro)],  # the worker's Landlock rules
        "walls": [layer for layer in isolation.layers if layer.startswith(WALL_LAYERS)],
    }
    prepare_workdir(workdir, isolation.uid)
    config_path = workdir / f"{tag}.json"
    write_trusted(config_path, json.dumps(config).encode())
    write_trusted(log, b"", owner=isolation.uid)
    sandbox_log = workdir / f"{tag}.sandbox.log"
    write_trusted(sandbox_log, b"")
    return config_path, sandbox_log


def _same_layout() -> None:
    """Turn off address-space randomisation for the worker: with it, two processes running the
    same kernel land on different cache-set alignments and differ by a few percent for their
    whole life. (It protects no one here: the candidate already runs its own code.)"""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        current = libc.personality(0xFFFFFFFF)
        if current != -1:
            libc.personality(current | ADDR_NO_RANDOMIZE)
    except OSError:
        pass
