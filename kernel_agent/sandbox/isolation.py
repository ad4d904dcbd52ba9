"""Build the command line that isolates one untrusted process.

Layers, strongest available first, probed once and recorded in every verdict:
- `bwrap`: read-only system, private /tmp and /dev, writable work dir only,
  no network, own PID namespace, dies with its parent;
- `unshare`: own network and PID namespaces, full filesystem read-only by
  permissions only;
- `process`: a plain child in its own session (nothing but rlimits and uid).
When running as root the untrusted process drops to an unprivileged uid
(THREATS.md 0.5: RLIMIT_NPROC is not enforced for uid 0, and a same-uid child
can read its parent's memory).
"""

from __future__ import annotations

import functools
import glob
import os
import resource
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

SANDBOX_UID = 65534  # nobody
ENV_ALLOWLIST = ("PATH", "LANG", "LC_ALL", "TZ", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


@dataclass(frozen=True)
class Limits:
    """Resource limits for the untrusted process; none of them breaks CUDA (THREATS.md 0.6)."""

    cpu_seconds: int = 600
    file_bytes: int = 2 << 30
    processes: int = 256  # counts threads too; enforced only for a non-root uid
    data_bytes: int | None = 16 << 30  # RLIMIT_DATA, not RLIMIT_AS: CUDA reserves huge VA windows

    def apply(self) -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (self.cpu_seconds, self.cpu_seconds))
        resource.setrlimit(resource.RLIMIT_FSIZE, (self.file_bytes, self.file_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NPROC, (self.processes, self.processes))
        if self.data_bytes is not None:
            resource.setrlimit(resource.RLIMIT_DATA, (self.data_bytes, self.data_bytes))


@dataclass(frozen=True)
class Isolation:
    """The isolation layer in force and the uid the untrusted code runs as."""

    level: str  # "bwrap", "unshare" or "process"
    uid: int
    layers: tuple[str, ...] = field(default=())

    def describe(self) -> str:
        return f"{self.level} (uid {self.uid}; {', '.join(self.layers)})"


def _works(command: list[str]) -> bool:
    try:
        return subprocess.run(command, capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@functools.cache
def probe(preferred: str = "auto") -> Isolation:
    """Find the strongest layer that actually starts a process here."""
    root = os.geteuid() == 0
    uid = SANDBOX_UID if root else os.geteuid()
    order = ["bwrap", "unshare", "process"] if preferred == "auto" else [preferred]
    for level in order:
        if level == "bwrap" and shutil.which("bwrap"):
            if _works(bwrap_prefix(Path("/"), extra_ro=(), gpu=False) + ["/bin/true"]):
                return Isolation("bwrap", uid, ("minimal-root", "private-tmp", "no-net", "pid-ns", "env-allowlist", "rlimits", *(["setuid"] if root else [])))
        if level == "unshare" and shutil.which("unshare"):
            if _works(unshare_prefix() + ["/bin/true"]):
                return Isolation("unshare", uid, ("no-net", "pid-ns", "env-allowlist", "rlimits", *(["setuid"] if root else [])))
        if level == "process":
            return Isolation("process", uid, ("session", "env-allowlist", "rlimits", *(["setuid"] if root else [])))
    raise RuntimeError(f"isolation level {preferred!r} is not available on this machine")


SYSTEM_DIRS = ("/usr", "/etc", "/opt", "/sys", "/var/lib")  # read-only; everything else is absent
ROOT_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


def package_dir() -> Path:
    """This package's own folder (never the project around it: tests and examples hold references)."""
    return Path(__file__).resolve().parents[1]


def needed_read_paths(extra: tuple[Path, ...] = ()) -> list[Path]:
    """Everything the worker must read beyond the system: interpreter, site-packages, this package, extras."""
    candidates = [Path(sys.executable).resolve().parent.parent, Path(sys.prefix), Path(sys.base_prefix)]
    candidates += [Path(p) for p in sys.path if p and "-packages" in p and Path(p).exists()]
    candidates += [Path(p) for p in sys.path if p and Path(p).resolve().is_relative_to(Path(sys.base_prefix).resolve()) and Path(p).exists()]
    candidates += [package_dir(), *extra]
    binds: list[Path] = []
    for candidate in (c.resolve() for c in candidates):
        if any(candidate == Path(d) or Path(d) in candidate.parents for d in SYSTEM_DIRS):
            continue  # already visible read-only
        if not any(candidate == b or b in candidate.parents for b in binds):
            binds = [b for b in binds if candidate not in b.parents] + [candidate]
    return binds


def _parents(path: Path, made: set[Path]) -> list[str]:
    """Create a bind target's missing parents as 0755 (bwrap would make them 0700, out of the
    sandbox uid's reach), except inside the read-only system trees."""
    args: list[str] = []
    for parent in reversed(path.parents):
        if parent == Path("/") or parent in made or any(parent == Path(d) or Path(d) in parent.parents for d in SYSTEM_DIRS):
            continue
        args += ["--perms", "0755", "--dir", str(parent)]
        made.add(parent)
    return args


def bwrap_prefix(workdir: Path, extra_ro: tuple[Path, ...], gpu: bool, masked: tuple[Path, ...] = ()) -> list[str]:
    """A minimal root: the system trees read-only, the interpreter and this package, the extras,
    and the work dir. Project folders, home folders and every other copy of a problem (and
    its reference) on this machine are simply not there. `masked` paths are hidden even
    when an extra would expose them."""
    cmd = ["bwrap", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for directory in SYSTEM_DIRS:
        if Path(directory).is_dir():
            cmd += ["--ro-bind", directory, directory]
    for link in ROOT_LINKS:
        if os.path.islink(link):
            cmd += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            cmd += ["--ro-bind", link, link]
    made: set[Path] = {Path("/tmp")}
    for path in needed_read_paths(extra_ro):
        cmd += _parents(path, made) + ["--ro-bind", str(path), str(path)]
        made.add(path)
    for path in masked:
        path = path.resolve()
        if path.exists() and any(path == b or b in path.parents for b in needed_read_paths(extra_ro)) and path != workdir:
            cmd += ["--tmpfs", str(path)] if path.is_dir() else ["--ro-bind", "/dev/null", str(path)]
    if workdir != Path("/"):
        cmd += _parents(workdir, made) + ["--bind", str(workdir), str(workdir)]
    if gpu:
        for node in sorted(glob.glob("/dev/nvidia*")):
            cmd += ["--dev-bind", node, node]
    cmd += ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session"]
    if os.geteuid() != 0:
        cmd += ["--unshare-user"]
    cmd += ["--chdir", str(workdir)]
    return cmd


def unshare_prefix() -> list[str]:
    return ["unshare", "--net", "--pid", "--fork", "--kill-child", "--mount-proc"]


def drop_privileges_prefix() -> list[str]:
    """Switch to the unprivileged uid inside the isolation layer (only when root)."""
    if os.geteuid() != 0:
        return []
    return ["setpriv", f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]


def wrap(command: list[str], isolation: Isolation, workdir: Path, extra_ro: tuple[Path, ...] = (), gpu: bool = False, masked: tuple[Path, ...] = ()) -> list[str]:
    """The full argv that runs `command` under `isolation`."""
    if isolation.level == "bwrap":
        prefix = bwrap_prefix(workdir, extra_ro, gpu, masked)
    elif isolation.level == "unshare":
        prefix = unshare_prefix()
    else:
        prefix = []
    return prefix + drop_privileges_prefix() + command


# glibc's malloc moves its mmap threshold as a process frees memory, so two processes running
# the same kernel can differ by 2x: one pays page faults on every large temporary, the other
# reuses heap memory (measured here: 3.49 ms against 1.62 ms per call). Pinning the thresholds
# makes both sides of an A/B comparison allocate alike (1.63 ms against 1.64 ms), and makes
# freed memory reusable, so the NaN poisoning before check calls reaches outputs on CPU too.
PINNED_MALLOC = {
    "MALLOC_MMAP_THRESHOLD_": str(1 << 32),
    "MALLOC_TRIM_THRESHOLD_": str(1 << 32),
    "MALLOC_TOP_PAD_": str(1 << 28),
}


def sandbox_env(extra: dict[str, str], workdir: Path) -> dict[str, str]:
    """An allowlisted environment: nothing secret crosses (API keys, database URLs)."""
    env = {key: os.environ[key] for key in ENV_ALLOWLIST if key in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update(
        {
            "HOME": str(workdir / "home"),
            "TMPDIR": str(workdir / "tmp"),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1",
            "KERNEL_AGENT_IN_SANDBOX": "1",
            **PINNED_MALLOC,
        }
    )
    env.update(extra)
    return env


# Folders inside a work dir that the sandbox uid may write. Everything else in the work
# dir (inputs, configs, logs) belongs to the trusted side, so a candidate cannot plant
# symlinks, FIFOs or shadow modules where the trusted side later writes or reads as root.
SANDBOX_WRITABLE = ("tmp", "home", "out")


def prepare_workdir(workdir: Path, uid: int, writable: tuple[str, ...] = ()) -> None:
    """Create the work dir owned by the trusted side, with only SANDBOX_WRITABLE writable by `uid`."""
    workdir.mkdir(parents=True, exist_ok=True)
    if workdir.is_symlink() or not workdir.is_dir():
        raise RuntimeError(f"work dir {workdir} is not a plain directory")
    os.chmod(workdir, 0o755)
    for name in (*SANDBOX_WRITABLE, *writable):
        sandbox_writable_dir(workdir / name, uid)


def sandbox_writable_dir(path: Path, uid: int) -> None:
    """A folder inside the work dir that the sandbox uid may write into (never through a symlink)."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink()
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0 and uid != 0:
        os.chown(path, uid, uid, follow_symlinks=False)


def write_trusted(path: Path, data: bytes, owner: int | None = None) -> None:
    """Create `path` afresh as the trusted side: never through a planted symlink or FIFO."""
    if path.is_symlink() or path.exists():
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        if owner is not None and os.geteuid() == 0 and owner != 0:
            os.fchown(fd, owner, owner)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


class UntrustedFileError(OSError):
    """A file the sandbox handed over is not a plain, size-capped regular file."""


def read_untrusted(path: Path, max_bytes: int) -> bytes:
    """Read a file the sandbox wrote: no symlinks, no FIFOs or devices, at most `max_bytes`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise UntrustedFileError(f"cannot open {path.name}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UntrustedFileError(f"{path.name} is not a regular file")
        if info.st_size > max_bytes:
            raise UntrustedFileError(f"{path.name} is {info.st_size} bytes, over the {max_bytes}-byte limit")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise UntrustedFileError(f"{path.name} grew past the {max_bytes}-byte limit")
        return b"".join(chunks)
    finally:
        os.close(fd)
