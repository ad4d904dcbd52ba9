"""The `unshare` level's file system: the minimal root bubblewrap gives, built inside the sandbox's own mount
namespace, then the sandboxed command.

Run as root (real root, or root of the sandbox's user namespace) right after `unshare`, before privileges drop:
`python -I -S mounts.py --work DIR [--read PATH]... [--mask PATH]... [--gpu] [--become UID GID] -- COMMAND...`.
A tmpfs becomes the new root holding the system trees, the interpreter, site-packages, this package and the
extras, each read-only (recursively) at its own path, the work dir as the only writable bind, a minimal /dev, the
PID namespace's own /proc, and private /tmp, /var/tmp and /dev/shm; then `pivot_root` drops the host's tree. Home
folders, projects, the problem's folder and the host's temp folders are simply not there. The parents it creates
are 0755, so a venv below a private folder (a container's 0700 /root) is reachable by the sandbox uid. As a user,
`--become` then maps it back to its own uid in a nested user namespace. Everything vanishes with the namespace.

Standard library only, run by path: it must not import the package it is mounting.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import os
import shutil
import sys
from pathlib import Path

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
MNT_DETACH, AT_FDCWD, AT_RECURSIVE, CLONE_NEWUSER = 2, -100, 0x8000, 0x10000000
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV = 1, 2, 4
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
SYS_MOUNT_SETATTR = 442
SYSTEM_DIRS = ("/usr", "/etc", "/opt", "/sys", "/var/lib")  # the same trees bwrap binds (isolation.py)
ROOT_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
NEW_ROOT = Path("/tmp")  # a tmpfs mounted here becomes the root; the host's /tmp is never seen again

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.syscall.restype = ctypes.c_long


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def _fail(what: str) -> None:
    errno = ctypes.get_errno()
    raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(source: str | None, target: Path | str, fstype: str | None, flags: int, data: str | None = None) -> None:
    encoded = [None if s is None else str(s).encode() for s in (source, target, fstype, data)]
    if _libc.mount(encoded[0], encoded[1], encoded[2], flags, encoded[3]) != 0:
        _fail(f"mount {source} on {target}")


def _read_only(target: Path) -> None:
    """Read-only, nosuid and nodev, every mount below included (only sets flags: locked ones stay)."""
    attr = _MountAttr(MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0, 0, 0)
    done = _libc.syscall(
        SYS_MOUNT_SETATTR, AT_FDCWD, str(target).encode(), AT_RECURSIVE, ctypes.byref(attr), ctypes.sizeof(attr)
    )
    if done != 0:
        _mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID)  # kernels before 5.12: this one


def _inside(path: Path | str) -> Path:
    return NEW_ROOT / str(path).lstrip("/")


def _target(path: Path, directory: bool) -> Path:
    """Create the mount point for `path` in the new root, its missing parents 0755."""
    target = _inside(path)
    for parent in reversed(target.parents):
        if NEW_ROOT in parent.parents and not parent.exists():
            parent.mkdir(mode=0o755)
            os.chmod(parent, 0o755)
    if directory:
        target.mkdir(mode=0o755, exist_ok=True)
    elif not target.exists():
        target.touch(mode=0o644)
    return target


def _bind(handle: int, path: Path, writable: bool = False) -> None:
    directory = os.path.isdir(f"/proc/self/fd/{handle}")
    target = _target(path, directory)
    _mount(f"/proc/self/fd/{handle}", target, None, MS_BIND | MS_REC)
    if not writable:
        _read_only(target)


def build(work: Path, read: list[Path], masked: list[Path], gpu: bool) -> None:
    """The new root; the caller pivots into it."""
    try:
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
    except OSError:
        pass  # unshare made it private already; in a user namespace this call may be refused
    sources = [Path(d) for d in SYSTEM_DIRS if os.path.isdir(d)]
    sources += [Path(d) for d in ROOT_LINKS if os.path.isdir(d) and not os.path.islink(d)]
    inside_work = [path for path in read if work in path.parents]
    sources += [path for path in read if path not in inside_work]
    # Handles first: the new root's tmpfs hides the host's /tmp, where the work dir often is.
    handles = {path: os.open(path, os.O_PATH | os.O_CLOEXEC) for path in sources if path.exists()}
    work_handle = os.open(work, os.O_PATH | os.O_CLOEXEC)
    inside_handles = {path: os.open(path, os.O_PATH | os.O_CLOEXEC) for path in inside_work if path.is_dir()}
    proc = os.open("/proc", os.O_PATH | os.O_CLOEXEC)
    devices = [f"/dev/{name}" for name in DEVICES] + (sorted(glob.glob("/dev/nvidia*")) if gpu else [])
    device_handles = {d: os.open(d, os.O_PATH | os.O_CLOEXEC) for d in devices if os.path.exists(d)}
    links = {link: os.readlink(link) for link in ROOT_LINKS if os.path.islink(link)}
    _mount("tmpfs", NEW_ROOT, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    dev = _target(Path("/dev"), True)
    _mount("tmpfs", dev, "tmpfs", MS_NOSUID, "mode=0755,size=1m")
    for device, handle in device_handles.items():
        _bind(handle, Path(device), writable=True)
    for name, points_to in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1")):
        (dev / name).symlink_to(points_to)
    (dev / "stderr").symlink_to("/proc/self/fd/2")
    for scratch in (Path("/dev/shm"), Path("/tmp"), Path("/var/tmp")):
        _mount("tmpfs", _target(scratch, True), "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m")
    # The read-only trees after the private temp folders: a venv or build below the host's /tmp (CI's, a user's
    # mktemp) is bound onto the private /tmp, not hidden under it.
    for path, handle in handles.items():
        _bind(handle, path)
    for link, points_to in links.items():
        _inside(link).symlink_to(points_to)
    _mount(f"/proc/self/fd/{proc}", _target(Path("/proc"), True), None, MS_BIND | MS_REC)
    for path in masked:
        target = _inside(path)
        if path == work or path in work.parents or work == Path("/"):
            continue
        if target.is_dir():
            _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "mode=0755,size=4k")
        elif target.exists():
            _mount("/dev/null", target, None, MS_BIND)
    if work != Path("/"):  # "/" (the level's probe, the doctor): nothing of the host is writable
        _bind(work_handle, work, writable=True)  # after the masks: bwrap's order, a mask above it hides nothing
    for path, handle in inside_handles.items():  # the evaluation's own build, read-only over the writable work dir
        _bind(handle, path)
    for handle in (*handles.values(), *inside_handles.values(), *device_handles.values(), work_handle, proc):
        os.close(handle)
    _mount(None, dev, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID)
    _mount(None, NEW_ROOT, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def pivot(work: Path) -> None:
    """Make the new root the root and drop the host's tree (pivot_root with both arguments ".")."""
    os.chdir(NEW_ROOT)
    number = SYS_PIVOT_ROOT[os.uname().machine]
    if _libc.syscall(number, b".", b".") != 0:
        _fail("pivot_root")
    if _libc.umount2(b".", MNT_DETACH) != 0:
        _fail("umount the host's root")
    os.chdir(work)


def reachable_path(path: str) -> str:
    """The PATH folders the new root holds, then the system's: a folder outside it (a farm of links that hides
    bwrap, ~/bin) would leave the compiler unfound."""
    kept = [folder for folder in path.split(os.pathsep) if folder and os.path.isdir(folder)]
    return os.pathsep.join(dict.fromkeys([*kept, "/usr/local/bin", "/usr/bin", "/bin"]))


def become(uid: int, gid: int) -> None:
    """In a user namespace, after the mounts: a nested user namespace where this process is `uid` again (mapped
    onto the outer namespace's root, which is that uid on the host), so the command runs with no capability."""
    if _libc.unshare(CLONE_NEWUSER) != 0:
        _fail("unshare a user namespace")
    Path("/proc/self/uid_map").write_text(f"{uid} 0 1\n")
    Path("/proc/self/setgroups").write_text("deny\n")
    Path("/proc/self/gid_map").write_text(f"{gid} 0 1\n")


def main(argv: list[str]) -> None:
    split = argv.index("--")
    parser = argparse.ArgumentParser(prog="mounts.py")
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--read", type=Path, action="append", default=[])
    parser.add_argument("--mask", type=Path, action="append", default=[])
    parser.add_argument("--gpu", action="store_true")
    parser.add_argument("--become", type=int, nargs=2, metavar=("UID", "GID"))
    args = parser.parse_args(argv[:split])
    command = argv[split + 1 :]
    # Found on the host's PATH, which may name folders the new root does not hold (a PATH without bwrap).
    command[0] = os.path.realpath(shutil.which(command[0]) or command[0])
    try:
        build(args.work, args.read, args.mask, args.gpu)
        pivot(args.work)
        if args.become:
            become(*args.become)
    except OSError as exc:  # never run the command without its walls
        print(f"error: the sandbox's file system could not be built: {exc}", file=sys.stderr, flush=True)
        os._exit(70)
    os.execve(command[0], command, {**os.environ, "PATH": reachable_path(os.environ.get("PATH", ""))})


if __name__ == "__main__":
    main(sys.argv[1:])
