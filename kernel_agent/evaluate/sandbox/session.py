"""The trusted side's handle on one sandboxed worker process.

Owns the process for its whole life: starts it under the isolation layer, keeps
it frozen except while it serves a request, times every request with this
process's clock, accounts for the sandbox's CPU time per phase, reads outputs out
of its frozen memory, and kills everything it started on timeout, error or exit.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from kernel_agent.core.text import clean
from kernel_agent.core.verdict import StatusError
from kernel_agent.evaluate.sandbox import channel
from kernel_agent.evaluate.sandbox.control import (
    Cgroup,
    ControlError,
    ProcessControl,
    Usage,
    V1Group,
    cgroup_root,
    clean_stale_cgroups,
)
from kernel_agent.evaluate.sandbox.isolation import (
    Isolation,
    Limits,
    disk_overuse,
    package_dir,
    prepare_workdir,
    sandbox_env,
    wrap,
    write_trusted,
)
from kernel_agent.evaluate.sandbox.shm import (
    MAX_TENSORS,
    InputSegment,
    MemoryReader,
    OutputRef,
    Placed,
    TransportError,
    read_bound,
)
from kernel_agent.evaluate.sandbox.worker import FD_IN, FD_INPUTS, FD_OUT, FD_STATE, WORKER_STATUSES

LOG_TAIL_BYTES = 4000
IDLE_CPU_LIMIT_NS = 20_000_000  # CPU the sandbox may show while frozen (measurement slack): 20 ms in all
LOG_LIMIT_BYTES = 64 << 20  # what the kernel prints: a flood is stopped here, not at RLIMIT_FSIZE (2 GiB)
DISK_CHECK_S = 0.25  # how often the disk watchdog looks, where no size-limited tmpfs bounds the sandbox


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


@dataclass
class Phase:
    """CPU and wall time the sandbox spent in one kind of request."""

    requests: int = 0
    cpu_ns: int = 0
    wall_ns: int = 0

    def add(self, cpu_ns: int, wall_ns: int) -> None:
        self.requests += 1
        self.cpu_ns += cpu_ns
        self.wall_ns += wall_ns

    def to_json(self) -> dict[str, float]:
        return {
            "requests": self.requests,
            "cpu_ms": round(self.cpu_ns / 1e6, 3),
            "wall_ms": round(self.wall_ns / 1e6, 3),
        }


@dataclass
class Accounting:
    """The sandbox's work per phase, measured from outside its process."""

    method: str
    phases: dict[str, Phase] = field(default_factory=dict)
    idle_cpu_ns: int = 0
    max_threads: int = 0
    max_processes: int = 0
    peak_rss_bytes: int = 0
    peak_tasks: int | None = None
    huge_pages_kb: int = 0
    cores: str = "any"

    def phase(self, name: str) -> Phase:
        return self.phases.setdefault(name, Phase())

    def to_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "phases": {k: v.to_json() for k, v in self.phases.items()},
            "idle_cpu_ms": round(self.idle_cpu_ns / 1e6, 3),
            "max_threads": self.max_threads,
            "max_processes": self.max_processes,
            "peak_rss_mb": round(self.peak_rss_bytes / (1 << 20), 1),
            "peak_tasks": self.peak_tasks,
            "cores": self.cores,
            "huge_pages_kb": self.huge_pages_kb,
        }


@dataclass
class Timed:
    """One timed request (one kernel call, or several for a very short kernel): this process's clock
    around it, and what the worker claims for each call."""

    trusted_ms: float  # thaw -> reply, by this process's clock
    host_ms: list[float]  # the worker's own clock around each kernel call (claims)
    device_ms: list[float] | None  # CUDA events per call (claims)
    cpu_ns: int  # sandbox CPU from thaw to frozen again
    window_ns: int  # wall time from thaw to frozen again
    wall_ns: int  # wall time from thaw to the reply (what the sandbox's CPU is judged against)
    outputs: list[list[OutputRef]]  # per call


# Each side's files and strings have the same length: with address randomisation off, one byte more
# in a path shifts every later heap allocation of the process, and with it how outputs alias the
# inputs modulo 4 KiB. A candidate-named process ran 5% slower than a baseline-named one running
# the same kernel (benchmarks/eval_overhead.py A/A runs) until they matched.
ROLE_TAGS = {"candidate": "cand", "baseline": "base"}


class WorkerSession:
    def __init__(
        self,
        spec: WorkerSpec,
        workdir: Path,
        isolation: Isolation,
        limits: Limits,
        deadline: float,
        segment: InputSegment | None = None,
    ) -> None:
        self.spec = spec
        self.tag = ROLE_TAGS.get(spec.role, spec.role[:4])
        self.workdir = workdir
        self.isolation = isolation
        self.deadline = deadline
        self.process: subprocess.Popen[bytes] | None = None
        self.control: ProcessControl | None = None
        self.memory: MemoryReader | None = None
        self.segment: InputSegment | None = segment
        self.owns_segment = (
            segment is None
        )  # one evaluation's two workers share one (each is frozen while the other runs)
        self.state_segment: InputSegment | None = None
        self.cgroup: Cgroup | None = None
        self.started_at = time.monotonic()
        self.limits = limits
        self.accounting = Accounting(method="none")
        self.cpuset: V1Group | None = None
        self.pids: V1Group | None = None
        self._last: Usage | None = None
        self._cpu_at_thaw = 0
        self.disk_reason: str | None = None  # set by the disk watchdog when the sandbox wrote past its quota
        self._watchdog: threading.Thread | None = None
        self._launched_ns = 0

    # ---- lifecycle ---------------------------------------------------------
    def start(self) -> None:
        """Start the worker and wait until it is ready, frozen, before any candidate code runs."""
        self.launch()
        self.ready()

    def launch(self) -> None:
        """Start the worker's process without waiting for it: its interpreter and torch import can
        overlap other work (the baseline's start overlaps the candidate's checks). `ready()` follows."""
        spec, tag = self.spec, self.tag
        log = self.workdir / f"{tag}.log"
        config = {
            "workdir": str(self.workdir),
            "log": str(log),
            "source": str(spec.source),
            "entry": spec.entry,
            "device": spec.device,
            "threads": spec.threads,
            "prefault_bytes": spec.prefault_bytes,
        }
        prepare_workdir(self.workdir, self.isolation.uid)
        # Trusted files are created afresh (never through a name the sandbox could have planted).
        config_path = self.workdir / f"{tag}.json"
        write_trusted(config_path, json.dumps(config).encode())
        write_trusted(log, b"", owner=self.isolation.uid)
        sandbox_log = self.workdir / f"{tag}.sandbox.log"
        write_trusted(sandbox_log, b"")
        if self.segment is None:
            self.segment = InputSegment()
        state_fd = -1
        if spec.state is not None:
            self.state_segment = InputSegment()
            self.state_layout = self.state_segment.place(spec.state[1])
            state_fd = self.state_segment.fd
        clean_stale_cgroups()
        root = cgroup_root()
        label = f"{spec.role}-{os.getpid()}"
        self.cgroup = Cgroup(root, label) if root is not None else None
        cpus = timing_cpus(spec.threads) if spec.device == "cpu" else None
        # The timing cores as a cpuset the sandbox cannot leave (sched_setaffinity alone can be undone
        # from inside), and a pids group whose peak shows threads that lived only inside a call.
        self.cpuset = V1Group.make("cpuset", label) if cpus else None
        if self.cpuset is not None:
            self.cpuset.write("cpuset.cpus", ",".join(str(c) for c in sorted(cpus or ())))
        self.pids = V1Group.make("pids", label)
        # Parent -> worker on FD_IN, worker -> parent on FD_OUT.
        to_worker_r, self.to_worker = os.pipe()
        self.from_worker, from_worker_w = os.pipe()
        # -P: the work dir (cwd) is never on sys.path, so nothing planted there is imported.
        command = wrap(
            [sys.executable, "-P", "-s", "-B", "-m", "kernel_agent.evaluate.sandbox.worker", str(config_path)],
            self.isolation,
            self.workdir,
            extra_ro=spec.extra_ro,
            masked=spec.masked,
            gpu=spec.device == "cuda",
        )
        package_root = str(package_dir().parent)
        env = sandbox_env({"PYTHONPATH": package_root, **spec.env}, self.workdir)
        limits, segment_fd = self.limits, self.segment.fd
        groups = [g for g in (self.cgroup, self.cpuset, self.pids) if g is not None]

        def before_exec() -> None:
            # Move every end above the target numbers first so the dup2s cannot clobber each other.
            moved = [
                fcntl.fcntl(fd, fcntl.F_DUPFD, 100) if fd >= 0 else -1
                for fd in (to_worker_r, from_worker_w, segment_fd, state_fd)
            ]
            for target, fd in zip((FD_IN, FD_OUT, FD_INPUTS, FD_STATE), moved):
                if fd >= 0:
                    os.dup2(fd, target)
            for group in groups:
                group.join()
            limits.apply()
            if cpus:
                os.sched_setaffinity(0, cpus)
            _same_layout()

        pass_fds = (FD_IN, FD_OUT, FD_INPUTS) + ((FD_STATE,) if state_fd >= 0 else ())
        stderr_fd = os.open(sandbox_log, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            self.process = subprocess.Popen(
                command,
                env=env,
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr_fd,
                pass_fds=pass_fds,
                preexec_fn=before_exec,
                start_new_session=True,
            )
        except subprocess.SubprocessError as exc:  # the setup in the child (cgroups, limits, affinity) failed
            reason = f"the sandbox could not start: {exc} (its cgroup, limits or cores)"
            raise WorkerFailure("crashed", reason) from None
        finally:
            os.close(stderr_fd)
        os.close(to_worker_r)
        os.close(from_worker_w)
        self.reader = channel.LineReader(self.from_worker)
        self.control = ProcessControl(self.process.pid, self.cgroup)
        pinned = (
            "cpuset " + self.cpuset.read("cpuset.cpus") if self.cpuset is not None else ("affinity" if cpus else "any")
        )
        self.accounting = Accounting(method=self.control.accounting(), cores=pinned)
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
            raise WorkerFailure("crashed", f"cannot read the worker's memory: {exc.strerror}") from None
        self._freeze()
        self._account("start", began)
        self._watchdog = threading.Thread(target=self._watch_disk, name="disk-watchdog", daemon=True)
        self._watchdog.start()

    def _disk_reason(self) -> str | None:
        """Why the sandbox's writes on the host are over quota: its log always (it lives on the host
        disk, a tmpfs does not bound it), the whole work dir where no scratch tmpfs bounds the rest."""
        try:
            logged = os.stat(self.workdir / f"{self.tag}.log").st_size
        except OSError:
            logged = 0
        if logged > LOG_LIMIT_BYTES:
            return (
                f"disk quota of {LOG_LIMIT_BYTES >> 20} MB for the kernel's "
                f"printed output exceeded: {logged >> 20} MB written"
            )
        if not self.isolation.scratch_tmpfs:
            return disk_overuse(self.workdir, self.limits.disk_bytes, self.isolation.uid)
        return None

    def _watch_disk(self) -> None:
        """Kill the sandbox once its writes on the host pass the quota."""
        while self.process is not None and self.disk_reason is None:
            reason = self._disk_reason()
            if reason and self.control is not None:
                self.disk_reason = reason
                self.control.kill()
                return
            time.sleep(DISK_CHECK_S)

    def load(self) -> None:
        """Import the kernel (and build a KernelBench model from the sealed weights)."""
        message: dict[str, Any] = {"cmd": "load"}
        if self.spec.state is not None:
            names, _tensors, init_args = self.spec.state
            message["state"] = {
                "names": names,
                "layout": [p.to_json() for p in self.state_layout],
                "init_args": init_args,
            }
        self.request(message, "load")

    def close(self) -> None:
        """Kill everything the worker started and release the pipes, segments and cgroup."""
        process = self.process
        if process is not None:
            ready = self.memory is not None  # one launched but never ready is not listening yet: killed at once
            if process.poll() is None and self.control is not None and ready and not self.control.frozen:
                try:
                    channel.send(self.to_worker, {"cmd": "exit"})
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
        for held in (self.memory, self.segment if self.owns_segment else None, self.state_segment):
            if held is not None:
                held.close()
        self.memory = self.segment = self.state_segment = None
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        for group in (self.cpuset, self.pids):
            if group is not None:
                group.remove()
        self.cpuset = self.pids = None

    def __enter__(self) -> WorkerSession:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- requests ----------------------------------------------------------
    def request(self, message: dict[str, Any], phase: str) -> dict[str, Any]:
        """Thaw, ask, wait for the answer, freeze again; the CPU used goes to `phase`."""
        began = self._thaw()
        self._send(message)
        try:
            reply = self._receive()
        finally:
            if self.process is not None:
                self._freeze()
                self._account(phase, began)
        return reply

    def place(self, inputs: list[torch.Tensor]) -> dict[str, Any]:
        """Write one call's inputs into the sealed segment (the sandbox is frozen); the message
        fields that name them."""
        assert self.segment is not None and (self.control is None or self.control.frozen)
        layout = self.segment.place(inputs)
        return {"layout": [p.to_json() for p in layout]}

    def timed_calls(self, sets: list[list[torch.Tensor]], integrity: bool) -> Timed:
        """One timed request: every call's inputs placed while frozen, this process's clock from thaw to reply."""
        flat = [t for inputs in sets for t in inputs]
        layout = self.place(flat)["layout"]
        calls, at = [], 0
        for inputs in sets:
            calls.append(layout[at : at + len(inputs)])
            at += len(inputs)
        began = self._thaw()
        t0 = time.perf_counter_ns()
        self._send({"cmd": "call", "integrity": integrity, "calls": calls})
        try:
            reply = self._receive()
        finally:
            t1 = time.perf_counter_ns()
            if self.process is not None:
                self._freeze()
        self._account("timed", began)
        assert self._last is not None
        host, device = reply.get("host_ms"), reply.get("device_ms")
        cuda = self.spec.device == "cuda"
        if not _claims(host, len(sets)) or (cuda and not _claims(device, len(sets))):
            raise WorkerFailure(
                "rejected", "the worker reported malformed timings (non-finite, non-positive or the wrong count)"
            )
        outputs = reply.get("outputs")
        if not isinstance(outputs, list) or len(outputs) != len(sets):
            raise WorkerFailure("rejected", "protocol violation: the worker reply's outputs are not one list per call")
        return Timed(
            trusted_ms=(t1 - t0) / 1e6,
            host_ms=[float(h) for h in host],
            device_ms=[float(d) for d in device] if cuda else None,
            cpu_ns=self._last.cpu_ns - self._cpu_at_thaw,
            window_ns=time.perf_counter_ns() - began,
            wall_ns=t1 - began,
            outputs=[self.output_refs({"outputs": o}, "outputs") for o in outputs],
        )

    def output_refs(self, reply: dict[str, Any], key: str) -> list[OutputRef]:
        described = reply.get(key)
        if not isinstance(described, list) or len(described) > MAX_TENSORS:
            raise WorkerFailure(
                "rejected", f"protocol violation: the worker reply's {key} are not a list of at most {MAX_TENSORS}"
            )
        try:
            return [OutputRef.parse(d) for d in described]
        except TransportError as exc:
            raise WorkerFailure("rejected", f"protocol violation: {exc}") from None

    def read(self, refs: list[OutputRef], expected_bytes: int) -> list[torch.Tensor]:
        """The tensors `refs` name, read from the frozen worker's memory (bounded by what is expected)."""
        assert self.memory is not None and self.control is not None and self.control.frozen
        bound = read_bound(expected_bytes)
        try:
            return [self.memory.read(ref, bound) for ref in refs]
        except TransportError as exc:
            raise WorkerFailure("incorrect", f"output unreadable: {exc}") from None

    def unchanged(self, refs: list[OutputRef], originals: list[torch.Tensor]) -> list[int]:
        """Indices of the tensors the worker left different from `originals` (read while frozen, in chunks)."""
        assert self.memory is not None and self.control is not None and self.control.frozen
        if len(refs) != len(originals):
            return list(range(max(len(refs), len(originals))))
        return [i for i, (ref, original) in enumerate(zip(refs, originals)) if not self.memory.matches(ref, original)]

    def timeout_s(self) -> float:
        return self.deadline - self.started_at

    # ---- freezing and accounting ---------------------------------------------------
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
                    "rejected",
                    f"the sandbox used {idle:.0f} ms of CPU while frozen between requests (escaped the freezer)",
                )
        self._cpu_at_thaw = usage.cpu_ns
        self.control.thaw()
        return time.perf_counter_ns()

    def _freeze(self) -> None:
        assert self.control is not None
        try:
            self.control.freeze()
        except ControlError as exc:
            self.close()
            raise WorkerFailure("rejected", str(exc)) from None

    def peak_tasks(self) -> int | None:
        """The most threads and processes the sandbox ever ran at once (pids.peak), where the machine records it."""
        if self.pids is None:
            return None
        try:
            return int(self.pids.read("pids.peak"))
        except (OSError, ValueError):
            return None

    def _account(self, phase: str, began: int) -> None:
        assert self.control is not None
        usage = self.control.usage()
        start = 0 if phase == "start" else self._cpu_at_thaw
        self.accounting.phase(phase).add(max(0, usage.cpu_ns - start), time.perf_counter_ns() - began)
        self.accounting.max_threads = max(self.accounting.max_threads, usage.threads)
        self.accounting.max_processes = max(self.accounting.max_processes, usage.processes)
        self._last = usage
        if self.disk_reason is None:
            self.disk_reason = self._disk_reason()
        if self.disk_reason:
            self.close()
            raise WorkerFailure("crashed", f"{self.disk_reason}; the sandbox was killed")
        if usage.processes > 1:
            self.close()
            raise WorkerFailure(
                "rejected",
                f"the sandbox holds {usage.processes} processes: the candidate started child processes ({phase})",
            )

    # ---- the pipe ------------------------------------------------------------------
    def _send(self, message: dict[str, Any]) -> None:
        try:
            channel.send(self.to_worker, message)
        except (BrokenPipeError, OSError):
            raise WorkerFailure(*self._death_reason()) from None

    def _receive(self) -> dict[str, Any]:
        try:
            reply = self.reader.receive(self.deadline)
        except channel.ChannelTimeout:
            self.close()
            raise WorkerFailure(
                "timeout",
                f"no answer within the {self.timeout_s():.0f} s wall-clock limit; the process group was killed",
            ) from None
        except channel.ChannelClosed:
            raise WorkerFailure(*self._death_reason()) from None
        except channel.ChannelError as exc:
            self.close()
            raise WorkerFailure("rejected", f"protocol violation: {exc}") from None
        if not reply.get("ok"):
            status = reply.get("status")
            if status not in WORKER_STATUSES:
                status = "rejected"
            raise WorkerFailure(str(status), clean(reply.get("reason", "no reason given")))
        return reply

    def _death_reason(self) -> tuple[str, str]:
        process = self.process
        code = None
        if process is not None:
            try:
                code = process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code = None
        last = self.last_error_line()
        self.close()
        if self.disk_reason:
            return "crashed", f"{self.disk_reason}; the sandbox was killed"
        said = f"; last output: {last}" if last else ""
        if code is not None and code < 0:
            name = signal.Signals(-code).name if -code in signal.Signals.__members__.values() else str(-code)
            return "crashed", f"worker killed by signal {name}{_oom_hint(-code)}{said}"
        if code is not None and code >= 128 + 1 and code - 128 in signal.Signals.__members__.values():
            return "crashed", f"worker killed by signal {signal.Signals(code - 128).name}{_oom_hint(code - 128)}{said}"
        return "crashed", f"worker exited (code {code}) without answering{said}"

    def log_tail(self) -> str:
        """The end of what the kernel printed, for feedback (never parsed for the verdict)."""
        return clean(_tail(self.workdir / f"{self.tag}.log"), LOG_TAIL_BYTES, keep_newlines=True)

    def last_error_line(self) -> str:
        """The most telling line the worker or its launcher wrote before dying (sanitized, truncated)."""
        for name in (f"{self.tag}.log", f"{self.tag}.sandbox.log"):
            lines = [line.strip() for line in _tail(self.workdir / name).splitlines() if line.strip()]
            errors = [line for line in lines if "Error" in line or "error" in line or "denied" in line]
            if errors or lines:
                return clean((errors or lines)[-1], 300)
        return ""


def _tail(path: Path) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        size = os.lseek(fd, 0, os.SEEK_END)
        os.lseek(fd, max(0, size - LOG_TAIL_BYTES), os.SEEK_SET)
        return os.read(fd, LOG_TAIL_BYTES).decode(errors="replace")
    except OSError:
        return ""
    finally:
        os.close(fd)


def _finite_positive(value: object) -> bool:
    return (
        isinstance(value, (int, float)) and not isinstance(value, bool) and value == value and 0 < value < float("inf")
    )


def _claims(values: object, count: int) -> bool:
    return isinstance(values, list) and len(values) == count and all(_finite_positive(v) for v in values)


ADDR_NO_RANDOMIZE = 0x0040000


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


def timing_cpus(threads: int) -> set[int] | None:
    """The same cores for every worker timed with `threads` threads: the last ones, away from
    the orchestrator. Two vCPUs of one VM can differ by a few percent for minutes; a baseline
    and a candidate pinned to the same cores cannot end up on different ones."""
    try:
        available = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    if threads >= len(available):
        return None
    return set(available[-threads:])


def _oom_hint(signum: int) -> str:
    if signum == signal.SIGKILL:
        return " (killed: out of memory or a resource limit)"
    if signum == signal.SIGXCPU:
        return " (CPU-time limit)"
    if signum == signal.SIGXFSZ:
        return " (file-size limit: output flood)"
    if signum == signal.SIGSEGV:
        return " (a memory fault: a write into the read-only input segment is one cause)"
    if signum == signal.SIGBUS:
        return " (a bus error: a write through a memory map past the disk quota is one cause)"
    return ""


__all__ = ["Placed", "Timed", "WorkerFailure", "WorkerSession", "WorkerSpec"]
