"""The trusted build store: content-addressed libraries, private to the trusted side, bounded.

Why each rule (THREATS.md rows C1-C3):
- A store the sandbox can read lets a candidate load a library that another candidate's build
  left there, and the verdict is then for code that is not in the submission. So the store is
  mode 0700 and never bound into a sandbox; `place` puts an evaluation's own library, alone, in a
  folder of its work dir.
- One source can make a multi-gigabyte library. A library over the per-library cap is never
  stored, and `evict` keeps the total under a quota by removing the least recently used
  libraries (`lookup` touches what it finds, so mtime is the last use).
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time
import uuid
from pathlib import Path

DEFAULT_QUOTA_BYTES = 2 << 30
DEFAULT_LIBRARY_BYTES = 256 << 20
QUOTA_ENV = "KERNEL_AGENT_BUILD_STORE_QUOTA"  # e.g. "2G", "512M" or a byte count
STALE_STAGING_S = 3600.0  # a half-written copy older than this was abandoned by a dead process
VIEW = "build"  # the evaluation's own build folder, inside its work dir
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


class LibraryTooLarge(ValueError):
    """A built library over the per-library cap: it is never stored."""


def parse_bytes(text: str) -> int:
    """`2G`, `512M`, `1048576` -> bytes."""
    match = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)i?B?\s*", text, re.IGNORECASE)
    if not match:
        raise ValueError(f"not a size: {text!r} (use e.g. 2G, 512M or a byte count)")
    return int(match.group(1)) * _UNITS[match.group(2).upper()]


def quota_from_env() -> int:
    value = os.environ.get(QUOTA_ENV)
    return parse_bytes(value) if value else DEFAULT_QUOTA_BYTES


def secure(store: Path) -> None:
    """Create the store readable by this uid alone, so no sandbox uid can list or read it, even
    at the isolation levels that see the whole file system."""
    store.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = os.stat(store)
    if not stat.S_ISDIR(info.st_mode):
        raise NotADirectoryError(errno.ENOTDIR, "not a folder", str(store))
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(store, 0o700)


def library_path(store: Path, key: str) -> Path:
    return store / f"{key}.so"


def lookup(store: Path, key: str, cap: int = DEFAULT_LIBRARY_BYTES) -> Path | None:
    """The stored library for `key`, touched (it is now the most recently used), or None.
    An entry that is not a plain file, or is over the cap (left by older versions), is dropped."""
    path = library_path(store, key)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(info.st_mode) or info.st_size > cap:
        _unlink(path)
        return None
    try:
        os.utime(path, follow_symlinks=False)
    except FileNotFoundError:
        return None  # evicted by a concurrent build just now
    return path


def insert(store: Path, key: str, built: Path, cap: int = DEFAULT_LIBRARY_BYTES) -> Path:
    """Copy a freshly built library into the store atomically, owned by this uid. A copy, never a
    link: the build's output belongs to the sandbox uid, which could rewrite a shared inode."""
    target = library_path(store, key)
    staged = store / f".{key}.so.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    source = os.open(built, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(source)
        if not stat.S_ISREG(info.st_mode):
            raise LibraryTooLarge(f"{built.name} is not a regular file")
        if info.st_size > cap:
            raise LibraryTooLarge(
                f"the library is {info.st_size / (1 << 20):.0f} MB, over "
                f"the {cap >> 20} MB per-library limit; it was not stored"
            )
        _copy_fd(source, staged, cap)
    except BaseException:
        _unlink(staged)
        raise
    finally:
        os.close(source)
    os.replace(staged, target)
    return target


def usage(store: Path) -> int:
    """Bytes held by the store's libraries."""
    return sum(size for _mtime, _name, size in _libraries(store))


def evict(store: Path, quota: int, keep: tuple[Path, ...] = ()) -> list[str]:
    """Remove least recently used libraries until the store holds at most `quota` bytes (never
    one named in `keep`), and staging copies abandoned by dead processes. Returns what went."""
    now = time.time()
    try:
        with os.scandir(store) as entries:
            for entry in entries:
                if entry.name.startswith(".") and ".so." in entry.name:
                    try:
                        if now - entry.stat(follow_symlinks=False).st_mtime > STALE_STAGING_S:
                            _unlink(Path(entry.path))
                    except OSError:
                        pass
    except OSError:
        return []
    libraries = sorted(_libraries(store))
    total = sum(size for _mtime, _name, size in libraries)
    kept = {p.name for p in keep}
    removed = []
    for _mtime, name, size in libraries:
        if total <= quota:
            break
        if name in kept:
            continue
        _unlink(store / name)
        total -= size
        removed.append(name)
    return removed


def place(library: Path, view: Path, uid: int) -> Path:
    """Put `library` alone in the evaluation's build folder `view`, owned by this uid, read-only to
    the sandbox: a hard link when the sandbox runs as another uid (it cannot change a file it does
    not own), else a copy (a same-uid sandbox could chmod and rewrite an inode the store shares).
    Raises FileNotFoundError when the library was evicted meanwhile (the caller rebuilds)."""
    if view.is_symlink() or (view.exists() and not view.is_dir()):
        view.unlink()
    passable_dirs(view)
    target = view / library.name
    if target.is_symlink() or target.exists():
        target.unlink()
    if uid != os.geteuid():
        try:
            os.link(library, target, follow_symlinks=False)
            return target
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
                raise
    source = os.open(library, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        _copy_fd(source, target, DEFAULT_LIBRARY_BYTES << 2)
    finally:
        os.close(source)
    return target


def passable_dirs(path: Path) -> None:
    """Create `path` and its missing parents as 0755 whatever the umask (077 on workstations made the evaluation's
    folder above its build folder 0700, and the sandbox uid could not load its library); existing parents stay."""
    for folder in (*reversed(path.parents), path):
        if not folder.exists():
            folder.mkdir(exist_ok=True)
            os.chmod(folder, 0o755)
    os.chmod(path, 0o755)


def _copy_fd(source: int, path: Path, cap: int) -> None:
    out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o755)
    try:
        copied = 0
        while True:
            chunk = os.read(source, 1 << 20)
            if not chunk:
                break
            copied += len(chunk)
            if copied > cap:
                raise LibraryTooLarge(f"the library grew past the {cap >> 20} MB per-library limit while being copied")
            view = memoryview(chunk)
            while view:
                view = view[os.write(out, view) :]
        os.fchmod(out, 0o755)
    finally:
        os.close(out)


def _libraries(store: Path) -> list[tuple[float, str, int]]:
    found = []
    try:
        with os.scandir(store) as entries:
            for entry in entries:
                if not entry.name.endswith(".so") or entry.name.startswith("."):
                    continue
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISREG(info.st_mode):
                    found.append((info.st_mtime, entry.name, info.st_size))
    except OSError:
        pass
    return found


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
