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

import argparse
import ctypes
import errno
import importlib.util
import json
import mmap
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

FD_IN, FD_OUT, FD_INPUTS, FD_STATE = 3, 4, 5, 6
WORKER_STATUSES = ("compile_error", "runtime_error", "crashed", "rejected", "incorrect")
PRIVATE_COPY_BYTES = (
    256 << 20
)  # check inputs up to this are copied for the kernel; larger ones are the read-only segment itself


class Violation(Exception):
    """The candidate broke a harness rule (status `rejected`)."""


class CallError(Exception):
    """The candidate raised while being called (status `runtime_error` or `compile_error`)."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _one_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    return text[:500]


def _where(exc: BaseException, source_path: str) -> str:
    """The candidate-file line that raised, for feedback to the author."""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename == source_path:
            return f" (line {frame.lineno}: {(frame.line or '').strip()[:120]})"
    return ""


class Worker:
    def __init__(self, config: dict[str, Any]) -> None:
        import torch

        from kernel_agent.evaluate.sandbox import channel, shm

        self.torch = torch
        self.shm = shm
        self.channel = channel
        self.config = config
        self.device = config["device"]
        self.reader = channel.LineReader(FD_IN)
        self.segment: mmap.mmap | None = None
        self.kept: list[Any] = []  # the last reply's outputs stay alive until the trusted side has read them
        torch.set_num_threads(int(config["threads"]))
        torch.set_grad_enabled(False)
        if self.device == "cuda":
            torch.cuda.init()
            torch.empty(1, device="cuda")
            self.l2_flush = torch.empty(
                max(2 * torch.cuda.get_device_properties(0).L2_cache_size, 64 << 20), dtype=torch.uint8, device="cuda"
            )
        # Warm torch's own thread pools so later counts only see the candidate's threads.
        (torch.ones(64, 64) @ torch.ones(64, 64)).sum().item()
        prefault = int(config.get("prefault_bytes", 0))
        if prefault:  # back the heap now, the same way in every worker (huge pages where the host gives them)
            block = torch.empty(prefault, dtype=torch.uint8)  # the heap grows to hold it; nothing touched yet
            advise_huge_heap()
            block.fill_(0)
            del block
        self.pristine = self._snapshot()

    # ---- integrity -------------------------------------------------------
    def _snapshot(self) -> dict[str, Any]:
        torch = self.torch
        snap: dict[str, Any] = {
            "time.perf_counter": time.perf_counter,
            "time.perf_counter_ns": time.perf_counter_ns,
            "time.monotonic": time.monotonic,
            "time.time": time.time,
            "os.urandom": os.urandom,
            "torch.Tensor.clone": torch.Tensor.clone,
            "torch.Tensor.copy_": torch.Tensor.copy_,
            "torch.equal": torch.equal,
            "torch.set_num_threads": torch.set_num_threads,
            "Worker.run_call": Worker.run_call.__code__,
            "Worker.call": Worker.call.__code__,
            "Worker.check_integrity": Worker.check_integrity.__code__,
            "flag.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "flag.cudnn_tf32": torch.backends.cudnn.allow_tf32,
            "flag.cudnn_benchmark": torch.backends.cudnn.benchmark,
            "flag.matmul_precision": torch.get_float32_matmul_precision(),
            "flag.deterministic": torch.are_deterministic_algorithms_enabled(),
            "threads": torch.get_num_threads(),
            "py_threads": threading.active_count(),
        }
        if self.device == "cuda":
            snap.update(
                {
                    "torch.cuda.synchronize": torch.cuda.synchronize,
                    "torch.cuda.Event": torch.cuda.Event,
                    "torch.cuda.Event.record": torch.cuda.Event.record,
                    "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
                }
            )
        return snap

    def check_integrity(self, when: str) -> None:
        now = self._snapshot()
        for key, value in self.pristine.items():
            if key == "py_threads":
                if now[key] > value:
                    raise Violation(
                        f"candidate started {now[key] - value} Python "
                        f"thread(s) ({when}); background work is not allowed"
                    )
            elif now[key] is not value and now[key] != value:
                raise Violation(f"harness tampering: {key} changed ({when})")

    # ---- loading ---------------------------------------------------------
    def load(self, message: dict[str, Any]) -> dict[str, Any]:
        config, torch = self.config, self.torch
        source_path = config["source"]
        name = "ka_kernel_module"  # the same for both sides (see session.ROLE_TAGS)
        try:
            spec = importlib.util.spec_from_file_location(name, source_path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        except SyntaxError as exc:
            raise CallError("compile_error", f"SyntaxError: {exc.msg} (line {exc.lineno})") from None
        except BaseException as exc:  # noqa: BLE001 - any failure to load is the candidate's
            if isinstance(exc, SystemExit):
                raise CallError("crashed", f"candidate called exit({exc.code}) while loading") from None
            raise CallError("compile_error", f"import failed: {_one_line(exc)}{_where(exc, source_path)}") from None
        self.module = module
        entry = config["entry"]
        target = getattr(module, entry, None)
        if target is None:
            raise CallError("compile_error", f"the module defines no `{entry}`")
        if message.get("state") is not None:
            self.fn: Callable[..., Any] = self._build_model(target, entry, message)
        else:
            if not callable(target):
                raise CallError("compile_error", f"`{entry}` is not callable")
            self.fn = target
        torch.set_num_threads(int(config["threads"]))
        self.check_integrity("after import")
        return {"ok": True, "event": "loaded"}

    def _build_model(self, target: Any, entry: str, message: dict[str, Any]) -> Any:
        """A KernelBench module built with the reference's weights (read from the sealed state segment)."""
        state_map = self.shm.map_readonly(FD_STATE)
        names, layout = message["state"]["names"], message["state"]["layout"]
        state = dict(zip(names, self.shm.views(state_map, layout)))
        try:
            model = target(*message["state"]["init_args"])
            model.load_state_dict(state, strict=True)
            model = model.to(self.device).eval()
        except BaseException as exc:  # noqa: BLE001
            raise CallError(
                "compile_error", f"could not build {entry} with the reference weights: {_one_line(exc)}"
            ) from None
        return model

    # ---- calls -----------------------------------------------------------
    def _inputs(self, message: dict[str, Any], private: bool) -> tuple[list[Any], list[Any]]:
        """(the inputs for the kernel, the segment views): private copies for checks (a kernel that writes
        into its inputs is then told so), views for timed calls and for inputs too large to copy."""
        if self.segment is None:
            self.segment = self.shm.map_readonly(FD_INPUTS)
        shared = self.shm.views(self.segment, message["layout"])
        if self.device == "cuda":
            return [t.to("cuda") for t in shared], shared
        if private and sum(t.numel() * t.element_size() for t in shared) <= PRIVATE_COPY_BYTES:
            return [t.clone() for t in shared], shared
        return shared, shared  # a write into the read-only segment ends the call with SIGSEGV

    def run_call(self, inputs: list[Any]) -> tuple[Any, ...]:
        torch = self.torch
        try:
            result = self.fn(*inputs)
        except SystemExit as exc:
            raise CallError("crashed", f"candidate called exit({exc.code})") from None
        except MemoryError:
            raise CallError("crashed", "out of memory (the sandbox memory limit was hit)") from None
        except BaseException as exc:  # noqa: BLE001
            if _is_out_of_memory(exc):
                raise CallError(
                    "crashed", f"out of memory (the sandbox memory limit was hit): {_one_line(exc)[:200]}"
                ) from None
            if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
                raise CallError("crashed", "file-size limit hit (output flood): SIGXFSZ/EFBIG") from None
            if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise CallError(
                    "crashed", f"disk quota reached (the sandbox's scratch space is full): {_one_line(exc)[:200]}"
                ) from None
            status = "compile_error" if "CompilationError" in type(exc).__name__ else "runtime_error"
            raise CallError(status, f"{_one_line(exc)}{_where(exc, self.config['source'])}") from None
        outputs = (result,) if not isinstance(result, (tuple, list)) else tuple(result)
        for index, out in enumerate(outputs):
            if type(out) is not torch.Tensor:
                raise CallError("runtime_error", f"output {index} is a {type(out).__name__}, not a plain torch.Tensor")
            if out.__dict__:
                # Per-instance overrides (.detach, .cpu, ...) would run the real work after the clock stops.
                raise CallError(
                    "rejected",
                    f"output {index} carries per-instance attributes "
                    f"({', '.join(sorted(out.__dict__))[:120]}): lazy outputs are not allowed",
                )
        return outputs

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
        return [self.shm.OutputRef.of(h, t.device.type).to_json() for h, t in zip(host, tensors)]

    def check(self, message: dict[str, Any]) -> dict[str, Any]:
        torch = self.torch
        self.kept = []  # the last reply's tensors were read while this process was frozen: free them before the copy
        inputs, shared = self._inputs(message, private=True)
        self._poison(int(message.get("poison_bytes", 0)), float(message.get("poison_value", float("nan"))))
        outputs = self.run_call(inputs)
        if self.device == "cuda":
            torch.cuda.synchronize()
        _check_aliasing(outputs, inputs)
        for index, (now, before) in enumerate(zip(inputs, shared)):
            if not torch.equal(now.cpu(), before):
                raise CallError("incorrect", f"input {index} was modified by the kernel (inputs must stay unchanged)")
        # The inputs as the kernel left them go back too: the trusted side checks them bitwise.
        described = self._describe(list(outputs) + list(inputs))
        self.check_integrity("after a check call")
        return {"ok": True, "outputs": described[: len(outputs)], "inputs": described[len(outputs) :]}

    def warmup(self, message: dict[str, Any]) -> dict[str, Any]:
        inputs, _ = self._inputs(message, private=False)
        start, calls = time.perf_counter(), 0
        while calls < int(message.get("min_calls", 10)) or time.perf_counter() - start < float(
            message.get("min_seconds", 0.025)
        ):
            self.run_call(inputs)
            if self.device == "cuda":
                self.torch.cuda.synchronize()
            calls += 1
            if time.perf_counter() - start > float(message.get("max_seconds", 30)):
                break
        advise_huge_heap()  # the heap may have grown past the start's: the later growth on huge pages too
        self.check_integrity("after warm-up")
        return {"ok": True, "calls": calls, "seconds": time.perf_counter() - start}

    def call(self, message: dict[str, Any]) -> dict[str, Any]:
        """A request of timed calls, one per input set in the segment (several only for kernels much
        shorter than a request's overhead). The trusted side's clock around the request bounds the
        time of record; this process's own clocks (and CUDA events) are claims it cross-checks."""
        torch = self.torch
        self.kept = []
        host_ms, device_ms, described = [], [], []
        for layout in message["calls"]:
            inputs, _ = self._inputs({"layout": layout}, private=False)
            if self.device == "cuda":
                torch.cuda.synchronize()
                self.l2_flush.fill_(1)
                torch.cuda.synchronize()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                t0 = time.perf_counter_ns()
                start.record()
                outputs = self.run_call(inputs)
                end.record()
                torch.cuda.synchronize()
                t1 = time.perf_counter_ns()
                device_ms.append(start.elapsed_time(end))
            else:
                t0 = time.perf_counter_ns()
                outputs = self.run_call(inputs)
                t1 = time.perf_counter_ns()
            _check_aliasing(outputs, inputs)
            host_ms.append((t1 - t0) / 1e6)
            kept = self.kept
            described.append(self._describe(outputs))
            self.kept = kept + self.kept  # every call's outputs stay alive until the trusted side has read them
        reply = {
            "ok": True,
            "host_ms": host_ms,
            "device_ms": device_ms if self.device == "cuda" else None,
            "outputs": described,
        }
        if message.get("integrity"):
            self.check_integrity("after a timed block")
        return reply

    def profile(self, message: dict[str, Any]) -> dict[str, Any]:
        """torch.profiler over a few calls, after the timing is over: advice, never part of a verdict."""
        from kernel_agent.measure.op_breakdown import op_breakdown

        inputs, _ = self._inputs(message, private=False)
        self.run_call(inputs)
        breakdown = op_breakdown(lambda: self.run_call(inputs), self.device, int(message.get("calls", 3)))
        if self.device == "cuda":
            from kernel_agent.measure.op_breakdown import triton_kernels_metadata

            breakdown["triton"] = triton_kernels_metadata(vars(self.module))
        return {"ok": True, "breakdown": breakdown}

    def serve(self) -> None:
        handlers = {
            "load": self.load,
            "check": self.check,
            "warmup": self.warmup,
            "call": self.call,
            "profile": self.profile,
        }
        while True:
            try:
                message = self.reader.receive()
            except self.channel.ChannelClosed:
                return
            command = message.get("cmd")
            if command == "exit":
                return
            try:
                reply = handlers[command](message)
            except CallError as exc:
                reply = {"ok": False, "status": exc.status, "reason": exc.reason}
            except Violation as exc:
                reply = {"ok": False, "status": "rejected", "reason": str(exc)}
            except MemoryError:
                reply = {"ok": False, "status": "crashed", "reason": "out of memory"}
            except Exception as exc:  # noqa: BLE001 - e.g. CUDA errors surfacing at sync
                reply = {"ok": False, "status": "runtime_error", "reason": _one_line(exc)}
            self.channel.send(FD_OUT, reply)


def _check_aliasing(outputs: tuple[Any, ...], inputs: list[Any]) -> None:
    for i, out in enumerate(outputs):
        out_storage = out.untyped_storage()
        lo, hi = out_storage.data_ptr(), out_storage.data_ptr() + out_storage.nbytes()
        for j, inp in enumerate(inputs):
            storage = inp.untyped_storage()
            a, b = storage.data_ptr(), storage.data_ptr() + storage.nbytes()
            if out_storage.nbytes() and storage.nbytes() and lo < b and a < hi:
                raise CallError("incorrect", f"output {i} shares memory with input {j} (outputs may not alias inputs)")


MADV_HUGEPAGE = 14


def advise_huge_heap() -> None:
    """Ask for huge pages on the whole C heap as it is now (brk's reach, the pinned top pad included).

    Kernels' tensors live there (the mmap threshold is pinned above any of them). With 4 KiB pages two
    processes running one kernel kept a 5-20% speed difference for their whole life (physical placement);
    on huge pages, within 1-4%. Asked for here, after `import torch`, rather than for the whole process
    (glibc.malloc.hugetlb=1): the import's scattered heap then stays on small pages, and on a VM whose host
    takes freed memory back, every huge page costs a cold fault (~12 ms per MB here, 2026-12-03)."""
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


def _is_out_of_memory(exc: BaseException) -> bool:
    text = str(exc)
    return (
        type(exc).__name__ == "OutOfMemoryError" or "can't allocate memory" in text or "Cannot allocate memory" in text
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("config")
    args = parser.parse_args()
    config = json.loads(Path(args.config).read_text())
    # Keep the protocol fds private; anything the candidate prints goes to a log file.
    log = os.open(config["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)
    from kernel_agent.evaluate.sandbox import channel

    _set_pdeathsig()
    worker = Worker(config)
    # Ready before any candidate code runs: the trusted side records this process and freezes it.
    channel.send(FD_OUT, {"ok": True, "event": "ready"})
    worker.serve()


def _set_pdeathsig() -> None:
    try:
        libc = ctypes.CDLL(None)
        libc.prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except OSError:
        pass


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)
