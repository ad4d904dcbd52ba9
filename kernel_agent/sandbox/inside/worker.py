"""The process that runs one kernel (candidate or baseline) inside the sandbox.

It never sees the reference, the problem module or any seed. Inputs arrive in a
sealed shared-memory segment it can only read; it answers each request with where
its outputs live in its own memory, and the trusted side reads them itself while
this process is frozen. Everything it says is a claim: the trusted side times
every call with its own clock, counts this process's threads and CPU time from
`/proc`, and keeps it stopped (SIGSTOP) whenever it is not serving a request. The
integrity checks here (captured timers, backend flags, Python thread count) only
give a precise early reason for the common in-process tricks.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from kernel_agent.core.verdict import Status
from kernel_agent.sandbox import channel
from kernel_agent.sandbox.inside import kernel_call
from kernel_agent.sandbox.inside.device_worker import export_all, open_inputs
from kernel_agent.sandbox.inside.integrity import Integrity
from kernel_agent.sandbox.inside.kernel_call import (
    LOG,
    Violation,
    check_aliasing,
    one_line,
    plain_outputs,
    pointers,
)
from kernel_agent.sandbox.inside.loading import build_model, entry_point, import_kernel
from kernel_agent.sandbox.protocol import (
    Call,
    CallError,
    Check,
    Describe,
    Exit,
    Load,
    Ping,
    Profile,
    ProtocolError,
    Request,
    Stage,
    Warmup,
    WorkerFds,
    parse,
)


class Worker:
    def __init__(self, config: dict[str, Any]) -> None:
        import torch

        from kernel_agent.sandbox import tensors

        self.torch = torch
        self.tensors = tensors  # imported here, as torch is: once `main` has sent this process's output to its log
        self.config = config
        self.device = config["device"]
        self.fds: WorkerFds = config["fds"]
        self.reader = channel.LineReader(self.fds.requests, peer="the trusted side")
        self.segment: mmap.mmap | None = None
        self.kept: list[Any] = []  # the last reply's outputs stay alive until the trusted side has read them
        self.staged: dict[str, list[Any]] = {}  # each config's timed calls: their input views (on a GPU, layouts)
        self.pending: list[Any] = []  # the last timed request's calls: (inputs, result, host ns, device ms)
        torch.set_num_threads(int(config["threads"]))
        torch.set_grad_enabled(False)
        if self.device == "cuda":
            torch.cuda.init()
            torch.empty(1, device="cuda")
            self.l2_flush = torch.empty(
                max(2 * torch.cuda.get_device_properties(0).L2_cache_size, 64 << 20), dtype=torch.uint8, device="cuda"
            )
        self.ipc = device_transport(config)  # the device path's transport (None on the host path)
        # Warm torch's own thread pools so later counts only see the candidate's threads.
        (torch.ones(64, 64) @ torch.ones(64, 64)).sum().item()
        prefault = int(config.get("prefault_bytes", 0))
        if prefault:  # back the heap now, the same way in every worker (huge pages where the host gives them)
            block = torch.empty(prefault, dtype=torch.uint8)  # the heap grows to hold it; nothing touched yet
            advise_huge_heap()
            block.fill_(0)
            del block
        harness: dict[str, Callable[[], Any]] = {
            "Worker.run_call": lambda: Worker.run_call.__code__,
            "Worker.call": lambda: Worker.call.__code__,
            "Worker.check_integrity": lambda: Worker.check_integrity.__code__,
            "kernel_call.invoke": lambda: kernel_call.invoke,
        }
        self.integrity = Integrity(torch, self.device, harness)

    def check_integrity(self, when: str) -> None:
        self.integrity.check(when)

    # ---- loading ---------------------------------------------------------
    def load(self, request: Load) -> dict[str, Any]:
        config = self.config
        self.module = import_kernel(config["source"], config.get("build_store"))
        self.fn = entry_point(self.module, config["entry"], self._model(request))
        self.torch.set_num_threads(int(config["threads"]))
        self.check_integrity("after import")
        return {"ok": True, "event": "loaded"}

    def _model(self, request: Load) -> Callable[[Any], Any] | None:
        """How a KernelBench module is built with the reference's weights (read from the sealed state segment)."""
        if request.state is None:
            return None
        state_map = self.tensors.map_readonly(self.fds.state)
        names, layout = request.state["names"], request.state["layout"]
        state = dict(zip(names, self.tensors.views(state_map, layout)))
        init_args = request.state["init_args"]
        return lambda target: build_model(target, self.config["entry"], state, init_args, self.device)

    # ---- calls -----------------------------------------------------------
    def _inputs(self, layout: list[Any]) -> list[Any]:
        """The kernel's inputs: views of the copy-on-write mapping of the segment, for checks, warm-up and timed
        calls alike (nothing tells a timed call from a checked one by its memory). On a GPU, device copies."""
        if self.segment is None:
            self.segment = self.tensors.map_private(self.fds.inputs)
        views = self.tensors.views(self.segment, layout)
        return [t.to("cuda") for t in views] if self.device == "cuda" else views

    def run_call(self, inputs: list[Any]) -> tuple[Any, ...]:
        return self.validated(self.invoke(inputs))

    def invoke(self, inputs: list[Any]) -> Any:
        """The kernel on `inputs`; whatever it raises, as a verdict-worthy CallError."""
        return kernel_call.invoke(self.fn, inputs, self.config["source"])

    def validated(self, result: Any) -> tuple[Any, ...]:
        """A call's result as a tuple of plain tensors (no subclass, no per-instance attributes)."""
        return plain_outputs(self.torch.Tensor, result)

    def _poison(self, nbytes: int, value: float) -> None:
        """Fill freed allocator memory so unwritten outputs cannot look plausible (NaN first, another
        sentinel on the repeat: an output that reads uninitialised memory then differs between runs)."""
        if nbytes <= 0:
            return
        torch = self.torch
        block = torch.full((nbytes // 4 + 1,), value, dtype=torch.float32, device=self.device)
        del block

    def _describe(self, tensors: tuple[Any, ...] | list[Any]) -> list[list]:
        """Where each tensor lives in host memory (device tensors are copied to the host first)."""
        host = [t.detach().cpu() if t.device.type != "cpu" else t.detach() for t in tensors]
        self.kept = host
        return [self.tensors.OutputRef.of(h, t.device.type).to_json() for h, t in zip(host, tensors)]

    def check(self, request: Check) -> dict[str, Any]:
        torch = self.torch
        self.kept = []  # the last reply's tensors were read while this process was frozen: free them before the copy
        inputs = self._inputs(request.placed["layout"])
        self._poison(request.poison_bytes, request.poison_value)
        outputs = self.run_call(inputs)
        if self.device == "cuda":
            torch.cuda.synchronize()
        check_aliasing(outputs, inputs)
        # The inputs as the kernel left them go back too: the trusted side checks them bitwise.
        described = self._describe(list(outputs) + list(inputs))
        self.check_integrity("after a check call")
        return {"ok": True, "outputs": described[: len(outputs)], "inputs": described[len(outputs) :]}

    def warmup(self, request: Warmup) -> dict[str, Any]:
        inputs = self._inputs(request.placed["layout"])
        start, calls = time.perf_counter(), 0
        while calls < request.min_calls or time.perf_counter() - start < request.min_seconds:
            self.run_call(inputs)
            if self.device == "cuda":
                self.torch.cuda.synchronize()
            calls += 1
            if time.perf_counter() - start > request.max_seconds:
                break
        advise_huge_heap()  # the heap may have grown past the start's: the later growth on huge pages too
        self.check_integrity("after warm-up")
        return {"ok": True, "calls": calls, "seconds": time.perf_counter() - start}

    def stage(self, request: Stage) -> dict[str, Any]:
        """Views of the segment for every call of a config's timed requests (untimed; no input has been placed
        yet, so nothing here can start on one): the timed request itself only calls the kernel."""
        layouts = request.calls
        views = [self._inputs(layout) for layout in layouts] if self.device == "cpu" else layouts
        if self.ipc is not None:  # the trusted side's device buffers, opened once (DESIGN.md section 18)
            views = open_inputs(self.ipc, request.handles)
        self.staged[request.key] = views
        return {"ok": True}

    def call(self, request: Call) -> dict[str, Any]:
        """One timed request: the kernel on each staged call's inputs, a clock read either side, nothing else.
        The trusted side's clock around it is the time of record; describing the outputs, checking them and
        reporting these clocks (claims) wait for `describe`, outside the timed request."""
        torch = self.torch
        self.kept, self.pending = [], []
        for staged in self.staged[request.key]:
            if self.device == "cuda":
                inputs = self._inputs(staged) if self.ipc is None else staged
                torch.cuda.synchronize()
                self.l2_flush.fill_(1)
                torch.cuda.synchronize()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                t0 = time.perf_counter_ns()
                start.record()
                result = self.invoke(inputs)
                end.record()
                torch.cuda.synchronize()
                t1 = time.perf_counter_ns()
                self.pending.append((inputs, result, t1 - t0, start.elapsed_time(end)))
            else:
                t0 = time.perf_counter_ns()
                result = self.invoke(staged)
                t1 = time.perf_counter_ns()
                self.pending.append((staged, result, t1 - t0, None))
        # Where each call's outputs are, as the request ends: the trusted side reads audited ones before
        # `describe`, so an output finished after the clock stopped is seen changing.
        return {"ok": True, "at": [pointers(result) for _, result, _, _ in self.pending]}

    def describe(self, request: Describe) -> dict[str, Any]:
        """After a timed request (untimed, its CPU held to the baseline's): where each call's outputs and inputs
        are, the worker's own clocks (claims), and the checks a call's outputs must pass."""
        host_ms, device_ms, described, given, kept = [], [], [], [], []
        for inputs, result, host_ns, device in self.pending:
            outputs = self.validated(result)
            check_aliasing(outputs, inputs)
            out, into = self._describe_timed(list(outputs), list(inputs))  # as a check call's reply: inputs too
            kept += self.kept
            described.append(out)
            given.append(into)
            host_ms.append(host_ns / 1e6)
            device_ms.append(device)
        self.kept, self.pending = kept, []  # every call's outputs stay alive until the trusted side has read them
        reply = {
            "ok": True,
            "host_ms": host_ms,
            "device_ms": device_ms if self.device == "cuda" else None,
            "outputs": described,
            "inputs": given,
        }
        if request.integrity:
            self.check_integrity("after a timed block")
        return reply

    def _describe_timed(self, outputs: list[Any], inputs: list[Any]) -> tuple[list[Any], list[Any]]:
        """A timed call's outputs and inputs as the kernel left them: host descriptions; on the device path the
        outputs' IPC handles (no host copy) and no inputs (they are the trusted side's own buffers)."""
        if self.ipc is not None:
            self.kept = outputs + inputs
            return export_all(self.ipc, outputs, "cuda"), []
        both = self._describe(outputs + inputs)
        return both[: len(outputs)], both[len(outputs) :]

    def ping(self, request: Ping) -> dict[str, Any]:
        """The least a request can cost: the floor under the time of record (the trusted side pings the
        baseline's worker, which runs no candidate code)."""
        return {"ok": True}

    def profile(self, request: Profile) -> dict[str, Any]:
        """torch.profiler over a few calls, after the timing is over: advice, never part of a verdict."""
        from kernel_agent.measure.op_breakdown import op_breakdown

        inputs = self._inputs(request.placed["layout"])
        self.run_call(inputs)
        breakdown = op_breakdown(lambda: self.run_call(inputs), self.device, request.calls)
        if self.device == "cuda":
            from kernel_agent.measure.op_breakdown import triton_kernels_metadata

            breakdown["triton"] = triton_kernels_metadata(vars(self.module))
        return {"ok": True, "breakdown": breakdown}

    def serve(self) -> None:
        """Answer requests until `Exit` or the channel closes. Every line is read through `protocol.parse`: one
        that is not a request gets `ok: false` and a one-line reason, with no status of the kernel's."""
        handlers: dict[type[Request], Callable[[Any], dict[str, Any]]] = {
            Load: self.load,
            Check: self.check,
            Warmup: self.warmup,
            Stage: self.stage,
            Call: self.call,
            Describe: self.describe,
            Ping: self.ping,
            Profile: self.profile,
        }
        while True:
            try:
                request = parse(self.reader.receive())
            except channel.ChannelClosed:
                return
            except (channel.ChannelError, ProtocolError) as exc:
                channel.send(self.fds.replies, {"ok": False, "reason": f"malformed request: {exc}"})
                if isinstance(exc, channel.LineTooLong):
                    return  # no line end to find: nothing after it can be read as a request
                continue
            if isinstance(request, Exit):
                return
            try:
                reply = handlers[type(request)](request)
            except CallError as exc:
                reply = {"ok": False, "status": exc.status, "reason": exc.reason}
            except Violation as exc:
                reply = {"ok": False, "status": Status.REJECTED, "reason": str(exc)}
            except MemoryError:
                reply = {"ok": False, "status": Status.CRASHED, "reason": "out of memory"}
            except Exception as exc:  # noqa: BLE001 - e.g. CUDA errors surfacing at sync
                reply = {"ok": False, "status": Status.RUNTIME_ERROR, "reason": one_line(exc)}
            channel.send(self.fds.replies, reply)


def device_transport(config: dict[str, Any]) -> Any:
    """CUDA IPC for `--gpu-data device` on a GPU (DESIGN.md section 18); None on the host path."""
    if config.get("gpu_data") != "device" or config["device"] != "cuda":
        return None
    from kernel_agent.sandbox.device.cuda_ipc import CudaIpcTransport

    return CudaIpcTransport()


MADV_HUGEPAGE = 14


def advise_huge_heap() -> None:
    """Ask for huge pages on the whole C heap as it is now (brk's reach, the pinned top pad included).

    Kernels' tensors live there (the mmap threshold is pinned above any of them). With 4 KiB pages two
    processes running one kernel kept a 5-20% speed difference for their whole life (physical placement);
    on huge pages, within 1-4%. Asked for here, after `import torch`, rather than for the whole process
    (glibc.malloc.hugetlb=1): the import's scattered heap then stays on small pages, and on a VM whose host
    takes freed memory back, every huge page costs a cold fault (DESIGN.md section 6 has the measurements)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        with open("/proc/self/maps") as maps:
            for line in maps:
                if line.rstrip().endswith("[heap]"):
                    low, high = (int(part, 16) for part in line.split()[0].split("-"))
                    libc.madvise(low, high - low, MADV_HUGEPAGE)  # EINVAL without THP: small pages, as before
    except OSError:
        pass


def run(config: dict[str, Any], fds: str) -> None:
    """Serve, once `start.py` has raised the walls: ready before any candidate code runs (the trusted side
    records this process and freezes it)."""
    descriptors = WorkerFds.parse(fds)
    config = {**config, "fds": descriptors}
    LOG.append(config["log"])
    worker = Worker(config)
    channel.send(descriptors.replies, {"ok": True, "event": "ready"})
    worker.serve()

    sys.stdout.flush()
    os._exit(0)
