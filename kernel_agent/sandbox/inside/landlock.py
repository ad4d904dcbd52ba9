"""Landlock: the worker confines itself to reading the trees it needs and writing its work dir.

An unprivileged kernel feature (5.13+), so it holds at every isolation level, the `process` level included,
and for root as for any user (it is checked after the permissions, whatever the capabilities). From ABI 4 it
also forbids TCP bind and connect, from ABI 6 signals to processes outside the domain and abstract unix
sockets. A domain is per thread and inherited by children: `restrict` must run while the worker has one
thread, before any candidate code. Plain ctypes syscalls: no compiled dependency.
"""

from __future__ import annotations

import ctypes
import os
import stat
from dataclasses import dataclass
from pathlib import Path

# The three syscalls have the same numbers on every architecture (the unified table).
CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH, RULE_NET_PORT = 1, 2
PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15  # ABI 2, 3, 5
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6

READ = EXECUTE | READ_FILE | READ_DIR
WRITE = (
    WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO | MAKE_SYM | REFER | TRUNCATE
)
FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # the rights a rule on a file may carry


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def abi() -> int:
    """The Landlock ABI this kernel offers; 0 when it has none (too old, or disabled at boot)."""
    version = _libc.syscall(CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    return max(int(version), 0)


def handled(version: int) -> tuple[int, int, int]:
    """(file system, network, scope) rights this ABI can govern: everything it knows is denied unless granted."""
    fs = READ | WRITE | MAKE_CHAR | MAKE_BLOCK
    fs &= ~(REFER if version < 2 else 0) & ~(TRUNCATE if version < 3 else 0)
    fs |= IOCTL_DEV if version >= 5 else 0
    net = NET_BIND_TCP | NET_CONNECT_TCP if version >= 4 else 0
    scoped = SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL if version >= 6 else 0
    return fs, net, scoped


@dataclass(frozen=True)
class Rules:
    """What the worker keeps: trees it reads and executes, files it may also write (devices), trees it writes."""

    read: tuple[Path, ...]
    read_write_files: tuple[Path, ...]
    write: tuple[Path, ...]


class LandlockError(OSError):
    """The kernel offers Landlock but refused this ruleset."""


def restrict(rules: Rules) -> int:
    """Confine this thread (and every process it starts) to `rules`; the ABI in force, 0 without Landlock."""
    version = abi()
    if version == 0:
        return 0
    fs, net, scoped = handled(version)
    attr = _RulesetAttr(fs, net, scoped)
    size = 8 if version < 4 else 16 if version < 6 else 24
    ruleset = _check(_libc.syscall(CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)))
    try:
        for path in rules.read:
            _allow(ruleset, path, READ & fs)
        for path in rules.read_write_files:
            _allow(ruleset, path, (READ_FILE | WRITE_FILE | IOCTL_DEV) & fs)
        for path in rules.write:
            _allow(ruleset, path, fs & ~(MAKE_CHAR | MAKE_BLOCK))
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
        _check(_libc.syscall(RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)))
    finally:
        os.close(ruleset)
    return version


def _allow(ruleset: int, path: Path, access: int) -> None:
    """One rule; a path that does not exist here is skipped (a library folder this machine lacks)."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            access &= FILE_ONLY
        rule = _PathBeneath(access, fd)
        _check(_libc.syscall(ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH), ctypes.byref(rule), 0))
    finally:
        os.close(fd)


def _check(result: int) -> int:
    if result < 0:
        errno = ctypes.get_errno()
        raise LandlockError(errno, f"landlock: {os.strerror(errno)}")
    return result
