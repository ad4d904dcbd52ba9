"""The machine's part of the doctor: compilers, torch and Triton, GPUs, cgroups, huge pages, disk space."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
from pathlib import Path

from kernel_agent.doctor.record import Check, State

GB = 1 << 30
LOW_DISK_BYTES = 5 * GB  # a build store of 2 GiB, a 1 GiB work-dir quota per sandbox, two sandboxes at once


def _first_line(command: list[str], pick: str = "") -> str | None:
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [line.strip() for line in out.splitlines() if line.strip() and pick in line]
    return lines[0] if lines else None


def compiler_checks() -> list[Check]:
    from kernel_agent.cpp import COMPILER

    rows = []
    gcc = _first_line([COMPILER, "--version"])
    if gcc:
        rows.append(Check("compilers", COMPILER, State.OK, gcc))
    else:
        rows.append(
            Check("compilers", COMPILER, State.MISSING, "not found: C++ candidates cannot build", "apt-get install g++")
        )
    nvcc = shutil.which("nvcc") and _first_line(["nvcc", "--version"], "release")
    if nvcc:
        rows.append(Check("compilers", "nvcc", State.OK, nvcc))
    else:
        rows.append(Check("compilers", "nvcc", State.NOTE, "not found: needed only for inline CUDA candidates"))
    return rows


def torch_checks() -> list[Check]:
    import torch

    backends = [name for name, on in _torch_backends(torch).items() if on]
    rows = [Check("python", "torch", State.OK, f"{torch.__version__} ({', '.join(backends) or 'CPU only'})")]
    try:
        rows.append(Check("python", "triton", State.OK, importlib.metadata.version("triton")))
    except importlib.metadata.PackageNotFoundError:
        rows.append(Check("python", "triton", State.NOTE, "not installed: Triton candidates cannot run"))
    return rows


def _torch_backends(torch) -> dict[str, bool]:  # noqa: ANN001 - the module
    return {
        f"CUDA {torch.version.cuda}": bool(torch.version.cuda),
        f"ROCm {getattr(torch.version, 'hip', None)}": bool(getattr(torch.version, "hip", None)),
        "OpenMP": torch.backends.openmp.is_available(),
        "MKL": torch.backends.mkl.is_available(),
        "oneDNN": torch.backends.mkldnn.is_available(),
    }


def gpu_checks() -> list[Check]:
    import torch

    if not torch.cuda.is_available():
        why = "this torch has no CUDA" if not torch.version.cuda else "none visible (driver, CUDA_VISIBLE_DEVICES)"
        return [Check("gpus", "cuda", State.NOTE, f"{why}: CPU problems run, Triton ones are verified interpreted")]
    driver = _first_line(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]) or "unknown"
    rows = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        found = f"{props.name}, {props.total_memory / GB:.0f} GiB, driver {driver}"
        rows.append(Check("gpus", f"cuda:{index}", State.OK, found))
    return rows


V1_USES = {
    "cpuset": "timing cores pinned where the sandbox cannot leave them",
    "pids": "peak task count",
    "memory": "each sandbox held to its evaluation's memory booking",
    "freezer": "the sandbox frozen between requests (where v2 has no freezer)",
}


def cgroup_checks() -> list[Check]:
    """What the accounting and the freezer get here: the groups a sandbox would join, made and removed."""
    from kernel_agent.sandbox.host.cgroups import V1Group, cgroup_root

    rows = []
    root = cgroup_root()
    if root is not None:
        controllers = (root.parent / "cgroup.controllers").read_text().split()
        found = f"v2 at {root.parent}: exact CPU (cpu.stat), cgroup.kill; controllers {' '.join(controllers) or '-'}"
        rows.append(Check("accounting", "cgroup v2", State.OK, found))
    else:
        rows.append(
            Check(
                "accounting",
                "cgroup v2",
                State.WEAK,
                "no writable cgroup v2 folder: CPU from /proc (threads in ns; dead threads, children to 10 ms)",
                "a writable cgroup (docker run --cgroupns=private, or systemd-run --user --scope -p Delegate=yes)",
            )
        )
    usable = {}
    for controller, use in V1_USES.items():
        group = V1Group.make(controller, "doctor")
        usable[controller] = group is not None
        if group is not None:
            group.remove()
            rows.append(Check("accounting", f"cgroup v1 {controller}", State.OK, use))
        else:
            rows.append(Check("accounting", f"cgroup v1 {controller}", State.NOTE, f"not writable: not {use}"))
    rows.append(_freezer(root, usable["freezer"]))
    return rows


def _freezer(root: Path | None, v1: bool) -> Check:
    """The freezer a sandbox gets, in the order session.py tries them."""
    if os.environ.get("KERNEL_AGENT_FREEZER") == "signal":
        return Check("accounting", "freezer", State.WEAK, "SIGSTOP (forced by KERNEL_AGENT_FREEZER=signal)")
    if root is not None and (root / "cgroup.freeze").exists():
        return Check("accounting", "freezer", State.OK, "cgroup v2 freezer (cgroup.freeze)")
    if v1:
        return Check("accounting", "freezer", State.OK, "cgroup v1 freezer")
    return Check(
        "accounting",
        "freezer",
        State.WEAK,
        "SIGSTOP, checked from /proc (a sandbox that resumes itself is rejected)",
        "a writable cgroup v2 folder with cgroup.freeze, or a v1 freezer hierarchy",
    )


def huge_page_check() -> Check:
    path = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    try:
        text = path.read_text().strip()
    except OSError:
        return Check("memory", "huge pages", State.NOTE, "no transparent huge pages here: workers use small pages")
    mode = text.split("[")[1].split("]")[0] if "[" in text else text
    if mode == "never":
        return Check(
            "memory",
            "huge pages",
            State.WEAK,
            "transparent huge pages: never (two workers of one kernel can differ 5-20% in speed)",
            f"echo madvise > {path}",
        )
    return Check("memory", "huge pages", State.OK, f"transparent huge pages: {mode} (the worker's heap asks for them)")


def disk_checks(places: dict[str, Path]) -> list[Check]:
    rows = []
    for name, path in places.items():
        where = path
        while not where.exists() and where != where.parent:
            where = where.parent
        free = shutil.disk_usage(where).free
        state = State.OK if free >= LOW_DISK_BYTES else State.WEAK
        fix = "" if state == State.OK else f"free space under {where}, or point it elsewhere"
        rows.append(Check("disk", name, state, f"{path}: {free / GB:.1f} GiB free", fix))
    return rows


def cpu_line() -> Check:
    return Check("machine", "cpus", State.NOTE, f"{os.cpu_count()} cores; timing uses the last N (--threads N)")
