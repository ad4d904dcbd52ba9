"""Show the sandbox uid the trees it must read that sit below a private folder, then exec the sandboxed command.

Run as root inside a mount namespace of its own, before privileges drop:
`python -I -S reveal.py PATH... -- COMMAND...` (the export's user-like process, `export/user_process.py`, as an
unused uid; the sandbox's `unshare` level builds a whole root instead, `mounts.py`). A root whose venv or
interpreter lives below a 0700 folder (a container's /root, a pyenv under it) would have that uid unable to pass
the folder to import torch. Here each such folder becomes a 0755 tmpfs holding nothing but the
needed trees, bound read-only at their own paths, so every path the worker was given stays valid and the
rest of the folder stays hidden. The mounts vanish with the namespace.

Standard library only, run by path: it must not import the package it is revealing.
"""

from __future__ import annotations

import ctypes
import os
import stat
import sys
from pathlib import Path

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND = 1, 2, 4, 32, 4096
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


def _mount(source: str | None, target: Path, fstype: str | None, flags: int, data: str | None = None) -> None:
    encoded = [None if s is None else s.encode() for s in (source, str(target), fstype, data)]
    if _libc.mount(encoded[0], encoded[1], encoded[2], flags, encoded[3]) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {source} on {target}: {os.strerror(errno)}")


def blocking_folder(path: Path) -> Path | None:
    """The topmost folder strictly above `path` that other uids cannot pass (no o+x), or None."""
    for parent in reversed(path.parents):
        if parent != Path("/") and not os.stat(parent).st_mode & stat.S_IXOTH:
            return parent
    return None


def reveal(paths: list[Path]) -> None:
    """Make each path readable at its own place through a passable tmpfs over its blocking folder."""
    by_folder: dict[Path, list[Path]] = {}
    for path in paths:
        folder = blocking_folder(path)
        if folder is not None:
            by_folder.setdefault(folder, []).append(path)
    for folder, inside in sorted(by_folder.items(), key=lambda item: len(item[0].parts)):
        handles = {path: os.open(path, os.O_PATH | os.O_CLOEXEC) for path in inside}  # before the tmpfs hides them
        _mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
        for path, handle in handles.items():
            for step in reversed(path.parents):
                if folder in step.parents:
                    step.mkdir(mode=0o755, exist_ok=True)
            if stat.S_ISDIR(os.fstat(handle).st_mode):
                path.mkdir(mode=0o755, exist_ok=True)
            else:
                path.touch(mode=0o644, exist_ok=True)
            _mount(f"/proc/self/fd/{handle}", path, None, MS_BIND)
            _mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
            os.close(handle)


def main(argv: list[str]) -> None:
    split = argv.index("--")
    try:
        reveal([Path(p) for p in argv[:split]])
    except OSError as exc:  # the command still runs; what it cannot read, it names
        print(f"reveal: {exc}", file=sys.stderr)
    os.execvp(argv[split + 1], argv[split + 1 :])


if __name__ == "__main__":
    main(sys.argv[1:])
