"""The walls the worker raises around itself before any candidate code runs, at every isolation level.

Landlock (`landlock.py`) keeps it to reading the system, the interpreter, this package and the evaluation's
extras, and writing its work dir only; seccomp (`seccomp.py`) refuses the calls no kernel needs. Both are
unprivileged kernel features, so they hold at the `process` level, where the isolation layer itself is only
a uid. The trusted side probes what this kernel offers (`probe`, run once in a child) and names it in the
level line; a worker that then cannot raise the same walls refuses to serve instead of running without them.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from kernel_agent.sandbox.inside import landlock, seccomp

# The system trees every level shows (bwrap binds the same), read and executed, never written.
SYSTEM = ("/usr", "/etc", "/opt", "/sys", "/var/lib", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# What libraries read in /proc beyond the process's own folder; other processes' folders stay out.
PROC = ("cpuinfo", "meminfo", "stat", "loadavg", "uptime", "version", "filesystems", "sys", "driver")
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")


@dataclass(frozen=True)
class Raised:
    """The walls in force: the Landlock ABI (0: none) and whether the seccomp filter is installed."""

    landlock: int
    seccomp: bool

    def describe(self) -> str:
        parts = [f"landlock-abi{self.landlock}" if self.landlock else "no-landlock"]
        parts.append("seccomp" if self.seccomp else "no-seccomp")
        return ", ".join(parts)


def rules(workdir: Path, readable: list[str]) -> landlock.Rules:
    """What the worker keeps: the system, `readable` (interpreter, site-packages, package, extras), its own
    /proc folder, the harmless devices and the GPU's, and its work dir to write."""
    proc = [Path(f"/proc/{os.getpid()}"), *(Path("/proc", name) for name in PROC)]
    devices = [Path(d) for d in (*DEVICES, *sorted(glob.glob("/dev/nvidia*")), *sorted(glob.glob("/dev/dri/*")))]
    system = [Path(p) for p in SYSTEM]
    if os.geteuid() == 0:  # root without capabilities still owns root's files: only what every user may read
        system = [p for p in system if str(p) not in ("/etc", "/var/lib")] + _world_readable(Path("/etc"))
    read = (*system, *(Path(p) for p in readable), *proc)
    return landlock.Rules(read=read, read_write_files=tuple(devices), write=(workdir,))


def _world_readable(top: Path) -> list[Path]:
    """The files below `top` any uid may read (o+r, through o+x folders): what uid 65534 would see there."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if _mode(Path(folder, d)) & 0o005 == 0o005]
        found += [Path(folder, f) for f in files if _mode(Path(folder, f)) & 0o004]
    return found


def _mode(path: Path) -> int:
    try:
        return path.stat().st_mode
    except OSError:
        return 0


def raise_walls(workdir: Path, readable: list[str], layers: tuple[str, ...] = ("landlock", "seccomp")) -> Raised:
    """Confine this process (one thread, no candidate imported yet) with the walls `layers` names (the level's
    layers: "landlock-abiN", "seccomp"); raises OSError when the kernel refuses one."""
    threads = _threads()
    if threads != 1:
        raise OSError(f"walls: {threads} threads before the candidate (Landlock confines only the calling one)")
    version = 0
    if any(layer.startswith("landlock") for layer in layers):
        version = landlock.restrict(rules(workdir, readable))
        if not version:
            raise OSError("walls: this kernel has no Landlock, which the level announced")
    installed = "seccomp" in layers and seccomp.install()
    return Raised(version, installed)


def raise_or_exit(config: dict) -> Raised:
    """The worker's one call, right before it serves: the walls the trusted side announced, or no worker."""
    try:
        return raise_walls(Path(config["workdir"]), list(config.get("readable", ())), tuple(config.get("walls", ())))
    except OSError as exc:
        print(f"error: the sandbox's walls could not be raised: {exc}", file=sys.stderr, flush=True)
        os._exit(70)


def _threads() -> int:
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return 1
    return next((int(line.split()[1]) for line in status.splitlines() if line.startswith("Threads:")), 1)


def probe() -> str:
    """Raise the walls in this (throwaway) process and say what held, one line: run by the trusted side once."""
    try:
        raised = raise_walls(Path.cwd(), [])
    except OSError as exc:
        return f"refused: {exc}"
    return raised.describe()


def main(argv: list[str]) -> None:
    """No arguments: the probe. `--work DIR [--read PATH]... [--layer NAME]... -- COMMAND...`: raise the walls,
    then run COMMAND inside them (the C++ compiler, which reads a candidate's source)."""
    if not argv:
        print(probe(), flush=True)
        return
    split = argv.index("--")
    parser = argparse.ArgumentParser(prog="walls")
    parser.add_argument("--work", required=True)
    parser.add_argument("--read", action="append", default=[])
    parser.add_argument("--layer", action="append", default=[])
    args = parser.parse_args(argv[:split])
    raise_or_exit({"workdir": args.work, "readable": args.read, "walls": args.layer})
    os.execvp(argv[split + 1], argv[split + 1 :])


if __name__ == "__main__":
    main(sys.argv[1:])
