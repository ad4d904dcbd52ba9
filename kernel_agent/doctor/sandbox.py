"""The sandbox's part of the doctor: each isolation level, whether the sandbox uid can start the worker's Python
here, and whether the trusted side can read a sandbox's memory (how every output is read)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from kernel_agent.doctor.record import Check, State
from kernel_agent.sandbox.host.isolation import (
    Isolation,
    package_dir,
    prepare_workdir,
    reachable_root,
    sandbox_env,
    wrap,
)
from kernel_agent.sandbox.host.levels import ORDER, Attempt, attempt, attempts

CAP_SYS_PTRACE = 19


def level_checks(preferred: str = "auto") -> list[Check]:
    """One row per level, then the level an evaluation gets (auto: the strongest that starts)."""
    rows = []
    for level in ORDER:
        tried = attempt(level)
        if tried.works:
            rows.append(Check("isolation", level, State.OK, f"starts a process here; keeps out: {keeps_out(tried)}"))
        else:
            rows.append(Check("isolation", level, State.MISSING, tried.why, tried.fix))
    reached = attempts(preferred)[-1]
    if reached.isolation is None:
        rows.append(Check("isolation", "in force", State.MISSING, f"{preferred} does not start here", reached.fix))
    else:
        strongest = reached.level == ORDER[0]
        found = reached.isolation.describe().split("; disk quota")[0] + ")"
        rows.append(Check("isolation", "in force", State.OK if strongest else State.WEAK, found))
    return rows


WALLS = {  # what each wall keeps out, in the words of the guide's level table
    "mount-ns": "the host's files but the system, the interpreter and the work dir (own mount namespace)",
    "no-net": "the network (own network namespace)",
    "seccomp": "sockets but AF_UNIX, ptrace, namespaces, mounts, io_uring, bpf, keys (seccomp)",
    "no-capabilities": "root's capabilities (root without any)",
    "setuid": "this user's files (uid 65534)",
}


def keeps_out(tried: Attempt) -> str:
    """What this level's walls keep out here, one phrase each, from the layers it records."""
    layers = tried.isolation.layers if tried.isolation else ()
    said = [WALLS[layer] for layer in layers if layer in WALLS]
    if tried.level in ("bwrap", "unshare") and "mount-ns" not in layers:
        said.insert(0, WALLS["mount-ns"])
    abi = next((layer for layer in layers if layer.startswith("landlock-abi")), None)
    if abi:
        version = int(abi.removeprefix("landlock-abi"))
        extra = (", TCP" if version >= 4 else "") + (", signals and abstract sockets outside" if version >= 6 else "")
        said.append(f"writes outside the work dir, reads outside the needed trees{extra} (Landlock ABI {version})")
    else:
        said.append("nothing more: no Landlock on this kernel")
    return "; ".join(said)


def worker_python_check(isolation: Isolation, sandbox_root: Path) -> Check:
    """Start the worker's interpreter with torch and this package as the sandbox runs it: a root whose venv sits
    under a private folder (a 0700 /root) works with bubblewrap's binds and cannot at the other levels."""
    root = reachable_root(sandbox_root, isolation)
    made = not root.exists()
    root.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="doctor-", dir=root))
    try:
        prepare_workdir(workdir, isolation.uid)
        code = "import torch, kernel_agent.sandbox.inside.worker"
        command = wrap([sys.executable, "-P", "-s", "-B", "-c", code], isolation, workdir)
        env = sandbox_env({"PYTHONPATH": str(package_dir().parent)}, workdir)
        try:
            done = subprocess.run(command, env=env, cwd=workdir, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.SubprocessError) as exc:
            return Check("sandbox", "worker python", State.MISSING, f"could not start: {exc}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        if made:
            shutil.rmtree(root, ignore_errors=True)
    who = f"uid {isolation.uid} at {isolation.level}"
    if done.returncode == 0:
        return Check("sandbox", "worker python", State.OK, f"{who} imports torch and kernel_agent from {sys.prefix}")
    said = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
    return Check(
        "sandbox",
        "worker python",
        State.MISSING,
        f"{who} cannot import torch and kernel_agent ({said}): a folder above {sys.prefix} is private to this user",
        "install into a venv every user can read (under /opt or /usr/local), or bubblewrap (its binds reach it)",
    )


def memory_check(isolation: Isolation) -> Check:
    """Outputs are read from a frozen sandbox's /proc/PID/mem; for another uid that takes CAP_SYS_PTRACE, which
    Docker drops by default."""
    if isolation.uid == os.geteuid():
        return Check("sandbox", "output reading", State.OK, "the sandbox runs as this uid: /proc/PID/mem is readable")
    if _has_capability(CAP_SYS_PTRACE):
        return Check("sandbox", "output reading", State.OK, "CAP_SYS_PTRACE held: /proc/PID/mem of uid 65534 readable")
    return Check(
        "sandbox",
        "output reading",
        State.MISSING,
        "root without CAP_SYS_PTRACE cannot read the sandbox's memory: every evaluation would crash",
        "run the container with --cap-add SYS_PTRACE, or run kernel-agent as a non-root user",
    )


def _has_capability(bit: int) -> bool:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> bit & 1)
    except (OSError, ValueError):
        pass
    return False
