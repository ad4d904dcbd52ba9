"""Build the command line that isolates one untrusted process.

Layers, strongest available first, probed once and recorded in every verdict:
- `bwrap`: read-only system, private /tmp and /dev, writable work dir only,
  no network, own PID namespace, dies with its parent; the scratch folders
  (HOME, TMPDIR, caches) are one size-limited tmpfs, so total disk use is bounded;
- `unshare`: own network, PID and mount namespaces, and in the mount namespace the
  same minimal root as bwrap's (`mounts.py`); as a user, inside a user namespace;
- `process`: a plain child in its own session (rlimits and uid).
At every level the worker then raises Landlock and seccomp around itself
(`sandbox/inside/walls.py`) before any candidate code runs.
When running as root the untrusted process drops to an unprivileged uid
(THREATS.md 0.5: RLIMIT_NPROC is not enforced for uid 0, and a same-uid child
can read its parent's memory).

Per-file limits (RLIMIT_FSIZE) do not bound the sum of many files, so the total
is bounded twice: by the scratch tmpfs (bwrap) and by `disk_overuse`, which the
trusted side runs on the host's view of the work dir (every level; the only bound
for `unshare` and `process`, and for `out/`, which stays on the host).
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import glob
import os
import resource
import shutil
import stat
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

SANDBOX_UID = 65534  # nobody
DEFAULT_DISK_BYTES = 1 << 30  # scratch tmpfs size and the work dir's disk quota
DEFAULT_MAX_FILES = 100_000  # a flood of empty files costs inodes and slows every scan
MB = 1 << 20
ENV_ALLOWLIST = (
    "PATH",
    "LANG",
    "LC_ALL",
    "TZ",
    "CUDA_VISIBLE_DEVICES",
    "LD_LIBRARY_PATH",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
)


@dataclass(frozen=True)
class Limits:
    """Resource limits for the untrusted process; none of them breaks CUDA (THREATS.md 0.6)."""

    cpu_seconds: int = 600
    file_bytes: int = 2 << 30
    processes: int = 256  # counts threads too; enforced only for a non-root uid
    data_bytes: int | None = 16 << 30  # RLIMIT_DATA, not RLIMIT_AS: CUDA reserves huge VA windows
    disk_bytes: int = DEFAULT_DISK_BYTES  # not an rlimit: the scratch tmpfs size and disk_overuse's quota

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
    disk_bytes: int = DEFAULT_DISK_BYTES

    @property
    def scratch_tmpfs(self) -> bool:
        """Whether HOME, TMPDIR and the caches are a size-limited tmpfs inside the sandbox."""
        return self.level == "bwrap" and "scratch-tmpfs" in self.layers

    def with_limits(self, limits: Limits) -> Isolation:
        """The same layer with the evaluation's disk quota (shown by describe() and used by wrap())."""
        return dataclasses.replace(self, disk_bytes=limits.disk_bytes)

    def describe(self) -> str:
        """One line for the verdict; it names the disk quota, so a candidate whose writes failed with
        ENOSPC ("No space left on device") can be read against it."""
        quota = f"disk quota {self.disk_bytes // MB} MB"
        if self.scratch_tmpfs:
            quota += (
                f" (HOME, TMPDIR and caches are a {self.disk_bytes // MB} MB tmpfs: "
                "writes past it fail with No space left on device)"
            )
        else:
            quota += " (checked on the work dir from outside)"
        return f"{self.level} (uid {self.uid}; {', '.join(self.layers)}; {quota})"


SYSTEM_DIRS = ("/usr", "/etc", "/opt", "/sys", "/var/lib")  # read-only; everything else is absent
ROOT_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


def package_dir() -> Path:
    """This package's own folder (never the project around it: tests and examples hold references)."""
    import kernel_agent

    return Path(kernel_agent.__file__).resolve().parent


def needed_read_paths(extra: tuple[Path, ...] = ()) -> list[Path]:
    """Everything the worker must read beyond the system: interpreter, site-packages, this package, extras."""
    candidates = [Path(sys.executable).resolve().parent.parent, Path(sys.prefix), Path(sys.base_prefix)]
    candidates += [Path(p) for p in sys.path if p and "-packages" in p and Path(p).exists()]
    candidates += [
        Path(p)
        for p in sys.path
        if p and Path(p).resolve().is_relative_to(Path(sys.base_prefix).resolve()) and Path(p).exists()
    ]
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
        if (
            parent == Path("/")
            or parent in made
            or any(parent == Path(d) or Path(d) in parent.parents for d in SYSTEM_DIRS)
        ):
            continue
        args += ["--perms", "0755", "--dir", str(parent)]
        made.add(parent)
    return args


def bwrap_prefix(
    workdir: Path,
    extra_ro: tuple[Path, ...],
    gpu: bool,
    masked: tuple[Path, ...] = (),
    scratch_bytes: int | None = None,
) -> list[str]:
    """A minimal root: the system trees read-only, the interpreter and this package, the extras,
    and the work dir. Project folders, home folders and every other copy of a problem (and
    its reference) on this machine are simply not there. `masked` paths are hidden even
    when an extra would expose them. With `scratch_bytes`, the work dir's scratch folder is a
    tmpfs of that size (its host folder stays empty). Extras inside the work dir (the
    evaluation's own build folder) are bound read-only over the writable work dir, so even a
    same-uid sandbox cannot swap its library."""
    root = workdir.resolve()
    inside = tuple(
        p for p in extra_ro if root != Path("/") and p.is_absolute() and p.resolve() == p and root in p.parents
    )
    extra_ro = tuple(p for p in extra_ro if p not in inside)
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
        if (
            path.exists()
            and any(path == b or b in path.parents for b in needed_read_paths(extra_ro))
            and path != workdir
        ):
            cmd += ["--tmpfs", str(path)] if path.is_dir() else ["--ro-bind", "/dev/null", str(path)]
    if workdir != Path("/"):
        cmd += _parents(workdir, made) + ["--bind", str(workdir), str(workdir)]
        if scratch_bytes:
            cmd += scratch_tmpfs_args(workdir, scratch_bytes)
        for path in inside:
            if path.is_dir():
                cmd += ["--ro-bind", str(path), str(path)]
    if gpu:
        for node in sorted(glob.glob("/dev/nvidia*")):
            cmd += ["--dev-bind", node, node]
    cmd += ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session"]
    if os.geteuid() != 0:
        cmd += ["--unshare-user"]
    cmd += ["--chdir", str(workdir)]
    return cmd


def unshare_prefix() -> list[str]:
    """New network, PID and mount namespaces; as a user, inside a user namespace where it is root for the mounts
    only (`mounts.py --become` then maps it back to its own uid, with no capability)."""
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    return ["unshare", *user, "--net", "--pid", "--fork", "--kill-child", "--mount-proc"]


def mounts_prefix(workdir: Path, extra_ro: tuple[Path, ...], masked: tuple[Path, ...], gpu: bool) -> list[str]:
    """At the `unshare` level: the trusted step, inside the sandbox's own mount namespace and before privileges
    drop, that builds bwrap's minimal root there (`mounts.py`): the system, the interpreter, this package and
    the extras read-only, the work dir the only writable place, private /tmp, /var/tmp and /dev/shm."""
    args = [sys.executable, "-I", "-S", str(Path(__file__).with_name("mounts.py")), "--work", str(workdir.resolve())]
    for path in needed_read_paths(extra_ro):
        args += ["--read", str(path)]
    for path in masked:
        args += ["--mask", str(path.resolve())]
    become = [] if os.geteuid() == 0 else ["--become", str(os.geteuid()), str(os.getegid())]
    return args + (["--gpu"] if gpu else []) + become + ["--"]


WALL_LAYERS = ("landlock-abi", "seccomp")  # the layers the sandboxed process raises itself (inside/walls.py)


def walls_command(
    command: list[str], isolation: Isolation, workdir: Path, extra_ro: tuple[Path, ...] = ()
) -> list[str]:
    """`command` started inside the walls the level names (Landlock, seccomp), for a process that is not the worker
    (the C++ compiler: a candidate's `#include` must not read what the sandbox uid cannot). Needs PYTHONPATH."""
    layers = [layer for layer in isolation.layers if layer.startswith(WALL_LAYERS)]
    if not layers:
        return command
    args = [sys.executable, "-P", "-s", "-B", "-m", "kernel_agent.sandbox.inside.walls", "--work", str(workdir)]
    for path in needed_read_paths(extra_ro):
        args += ["--read", str(path)]
    for layer in layers:
        args += ["--layer", layer]
    return [*args, "--", *command]


def drop_privileges_prefix(uid: int = SANDBOX_UID) -> list[str]:
    """Switch to the unprivileged uid inside the isolation layer (only when root). For uid 0 (the `process` level
    where uid 65534 cannot reach the interpreter) only the capabilities go: Landlock and seccomp keep it in."""
    if os.geteuid() != 0:
        return []
    ids = [] if uid == 0 else [f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    return ["setpriv", *ids, "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--no-new-privs"]


def scratch_tmpfs_args(workdir: Path, size: int) -> list[str]:
    """bwrap arguments that make `workdir/scratch` one tmpfs of `size` bytes holding HOME, TMPDIR
    and the caches. One mount, so the bound is on their sum; it vanishes with the sandbox's mount
    namespace, so nothing written there outlives the process. World-writable because bwrap
    creates it as root and only this sandbox's processes can see it."""
    scratch = workdir / SCRATCH
    args = ["--perms", "01777", "--size", str(int(size)), "--tmpfs", str(scratch)]
    for name in SCRATCH_DIRS:
        args += ["--perms", "01777" if name == "tmp" else "0777", "--dir", str(scratch / name)]
    return args


def wrap(
    command: list[str],
    isolation: Isolation,
    workdir: Path,
    extra_ro: tuple[Path, ...] = (),
    gpu: bool = False,
    masked: tuple[Path, ...] = (),
    disk_bytes: int | None = None,
) -> list[str]:
    """The full argv that runs `command` under `isolation`. `disk_bytes` (default: the isolation's
    quota, i.e. Limits.disk_bytes when the caller used Isolation.with_limits) sizes the scratch tmpfs."""
    if isolation.level == "bwrap":
        scratch = (disk_bytes or isolation.disk_bytes) if isolation.scratch_tmpfs else None
        prefix = bwrap_prefix(workdir, extra_ro, gpu, masked, scratch_bytes=scratch)
    elif isolation.level == "unshare":
        prefix = unshare_prefix() + mounts_prefix(workdir, extra_ro, masked, gpu)
    else:
        prefix = []
    return prefix + drop_privileges_prefix(isolation.uid) + command


# glibc's malloc moves its mmap threshold as a process frees memory, so two processes running
# the same kernel can differ by 2x: one pays page faults on every large temporary, the other
# reuses heap memory (measured here: 3.49 ms against 1.62 ms per call). Pinning the thresholds
# makes both sides of an A/B comparison allocate alike (1.63 ms against 1.64 ms), and makes
# freed memory reusable, so the NaN poisoning before check calls reaches outputs on CPU too.
PINNED_MALLOC = {
    # Huge pages for the heap: asked for by the worker itself once torch is imported (worker.advise_huge_heap).
    "MALLOC_MMAP_THRESHOLD_": str(1 << 32),
    "MALLOC_TRIM_THRESHOLD_": str(1 << 32),
    "MALLOC_TOP_PAD_": str(1 << 28),
}


def sandbox_env(extra: dict[str, str], workdir: Path) -> dict[str, str]:
    """An allowlisted environment: nothing secret crosses (API keys, database URLs)."""
    env = {key: os.environ[key] for key in ENV_ALLOWLIST if key in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    scratch = workdir / SCRATCH
    env.update(
        {
            # Everything a library writes by default (HOME, TMPDIR, ~/.cache: Triton, torch
            # extensions) lands in the scratch folder, which the disk quota bounds.
            "HOME": str(scratch / "home"),
            "TMPDIR": str(scratch / "tmp"),
            "XDG_CACHE_HOME": str(scratch / "cache"),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1",
            **PINNED_MALLOC,
        }
    )
    env.update(extra)
    return env


def traversable(path: Path) -> bool:
    """Whether any uid may pass through `path` and every folder above it (o+x all the way up)."""
    try:
        return all(os.stat(p).st_mode & stat.S_IXOTH for p in (path, *path.parents))
    except OSError:
        return False


def reachable_root(root: Path, isolation: Isolation) -> Path:
    """Where this evaluation's work dirs go: `root`, unless the sandbox runs as another uid without bwrap's
    binds and cannot pass a folder above it (a 0700 home, a mkdtemp folder, umask 077); then a private
    folder in the system temp dir that it can pass through but not list."""
    root = root.resolve()
    if isolation.level == "bwrap" or isolation.uid == os.geteuid():
        return root
    root.mkdir(parents=True, exist_ok=True)
    return root if traversable(root) else _passable_root()


@functools.cache
def _passable_root() -> Path:
    for base in dict.fromkeys((Path(tempfile.gettempdir()), Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))):
        if base.is_dir() and traversable(base.resolve()):
            path = Path(tempfile.mkdtemp(prefix=f"kernel-agent-{os.geteuid()}-", dir=base.resolve()))
            os.chmod(path, 0o711)  # pass through, no listing: work dir names stay unguessable
            atexit.register(shutil.rmtree, path, True)
            return path
    raise RuntimeError(
        "no folder here lets the sandbox uid reach its work dir (every temp folder is private): "
        "give --sandbox a folder whose parents are all o+x, or install bubblewrap"
    )


# Folders inside a work dir that the sandbox uid may write. Everything else in the work
# dir (inputs, configs, logs) belongs to the trusted side, so a candidate cannot plant
# symlinks, FIFOs or shadow modules where the trusted side later writes or reads as root.
# With bwrap's scratch tmpfs the host's scratch folders stay empty; `out` is on the host.
SCRATCH = "scratch"
SCRATCH_DIRS = ("home", "tmp", "cache")
SANDBOX_WRITABLE = (SCRATCH, *(f"{SCRATCH}/{name}" for name in SCRATCH_DIRS))


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


def _sandbox_uid() -> int:
    return SANDBOX_UID if os.geteuid() == 0 else os.geteuid()


def disk_use(workdir: Path, uid: int | None = None, max_files: int = DEFAULT_MAX_FILES) -> tuple[int, int]:
    """Bytes allocated and entries counted for what the sandbox uid can write in the work dir.

    Counted: everything below the SANDBOX_WRITABLE folders, and, when the sandbox runs as another
    uid than this process, every entry it owns anywhere in the work dir (its log, folders it made).
    Allocated blocks, not apparent sizes (a sparse file costs only what was filled); hard links
    once; symlinks never followed. Stops counting after `max_files` entries.
    """
    uid = _sandbox_uid() if uid is None else uid
    separate = uid != os.geteuid()
    roots = {str(workdir / name) for name in SANDBOX_WRITABLE}
    seen: set[tuple[int, int]] = set()
    total = files = 0
    stack = [(str(workdir), False)]
    while stack and files <= max_files:
        folder, counted = stack.pop()
        try:
            entries = os.scandir(folder)
        except OSError:
            continue  # vanished, or not a folder any more
        with entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                mine = counted or entry.path in roots or (separate and info.st_uid == uid)
                if stat.S_ISDIR(info.st_mode):
                    stack.append((entry.path, mine))
                if not mine or (info.st_dev, info.st_ino) in seen:
                    continue
                seen.add((info.st_dev, info.st_ino))
                total += info.st_blocks * 512
                files += 1
    return total, files


def disk_overuse(workdir: Path, limit: int, uid: int | None = None, max_files: int = DEFAULT_MAX_FILES) -> str | None:
    """A one-line reason when the sandbox's writes in the work dir pass `limit` bytes (or
    `max_files` entries), else None. Cheap enough to run at every request and from a watchdog."""
    used, files = disk_use(workdir, uid, max_files)
    if used > limit:
        return f"disk quota of {limit // MB} MB exceeded: {used / MB:.0f} MB written"
    if files > max_files:
        return f"disk quota of {max_files} files exceeded: more than {max_files} files written"
    return None


def write_trusted(path: Path, data: bytes, owner: int | None = None) -> None:
    """Create `path` afresh as the trusted side: never through a planted symlink or FIFO."""
    if path.is_symlink() or path.exists():
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        os.fchmod(fd, 0o644)  # readable by the sandbox uid under any umask (077 on workstations)
        if owner is not None and os.geteuid() == 0 and owner != 0:
            os.fchown(fd, owner, owner)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
