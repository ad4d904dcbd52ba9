"""What a sandbox left in the host's shared temp folders, removed when its evaluation ends.

Why: below bubblewrap the sandbox's /tmp, /var/tmp and /dev/shm can be the host's (a private tmpfs needs a
mount namespace the level may not have), so a file a candidate writes there outlives its evaluation: memory
held in /dev/shm, a file planted for a later process to find. Whatever the walls, each evaluation ends with a
sweep of the entries the sandbox uid owns there, created since it started.

How it finds them without trusting names: the sandbox uid can only create an entry in a folder it may write,
which is one it owns (removed whole) or one every uid may write (a sticky 1777 folder such as /tmp itself,
searched); nothing else is walked. Only a sandbox that runs as another uid than this process is swept: as the
same uid, its files cannot be told from this process's own (THREATS names the gap).
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

SHARED = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))
MAX_ENTRIES = 100_000  # a flood of files in a shared folder: the walk stops, what it found is still removed


def leftovers(uid: int, since: float, places: tuple[Path, ...] = SHARED) -> list[Path]:
    """Entries under `places` owned by `uid` whose inode changed at or after `since` (a time.time() value), each
    at its topmost such folder; empty for our own uid."""
    if uid == os.geteuid():
        return []
    found: list[Path] = []
    seen = 0
    stack = [p for p in dict.fromkeys(places) if p.is_dir() and not p.is_symlink()]
    while stack and seen < MAX_ENTRIES:
        folder = stack.pop()
        try:
            listing = list(os.scandir(folder))
        except OSError:
            continue
        for entry in listing:
            seen += 1
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if info.st_uid == uid and info.st_ctime >= since:
                found.append(Path(entry.path))
            elif stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_IWOTH:
                stack.append(Path(entry.path))  # a folder any uid may write: the sandbox could have written here
    return found


def sweep(uid: int, since: float, places: tuple[Path, ...] = SHARED) -> list[Path]:
    """Remove what `leftovers` finds; the paths removed."""
    removed = []
    for path in leftovers(uid, since, places):
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        except OSError:
            continue
        removed.append(path)
    return removed
