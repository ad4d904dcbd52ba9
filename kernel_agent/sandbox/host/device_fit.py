"""The walls held to the device they must let through: on a machine with a GPU, a level's walls are the ones
under which CUDA still starts.

A wall that breaks the device turns every verdict into `crashed` (on an H100, every worker at `unshare` with
Landlock and seccomp ended "cudaGetDeviceCount(): Error 304", 2026-12-06). So where CUDA starts outside any
sandbox, each level is tried once with its walls, then without seccomp, then without Landlock, then without
both, running CUDA's start through the worker's own chain (the level's prefix, the uid, the walls); the level
keeps the first set that works and names each wall it lost. A level under which CUDA starts with none is not
this machine's level for a GPU (the next one is tried). Root without capabilities (the `process` level with a
private interpreter) keeps all its walls or nothing: they are what keeps root in.

The result is kept per boot, interpreter and walls code (`~/.cache/kernel-agent/device-fit.json`), since
every `eval` on a GPU would otherwise pay a CUDA start per level it tries.
"""

from __future__ import annotations

import dataclasses
import functools
import glob
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from kernel_agent.sandbox.host.isolation import (
    WALL_LAYERS,
    Isolation,
    package_dir,
    prepare_workdir,
    sandbox_env,
    walls_command,
    wrap,
)

CUDA_START = "import torch; torch.cuda.init(); torch.empty(1, device='cuda')"
START_TIMEOUT_S = 180


@functools.cache
def device_check() -> str | None:
    """The code a worker must be able to run here: CUDA's start, where this machine has a GPU and CUDA starts
    outside any sandbox; None otherwise (nothing to hold the walls to, or a broken driver that is not theirs)."""
    if not glob.glob("/dev/nvidia[0-9]*"):
        return None
    key = [_boot(), sys.executable, "outside any sandbox", CUDA_START]
    ok, _ = _remembered(key, lambda: _run([sys.executable, "-c", CUDA_START], os.environ.copy(), Path.cwd()))
    return CUDA_START if ok else None


def fit(isolation: Isolation, check: str | None) -> tuple[Isolation | None, str]:
    """`isolation` with the walls under which `check` runs (all it has when `check` is None), or None and why."""
    if check is None:
        return isolation, ""
    held = [layer for layer in isolation.layers if layer.startswith(WALL_LAYERS)]
    keep_all = isolation.level == "process" and isolation.uid == 0
    first = ""
    for dropped in [()] if keep_all else _drops(held):
        candidate = _without(isolation, dropped)
        ok, said = _cached(candidate, check)
        if ok:
            return candidate, ""
        first = first or said
    return None, f"the GPU does not start at this level here ({first})"


def _drops(held: list[str]) -> list[tuple[str, ...]]:
    seccomp = [layer for layer in held if layer == "seccomp"]
    landlock = [layer for layer in held if layer.startswith("landlock-abi")]
    options = [(), tuple(seccomp), tuple(landlock), (*landlock, *seccomp)]
    return list(dict.fromkeys(options))  # in order, once each (a layer not held adds nothing)


def _without(isolation: Isolation, dropped: tuple[str, ...]) -> Isolation:
    named = tuple(f"no-{layer.split('-')[0]} (the GPU does not start under it here)" for layer in dropped)
    return dataclasses.replace(isolation, layers=tuple(x for x in isolation.layers if x not in dropped) + named)


def _cached(isolation: Isolation, check: str) -> tuple[bool, str]:
    key = [_boot(), sys.executable, _walls_code(), isolation.level, isolation.uid, isolation.layers, check]
    return _remembered(key, lambda: runs(isolation, check))


def _remembered(parts: list, measure: Callable[[], tuple[bool, str]]) -> tuple[bool, str]:
    """`measure()`, kept in the user's cache under `parts` (this boot, this interpreter, ...): a process that
    starts a sandbox reads the answer instead of starting CUDA again."""
    key = json.dumps(parts)
    path = _cache_file()
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    if isinstance(known, dict) and isinstance(known.get(key), list) and len(known[key]) == 2:
        return bool(known[key][0]), str(known[key][1])
    found = measure()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**(known if isinstance(known, dict) else {}), key: list(found)}))
    except OSError:
        pass  # unkept: measured again next time
    return found


def runs(isolation: Isolation, check: str) -> tuple[bool, str]:
    """Whether `check` runs as a worker would at `isolation`: its prefix, its uid and its walls; and the last line
    it said when it did not."""
    with tempfile.TemporaryDirectory(prefix="ka-device-fit-") as tmp:
        work = Path(tmp)
        prepare_workdir(work, isolation.uid)
        command = [sys.executable, "-P", "-s", "-B", "-c", check]
        command = wrap(walls_command(command, isolation, work), isolation, work, gpu=True)
        return _run(command, sandbox_env({"PYTHONPATH": str(package_dir().parent)}, work), work)


def _run(command: list[str], env: dict[str, str], cwd: Path) -> tuple[bool, str]:
    try:
        done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=START_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        return False, str(exc)[:200]
    last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
    return done.returncode == 0, last[:200]


def _cache_file() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "kernel-agent" / "device-fit.json"


def _boot() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


@functools.cache
def _walls_code() -> str:
    """A digest of the code that builds the walls: a change to it is measured again, not read from the cache."""
    sandbox = package_dir() / "sandbox"
    parts = ("inside/walls.py", "inside/landlock.py", "inside/seccomp.py", "host/mounts.py", "host/isolation.py")
    return hashlib.sha256(b"".join((sandbox / part).read_bytes() for part in parts)).hexdigest()[:16]
