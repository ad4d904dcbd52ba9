"""The trusted side's conversation with one sandboxed worker: what each request asks and what its reply
may claim. Loading the kernel, staging and placing inputs in the sealed segment, the timed request around
the kernel calls alone and the untimed description after it, and reading outputs out of the frozen
worker's memory. The process itself (launch, freezing, accounting, the pipe) is `process.SandboxProcess`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from kernel_agent.core.verdict import Status
from kernel_agent.sandbox.host.process import SandboxProcess, WorkerFailure, WorkerSpec
from kernel_agent.sandbox.host.shm import ExpectedOutput, layout_of, mismatch, read_bound
from kernel_agent.sandbox.protocol import Call, Describe, Load, Ping, Stage
from kernel_agent.sandbox.tensors import MAX_TENSORS, OutputRef, Placed, TransportError


@dataclass
class Timed:
    """One timed request (one kernel call, or several for a very short kernel): this process's clock
    around it, and what the worker claims for each call."""

    trusted_ms: float  # thaw -> reply, by this process's clock
    host_ms: list[float]  # the worker's own clock around each kernel call (claims)
    device_ms: list[float] | None  # CUDA events per call (claims)
    cpu_ns: int  # sandbox CPU from thaw to frozen again
    window_ns: int  # wall time from thaw to frozen again
    wall_ns: int  # wall time from thaw to the reply (what the CPU is judged against, with `cpu_use.after_reply_cap`)
    outputs: list[list[OutputRef]]  # per call
    inputs: list[list[OutputRef]] = field(default_factory=list)  # per call: as the kernel left them (audits)


class WorkerSession(SandboxProcess):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.staged: dict[str, str] = {}  # the call layouts the worker has views for (stage): layout -> key

    def load(self) -> None:
        """Import the kernel (and build a KernelBench model from the sealed weights)."""
        state = None
        if self.spec.state is not None:
            names, _tensors, init_args = self.spec.state
            state = {
                "names": names,
                "layout": [p.to_json() for p in self.state_layout],
                "init_args": init_args,
            }
        self.request(Load(state), "load")

    def place(self, inputs: list[torch.Tensor]) -> dict[str, Any]:
        """Write one call's inputs into the sealed segment (the sandbox is frozen); the message
        fields that name them."""
        assert self.segment is not None and (self.control is None or self.control.frozen)
        layout = self.segment.place(inputs)
        return {"layout": [p.to_json() for p in layout]}

    def segment_capacity(self) -> int:
        assert self.segment is not None
        return self.segment.capacity

    def stage(self, sets: list[list[torch.Tensor]]) -> str:
        """Stage a request's layout of timed calls (untimed, once per layout, before any timed input is placed,
        on either side: the segment holds nothing the candidate will be given while it runs here)."""
        layouts = call_layouts(sets)
        key = json.dumps(layouts)
        if key not in self.staged:
            self.staged[key] = str(len(self.staged))
            self.request(Stage(self.staged[key], layouts), "stage")
        return self.staged[key]

    def timed_calls(
        self,
        sets: list[list[torch.Tensor]],
        integrity: bool,
        watched: dict[int, tuple[ExpectedOutput, ...]] | None = None,
    ) -> Timed:
        """One timed request: every call's inputs placed while frozen, this process's clock from thaw to reply
        around the kernel calls alone; then, untimed, the worker describes what they returned. The outputs of
        the `watched` calls (the audited ones) are hashed where they lie as the request ends, and again once
        described: one finished after the clock stopped is refused."""
        key = self.staged.get(json.dumps(call_layouts(sets)))
        assert key is not None, "stage() every layout before the first placement of timed inputs"
        self.place([t for inputs in sets for t in inputs])
        ended, began, t0, t1 = self._clocked(Call(key), "timed")
        cpu_ns, window_ns = self.cpu_of_last_request(), time.perf_counter_ns() - began
        early = self._hash_outputs(ended.get("at"), watched or {})
        reply = self.request(Describe(integrity), "describe")
        cuda = self.spec.device == "cuda"
        claims = described_reply(reply, len(sets), cuda)
        described = [output_refs(o, "outputs") for o in claims.outputs]
        for call, hashes in early.items():
            for (address, size, before), ref in zip(hashes, described[call]):
                if ref.address != address or self.memory.digest(address, size) != before:  # type: ignore[union-attr]
                    raise WorkerFailure(
                        Status.REJECTED,
                        f"timed call {call + 1}'s output changed after its timed request ended: it was finished "
                        "outside the clock",
                    )
        return Timed(
            trusted_ms=(t1 - t0) / 1e6,
            host_ms=claims.host_ms,
            device_ms=claims.device_ms,
            cpu_ns=cpu_ns,
            window_ns=window_ns,
            wall_ns=t1 - began,
            outputs=described,
            inputs=[output_refs(i, "inputs") for i in claims.inputs],
        )

    def _hash_outputs(
        self, at: object, watched: dict[int, tuple[ExpectedOutput, ...]]
    ) -> dict[int, list[tuple[int, int, bytes]]]:
        """(address, bytes, hash) of each watched call's outputs where the worker said they are, read while frozen."""
        if not watched or self.spec.device != "cpu":  # device outputs are read through their host copies
            return {}
        if not (isinstance(at, list) and len(at) > max(watched) and all(isinstance(a, list) for a in at)):
            raise WorkerFailure(
                Status.REJECTED, "protocol violation: the timed request's reply does not say where its outputs are"
            )
        assert self.memory is not None
        found: dict[int, list[tuple[int, int, bytes]]] = {}
        for call, expected in watched.items():
            pointers = [a for a in at[call] if type(a) is int and 0 <= a < 1 << 64]
            found[call] = [
                (address, e.nbytes, digest)
                for address, e in zip(pointers, expected)
                if (digest := self.memory.digest(address, e.nbytes)) is not None
            ]
        return found

    def ping(self) -> float:
        """The trusted clock around the least a request can be (ms): thaw, a line each way, freeze."""
        _, _, t0, t1 = self._clocked(Ping(), "ping")
        return (t1 - t0) / 1e6

    def output_refs(self, reply: dict[str, Any], key: str) -> list[OutputRef]:
        """A check call's reply's descriptions under `key` ("outputs" or "inputs"), each field checked."""
        return output_refs(reply.get(key), key)

    def read(self, refs: list[OutputRef], expected: tuple[ExpectedOutput, ...]) -> list[torch.Tensor]:
        """The tensors `refs` name, read from the frozen worker's memory: only once their count, shapes and
        dtypes are the expected ones, and within a bound of the expected bytes. Whatever goes wrong while
        reading is the candidate's verdict, never the orchestrator's exception."""
        assert self.memory is not None and self.control is not None and self.control.frozen
        wrong = mismatch(refs, expected)
        if wrong:
            raise WorkerFailure(Status.INCORRECT, wrong)
        bound = read_bound(sum(e.nbytes for e in expected))
        try:
            return [self.memory.read(ref, bound) for ref in refs]
        except TransportError as exc:
            raise WorkerFailure(Status.INCORRECT, f"output unreadable: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - a description no check foresaw: refused, never raised on
            raise WorkerFailure(Status.REJECTED, f"output unreadable: {type(exc).__name__}: {exc}"[:300]) from None

    def unchanged(self, refs: list[OutputRef], originals: list[torch.Tensor]) -> list[int]:
        """Indices of the tensors the worker left different from `originals` (read while frozen, in chunks)."""
        assert self.memory is not None and self.control is not None and self.control.frozen
        if len(refs) != len(originals):
            return list(range(max(len(refs), len(originals))))
        return [i for i, (ref, original) in enumerate(zip(refs, originals)) if not self.memory.matches(ref, original)]


def call_layouts(sets: list[list[torch.Tensor]]) -> list[list]:
    """Each call's layout in the segment, as a placement of all of a request's sets at once lays them out."""
    layout = [p.to_json() for p in layout_of([t for inputs in sets for t in inputs])]
    calls, at = [], 0
    for inputs in sets:
        calls.append(layout[at : at + len(inputs)])
        at += len(inputs)
    return calls


def output_refs(described: object, what: str) -> list[OutputRef]:
    """The worker's descriptions of one call's `what` ("outputs" or "inputs"): a bounded list, every field
    type- and range-checked; anything else is a protocol violation."""
    if not isinstance(described, list) or len(described) > MAX_TENSORS:
        raise WorkerFailure(
            Status.REJECTED, f"protocol violation: the worker reply's {what} are not a list of at most {MAX_TENSORS}"
        )
    try:
        return [OutputRef.parse(d) for d in described]
    except TransportError as exc:
        raise WorkerFailure(Status.REJECTED, f"protocol violation: {exc}") from None


def _finite_positive(value: object) -> bool:
    return (
        isinstance(value, (int, float)) and not isinstance(value, bool) and value == value and 0 < value < float("inf")
    )


@dataclass(frozen=True)
class Described:
    """A `describe` reply held to its shape: one claim per call from each clock, and one description per call
    of its outputs and inputs, still undecoded (each data path decodes its own: addresses or IPC handles)."""

    host_ms: list[float]  # the worker's clock around each call (claims)
    device_ms: list[float] | None  # CUDA events per call (claims; None on a CPU)
    outputs: list[Any]
    inputs: list[Any]


def described_reply(reply: dict[str, Any], calls: int, cuda: bool) -> Described:
    """A `describe` reply's claims and per-call descriptions, each held to one per call (both data paths)."""
    host, device = reply.get("host_ms"), reply.get("device_ms")
    if not claims_ok(host, calls) or (cuda and not claims_ok(device, calls)):
        raise WorkerFailure(
            Status.REJECTED, "the worker reported malformed timings (non-finite, non-positive or the wrong count)"
        )
    outputs, given = reply.get("outputs"), reply.get("inputs")
    if not (isinstance(outputs, list) and isinstance(given, list) and len(outputs) == len(given) == calls):
        raise WorkerFailure(
            Status.REJECTED, "protocol violation: the worker reply's outputs and inputs are not one list per call"
        )
    assert isinstance(host, list)
    return Described(
        host_ms=[float(h) for h in host],
        device_ms=[float(d) for d in device] if cuda and isinstance(device, list) else None,
        outputs=outputs,
        inputs=given,
    )


def claims_ok(values: object, count: int) -> bool:
    """One finite, positive claim per call (the device session holds its claims to the same)."""
    return isinstance(values, list) and len(values) == count and all(_finite_positive(v) for v in values)


__all__ = ["Placed", "Timed", "WorkerFailure", "WorkerSession", "WorkerSpec"]
