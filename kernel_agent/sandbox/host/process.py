"""The trusted side's hold on one sandboxed worker process, for its whole life.

Starts it under the isolation layer in its own groups, keeps it frozen except while it serves a request,
accounts for its CPU per phase from outside, watches its disk, and kills everything it started on timeout,
error or exit. What the requests say is `session.WorkerSession`'s business; this module only carries them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from kernel_agent.core.text import clean
from kernel_agent.core.verdict import Status
from kernel_agent.sandbox import channel
from kernel_agent.sandbox.deadline import Deadline
from kernel_agent.sandbox.host.accounting import Accounting
from kernel_agent.sandbox.host.control import ControlError, ProcessControl, Usage
from kernel_agent.sandbox.host.disk_watch import DiskWatch
from kernel_agent.sandbox.host.groups import SandboxGroups
from kernel_agent.sandbox.host.isolation import Isolation, Limits
from kernel_agent.sandbox.host.last_words import death_reason, last_error_line, log_tail
from kernel_agent.sandbox.host.launch import WorkerFailure, WorkerSpec, launch_worker
from kernel_agent.sandbox.host.shm import InputSegment, MemoryReader
from kernel_agent.sandbox.protocol import WORKER_STATUSES, Exit, Request

IDLE_CPU_LIMIT_NS = 20_000_000  # CPU the sandbox may show while frozen (measurement slack): 20 ms in all

# Each side's files and strings have the same length: with address randomisation off, one byte more
# in a path shifts every later heap allocation of the process, and with it how outputs alias the
# inputs modulo 4 KiB. A candidate-named process ran 5% slower than a baseline-named one running
# the same kernel (benchmarks/eval_overhead.py A/A runs) until they matched.
ROLE_TAGS = {"candidate": "cand", "baseline": "base"}


class SandboxProcess:
    def __init__(
        self,
        spec: WorkerSpec,
        workdir: Path,
        isolation: Isolation,
        limits: Limits,
        deadline: Deadline,
        segment: InputSegment,
    ) -> None:
        self.spec = spec
        self.tag = ROLE_TAGS.get(spec.role, spec.role[:4])
        self.workdir = workdir
        self.isolation = isolation
        self.limits = limits
        self.deadline = deadline
        self.process: subprocess.Popen[bytes] | None = None
        self.control: ProcessControl | None = None
        self.memory: MemoryReader | None = None
        self.segment: InputSegment | None = segment  # the evaluation's: both workers share it (and it closes it)
        self.state_segment: InputSegment | None = None
        self.groups: SandboxGroups | None = None
        self.accounting = Accounting(method="none")
        self.disk = DiskWatch(workdir, self.tag, isolation, limits.disk_bytes)
        self._last: Usage | None = None
        self._cpu_at_thaw = 0
        self._launched_ns = 0

    # ---- lifecycle ---------------------------------------------------------
    def start(self) -> None:
        """Start the worker and wait until it is ready, frozen, before any candidate code runs."""
        self.launch()
        self.ready()

    def launch(self) -> None:
        """Start the worker's process without waiting for it: its interpreter and torch import can
        overlap other work (the baseline's start overlaps the candidate's checks). `ready()` follows."""
        self.deadline.start()  # a new process's allowance runs from its launch (the candidate's from its build)
        assert self.segment is not None
        launched = launch_worker(self.spec, self.tag, self.workdir, self.isolation, self.limits, self.segment)
        self.process, self.groups = launched.process, launched.groups
        self.to_worker, self.from_worker = launched.to_worker, launched.from_worker
        self.state_segment, self.state_layout = launched.state_segment, launched.state_layout
        self.reader = channel.LineReader(self.from_worker)
        freezer = launched.groups.freezer()
        self.control = ProcessControl(self.process.pid, launched.groups.cgroup, freezer)
        self.accounting = Accounting(
            method=self.control.accounting(), cores=launched.groups.cores(), freezer=freezer.name
        )
        self._launched_ns = time.perf_counter_ns()

    def ready(self) -> None:
        """Wait for the launched worker's "ready" and freeze it: no code of its kernel has run yet."""
        assert self.control is not None, "launch() first"
        began = self._launched_ns
        self._receive()  # "ready": the worker imported torch and nothing else
        worker_pid = self.control.adopt_worker()
        try:
            self.memory = MemoryReader(worker_pid)
        except OSError as exc:
            self.close()
            raise WorkerFailure(Status.CRASHED, f"cannot read the worker's memory: {exc.strerror}") from None
        self._freeze()
        self._account("start", began)
        self.disk.start(self.control.kill)

    def close(self) -> None:
        """Kill everything the worker started and release the pipes, segments and groups."""
        self.disk.stop()
        process = self.process
        if process is not None:
            ready = self.memory is not None  # one launched but never ready is not listening yet: killed at once
            if process.poll() is None and self.control is not None and ready and not self.control.frozen:
                try:
                    channel.send(self.to_worker, Exit().to_wire())
                    process.wait(timeout=0.5)
                except (OSError, subprocess.TimeoutExpired):
                    pass
            if self.control is not None:
                self.accounting.peak_rss_bytes = max(self.accounting.peak_rss_bytes, self.control.peak_rss_bytes())
                self.accounting.peak_tasks = self.peak_tasks()
                self.accounting.huge_pages_kb = self.control.huge_pages_kb()
                self.control.kill()
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            for fd in (self.to_worker, self.from_worker):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self.process = None
        for held in (self.memory, self.state_segment):
            if held is not None:
                held.close()
        self.memory = self.segment = self.state_segment = None
        if self.groups is not None:
            self.groups.remove()
            self.groups = None

    # ---- one request -------------------------------------------------------
    def request(self, message: Request, phase: str) -> dict[str, Any]:
        """Thaw, ask, wait for the answer, freeze again; the CPU used goes to `phase` (a failed one's too)."""
        began = self._thaw()
        self._send(message)
        try:
            return self._receive()
        finally:
            if self.process is not None:
                self._freeze()
                self._account(phase, began)

    def _clocked(self, message: Request, phase: str) -> tuple[dict[str, Any], int, int, int]:
        """A request with this process's clock read around it: (reply, thawed at, sent at, replied at), ns."""
        began = self._thaw()
        t0 = time.perf_counter_ns()
        self._send(message)
        try:
            reply = self._receive()
        finally:
            t1 = time.perf_counter_ns()
            if self.process is not None:
                self._freeze()
        self._account(phase, began)
        return reply, began, t0, t1

    def cpu_ns(self) -> int:
        """The sandbox's CPU so far, from outside (read while it is frozen)."""
        assert self.control is not None
        return self.control.usage().cpu_ns

    def cpu_of_last_request(self) -> int:
        """The sandbox's CPU from the last request's thaw to its freeze (ns)."""
        assert self._last is not None
        return self._last.cpu_ns - self._cpu_at_thaw

    def timeout_s(self) -> float:
        return self.deadline.seconds

    def time_left(self) -> float:
        """What remains of this process's allowance (s)."""
        return self.deadline.left()

    def peak_tasks(self) -> int | None:
        """The most threads and processes the sandbox ever ran at once, where the machine records it."""
        return self.groups.peak_tasks() if self.groups is not None else None

    def log_tail(self) -> str:
        """The end of what the kernel printed, for feedback (never parsed for the verdict)."""
        return log_tail(self.workdir, self.tag)

    # ---- freezing and accounting -------------------------------------------
    def _thaw(self) -> int:
        """Check nothing ran while frozen, then let the sandbox run; returns when (perf_counter_ns)."""
        assert self.control is not None
        usage = self.control.usage()
        if self._last is not None:
            self.accounting.idle_cpu_ns += max(0, usage.cpu_ns - self._last.cpu_ns)
            if self.accounting.idle_cpu_ns > IDLE_CPU_LIMIT_NS:
                idle = self.accounting.idle_cpu_ns / 1e6
                self.close()
                raise WorkerFailure(
                    Status.REJECTED,
                    f"the sandbox used {idle:.0f} ms of CPU while frozen between requests (escaped the freezer)",
                )
        self._cpu_at_thaw = usage.cpu_ns
        try:
            self.control.thaw()
        except ControlError as exc:
            self.close()
            raise WorkerFailure(Status.REJECTED, str(exc)) from None
        return time.perf_counter_ns()

    def _freeze(self) -> None:
        assert self.control is not None
        try:
            self.control.freeze()
        except ControlError as exc:
            self.close()
            raise WorkerFailure(Status.REJECTED, str(exc)) from None

    def _account(self, phase: str, began: int) -> None:
        assert self.control is not None
        usage = self.control.usage()
        start = 0 if phase == "start" else self._cpu_at_thaw
        self.accounting.phase(phase).add(max(0, usage.cpu_ns - start), time.perf_counter_ns() - began)
        self.accounting.max_threads = max(self.accounting.max_threads, usage.threads)
        self.accounting.max_processes = max(self.accounting.max_processes, usage.processes)
        self._last = usage
        if self.disk.over():
            self.close()
            raise WorkerFailure(Status.CRASHED, f"{self.disk.reason}; the sandbox was killed")
        if usage.processes > 1:
            self.close()
            raise WorkerFailure(
                Status.REJECTED,
                f"the sandbox holds {usage.processes} processes: the candidate started child processes ({phase})",
            )

    # ---- the pipe ----------------------------------------------------------
    def _send(self, message: Request) -> None:
        try:
            channel.send(self.to_worker, message.to_wire())
        except (BrokenPipeError, OSError):
            raise WorkerFailure(*self._death_reason()) from None

    def _receive(self) -> dict[str, Any]:
        try:
            reply = self.reader.receive(self.deadline.at())
        except channel.ChannelTimeout:
            self.close()
            raise WorkerFailure(
                Status.TIMEOUT,
                f"no answer within the {self.timeout_s():g} s wall-clock limit; the process group was killed",
            ) from None
        except channel.ChannelClosed:
            raise WorkerFailure(*self._death_reason()) from None
        except channel.ChannelError as exc:
            self.close()
            raise WorkerFailure(Status.REJECTED, f"protocol violation: {exc}") from None
        if not reply.get("ok"):
            status = reply.get("status")
            if status not in WORKER_STATUSES:
                status = Status.REJECTED
            reason = clean(reply.get("reason", "no reason given"))
            if "out of memory" in reason and self.spec.memory_bytes:
                reason += f" (the evaluation's memory booking: {self.spec.memory_bytes / (1 << 30):.1f} GB)"
            raise WorkerFailure(Status(status), reason)
        return reply

    def _death_reason(self) -> tuple[Status, str]:
        code = None
        if self.process is not None:
            try:
                code = self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code = None
        last = last_error_line(self.workdir, self.tag)
        over = self.groups.over_booking() if self.groups else ""
        self.close()
        return death_reason(code, last, over, self.disk.reason)
