"""Evaluations on a Ray cluster: the same sandboxed `evaluate`, placed by resource on any node.

Each evaluation is one Ray task. The task reloads the problem from its path (a `Problem`
holds a module object, so the path travels, not the object), runs `evaluate` with the same
sandbox as the local pool, and returns `verdict.to_dict()`. The orchestrator turns it back
into a `Verdict`; only the orchestrator writes the database, once per candidate, after the
future resolves, so a lost or retried task can never lose or duplicate an evaluation row.

Placement (why timed runs never overlap):
- a GPU evaluation asks for `num_gpus=1`: Ray gives it a GPU of its own (CUDA_VISIBLE_DEVICES)
  for the whole evaluation, so no other evaluation compiles, checks or times on that GPU;
- a CPU evaluation asks for one unit of the custom resource `kernel_agent_cpu_timing`, which
  every node declares once (`ray start ... --resources='{"kernel_agent_cpu_timing": 1}'`; the
  local cluster started here declares it): one CPU evaluation per node at a time. A custom
  resource rather than `num_cpus=<all cores>` because nodes differ in core counts, and taking
  every core would also starve the GPU evaluations' host-side work on the same node.
The price of holding the slot for the whole evaluation is that a node's compiles and checks do
not overlap its timed run as they do in the local pool's device gate; across nodes everything
runs in parallel.

Worker loss: a task whose worker process or node dies (WorkerCrashedError, NodeDiedError,
ObjectLostError, OutOfMemoryError, ...) is resubmitted by this executor up to `retries` times,
each loss recorded in the verdict's environment (`executor.lost`); if every try is lost the
verdict is `crashed` with the reason "evaluation lost with its Ray worker after N tries".
The resubmission is done here rather than by Ray's transparent `max_retries` (set to 0 on the
task) so that every loss is counted and recorded with the verdict.

Ray is imported lazily: the rest of kernel_agent imports without it.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from kernel_agent.core.verdict import Status, Verdict
from kernel_agent.evaluate.device_lock import NoGate
from kernel_agent.evaluate.pipeline import EvalOptions
from kernel_agent.problem.load import Problem

CPU_TIMING_RESOURCE = "kernel_agent_cpu_timing"
TASK_NAME = "kernel_agent_evaluate"  # the worker's process title while it runs: ray::kernel_agent_evaluate
DEFAULT_RETRIES = 2  # resubmissions after a lost worker: 3 tries in all
MAX_WAITING = 64  # evaluations waited on at once when --workers does not bound them


class RayUnavailable(RuntimeError):
    """Ray is not installed or the cluster cannot be reached (one line naming the fix)."""


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayUnavailable(
            "the Ray executor needs ray: pip install 'kernel-agent[cluster]' (or pip install 'ray>=2.9')"
        ) from None
    return ray


def messages_to_stderr() -> None:
    """Ray's driver prints cluster messages ("a worker died ...") on stdout; kernel-agent's stdout is
    its result (--json).

    Ray has no switch for this, so its printer is wrapped to send everything to stderr; if Ray's
    internals move, the wrapper is simply not installed.
    """
    try:
        from ray._private import worker as ray_worker
    except ImportError:
        return
    original = getattr(ray_worker, "print_to_stdstream", None)
    if original is None or getattr(original, "kernel_agent_wrapped", False):
        return

    def to_stderr(data: dict, ignore_prefix: bool) -> None:
        original({**data, "is_err": True}, ignore_prefix)

    to_stderr.kernel_agent_wrapped = True  # type: ignore[attr-defined]
    ray_worker.print_to_stdstream = to_stderr


def evaluate_in_worker(
    problem_path: str, tolerances: dict, norm_tolerances: dict, source: str, options: EvalOptions
) -> dict[str, Any]:
    """The body of the Ray task: reload the problem, evaluate in the sandbox, return the verdict as a dict."""
    import socket

    from kernel_agent.evaluate.pipeline import evaluate
    from kernel_agent.problem.load import load_problem

    started = time.perf_counter()
    problem = load_problem(problem_path)
    problem.tolerances.update({k: tuple(v) for k, v in tolerances.items()})
    problem.norm_tolerances.update(norm_tolerances)
    verdict = evaluate(problem, source, replace(options, gate=NoGate()))
    data = verdict.to_dict()
    data["environment"]["executor"] = {
        "kind": "ray",
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "gpus": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
        "task_s": round(time.perf_counter() - started, 4),
    }
    return data


def system_failure(ray: Any, exc: BaseException) -> bool:
    """A loss of the worker, node or object (retry), as opposed to an error raised by the evaluation itself."""
    errors = ray.exceptions
    lost = tuple(
        getattr(errors, name)
        for name in (
            "WorkerCrashedError",
            "NodeDiedError",
            "ObjectLostError",
            "OwnerDiedError",
            "OutOfMemoryError",
            "LocalRayletDiedError",
            "RaySystemError",
            "ObjectReconstructionFailedError",
            "ReferenceCountingAssertionError",
            "TaskUnschedulableError",
        )
        if hasattr(errors, name)
    )
    if isinstance(exc, lost):
        return True
    if isinstance(exc, errors.RayTaskError):
        cause = getattr(exc, "cause", None)
        return isinstance(cause, lost) or isinstance(cause, SystemExit)
    return False


class RayExecutor:
    """Run evaluations as Ray tasks on the cluster at `address` (None: start a local Ray on this machine)."""

    def __init__(
        self,
        address: str | None = None,
        workers: int | None = None,
        retries: int = DEFAULT_RETRIES,
        num_cpus: int | None = None,
    ) -> None:
        self.ray = ray = import_ray()
        self.address = address
        self.retries = max(0, retries)
        self.started_ray = False
        messages_to_stderr()
        if not ray.is_initialized():
            try:
                if address is None:
                    # A private local instance ("local": never join a stray cluster) that declares the CPU timing slot.
                    ray.init(
                        address="local",
                        num_cpus=num_cpus or max(2, os.cpu_count() or 1),
                        resources={CPU_TIMING_RESOURCE: 1},
                        include_dashboard=False,
                        log_to_driver=False,
                        configure_logging=False,
                    )
                else:
                    ray.init(address=address, log_to_driver=False, configure_logging=False)
            except Exception as exc:  # noqa: BLE001 - unreachable head, version mismatch, ...
                raise RayUnavailable(
                    f"cannot start or reach Ray at {address or 'a new local instance'}: "
                    f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                ) from None
            self.started_ray = True
        resources = ray.cluster_resources()
        self.gpus = int(resources.get("GPU", 0))
        self.cpu_slots = int(resources.get(CPU_TIMING_RESOURCE, 0))
        self.workers = workers or max(1, self.gpus + self.cpu_slots)
        self.remote = ray.remote(max_retries=0)(evaluate_in_worker)
        self.waiters = ThreadPoolExecutor(max_workers=workers or MAX_WAITING, thread_name_prefix="ray-evaluation")
        self.lock = threading.Lock()
        self.in_flight: set[Any] = set()
        self.closed = False

    # ---- placement -------------------------------------------------------------------
    def placement(self, problem: Problem, options: EvalOptions) -> dict[str, Any]:
        """Ray task options: one GPU for a GPU evaluation, the node's CPU timing slot for a CPU one."""
        wants_gpu = problem.device != "cpu" and options.device != "cpu" and self.gpus > 0
        if wants_gpu:
            return {"num_gpus": 1, "num_cpus": 1}
        return {"num_cpus": 1, "resources": {CPU_TIMING_RESOURCE: 1}}

    # ---- Executor protocol -----------------------------------------------------------
    def submit(self, problem: Problem, source: str, options: EvalOptions) -> Future[Verdict]:
        return self.waiters.submit(self._evaluate_safely, problem, source, options)

    def shutdown(self) -> None:
        self.closed = True
        with self.lock:
            refs = list(self.in_flight)
        for ref in refs:
            try:
                self.ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - already finished or its node is gone
                pass
        self.waiters.shutdown(wait=False, cancel_futures=True)
        if self.started_ray:
            self.ray.shutdown()

    # ---- one evaluation ----------------------------------------------------------------
    def _evaluate_safely(self, problem: Problem, source: str, options: EvalOptions) -> Verdict:
        """Always a verdict: the loop stores what the future holds and must never see an exception."""
        try:
            return self._evaluate(problem, source, options)
        except Exception as exc:  # noqa: BLE001 - e.g. Ray shut down under us, an undecodable result
            return self._crashed(
                problem, options, f"the Ray executor failed: {type(exc).__name__}: {_first_line(exc)}", [], 0
            )

    def _evaluate(self, problem: Problem, source: str, options: EvalOptions) -> Verdict:
        ray = self.ray
        placement = self.placement(problem, options)
        if "resources" in placement and self.cpu_slots == 0:
            return self._crashed(
                problem,
                options,
                f"the Ray cluster offers no {CPU_TIMING_RESOURCE} resource for CPU evaluations; start CPU nodes with "
                f"ray start ... --resources='{{\"{CPU_TIMING_RESOURCE}\": 1}}'",
                [],
                0,
            )
        # The sandbox root must mean the same folder to every worker, whatever its working directory.
        shipped = replace(options, gate=NoGate(), sandbox_root=Path(options.sandbox_root).resolve())
        tolerances = {k: list(v) for k, v in problem.tolerances.items()}
        lost: list[str] = []
        tries = self.retries + 1
        for attempt in range(1, tries + 1):
            if self.closed:
                return self._crashed(
                    problem, options, "evaluation cancelled: the Ray executor was shut down", lost, attempt - 1
                )
            ref = self.remote.options(name=TASK_NAME, **placement).remote(
                str(problem.path), tolerances, dict(problem.norm_tolerances), source, shipped
            )
            with self.lock:
                self.in_flight.add(ref)
            try:
                data = ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - sorted below: lost worker (retry) or an error in the evaluation
                if system_failure(ray, exc):
                    lost.append(f"try {attempt}: {type(exc).__name__}: {_first_line(exc)}")
                    continue
                cause = getattr(exc, "cause", None)
                name = type(cause if isinstance(cause, BaseException) else exc).__name__
                return self._crashed(
                    problem,
                    options,
                    f"evaluation failed inside its Ray worker: {name}: {_first_line(exc)}",
                    lost,
                    attempt,
                )
            finally:
                with self.lock:
                    self.in_flight.discard(ref)
            data["environment"].setdefault("executor", {}).update({"attempts": attempt, "lost": lost})
            return Verdict.from_dict(data)
        return self._crashed(
            problem,
            options,
            f"evaluation lost with its Ray worker after {tries} tries ({lost[-1] if lost else 'no reason'})",
            lost,
            tries,
        )

    def _crashed(self, problem: Problem, options: EvalOptions, reason: str, lost: list[str], attempts: int) -> Verdict:
        return Verdict(
            status=Status.CRASHED,
            reason=reason,
            problem=problem.name,
            device=problem.device if options.device == "auto" else options.device,
            environment={"executor": {"kind": "ray", "attempts": attempts, "lost": lost}},
        )


def _first_line(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None)  # a RayTaskError: report what the task raised, not Ray's wrapper
    if isinstance(cause, BaseException):
        exc = cause
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else ""
