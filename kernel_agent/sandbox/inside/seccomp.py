"""seccomp: the system calls a kernel never needs fail with EPERM inside the worker.

A classic BPF filter, built here (no compiled dependency), installed with no_new_privs on every thread of
the worker before the candidate is imported, and inherited by everything it starts. It refuses: sockets of
any family but AF_UNIX (no network, no netlink, no raw packets); tracing and reading other processes'
memory; new namespaces and mounts; keys, bpf, perf events, userfaultfd, io_uring (which would run the
refused calls behind the filter's back), kernel modules, kexec and reboot; watches that tell when another
process opens a file (inotify, fanotify, leases, dnotify). File locks (flock, fcntl record and OFD locks)
succeed without locking: two workers of one verdict read the same files, and a lock on one of them was a
way for them to rank each other; inside one worker nothing relies on them. A worker running as root (the
`process` level where uid 65534 cannot reach the interpreter) is also refused what an owner may do to its
files without a capability (chmod, chown, utime, xattrs): every root-owned file would be its own.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_BIT = 0x40000000  # x86_64's x32 calls: another number for every call, refused whole

# Numbers per architecture: (x86_64, aarch64); None where the call does not exist there.
REFUSED = {
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "unshare": (272, 97),
    "setns": (308, 268),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "reboot": (169, 142),
    "inotify_init": (253, None),
    "inotify_init1": (294, 26),
    "fanotify_init": (300, 262),
    "name_to_handle_at": (303, 264),
    "open_by_handle_at": (304, 265),
}
# What a file's owner may do without a capability: refused when the worker is root (the `process` level with a
# private interpreter), where every root-owned file on the machine is its own and Landlock does not govern these.
OWNER_CALLS = {
    "chmod": (90, None),
    "fchmod": (91, 52),
    "fchmodat": (268, 53),
    "fchmodat2": (452, 452),
    "chown": (92, None),
    "fchown": (93, 55),
    "lchown": (94, None),
    "fchownat": (260, 54),
    "utime": (132, None),
    "utimes": (235, None),
    "futimesat": (261, None),
    "utimensat": (280, 88),
    "setxattr": (188, 5),
    "lsetxattr": (189, 6),
    "fsetxattr": (190, 7),
    "removexattr": (197, 14),
    "lremovexattr": (198, 15),
    "fremovexattr": (199, 16),
    "setxattrat": (463, 463),
    "removexattrat": (466, 466),
}
SOCKET, SOCKETPAIR, CLONE, CLONE3, FLOCK, FCNTL = (
    (41, 198),
    (53, 199),
    (56, 220),
    (435, 435),
    (73, 32),
    (72, 25),
)
AF_UNIX = 1
CLONE_NEW = 0x7E020080  # CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET | NEWTIME
LOCKS = (6, 7, 37, 38)  # F_SETLK, F_SETLKW, F_OFD_SETLK, F_OFD_SETLKW: succeed, lock nothing
WATCHES = (1024, 1026)  # F_SETLEASE, F_NOTIFY

LD_W_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
NR, ARCH, ARG0, ARG1 = 0, 4, 16, 24  # offsets in struct seccomp_data (little-endian: an argument's low half)
PR_SET_NO_NEW_PRIVS, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC = 38, 1, 1
SECCOMP_SYSCALL = {"x86_64": 317, "aarch64": 277}


def supported() -> bool:
    """Whether this architecture has a filter here (x86_64 and aarch64)."""
    return platform.machine() in AUDIT_ARCH


def program(machine: str, owner_calls: bool = False) -> list[tuple[int, int, int, int]]:
    """The filter for `machine` as (code, jump if true, jump if false, k) instructions; `owner_calls` refuses
    OWNER_CALLS too."""
    column = 0 if machine == "x86_64" else 1
    deny, ok, noop, nosys = _ret(errno.EPERM), (RET, 0, 0, RET_ALLOW), _ret(0), _ret(errno.ENOSYS)
    code: list[tuple[int, int, int, int]] = [(LD_W_ABS, 0, 0, ARCH), (JEQ, 1, 0, AUDIT_ARCH[machine]), deny]
    code.append((LD_W_ABS, 0, 0, NR))
    if machine == "x86_64":
        code += [(JGE, 0, 1, X32_BIT), deny]
    for numbers in (*REFUSED.values(), *(OWNER_CALLS.values() if owner_calls else ())):
        if numbers[column] is not None:
            code += [(JEQ, 0, 1, numbers[column]), deny]
    code += [(JEQ, 0, 1, CLONE3[column]), nosys]  # its flags sit in memory the filter cannot read: clone() instead
    code += [(JEQ, 0, 1, FLOCK[column]), noop]
    for number in (SOCKET[column], SOCKETPAIR[column]):
        code += [(JEQ, 0, 4, number), (LD_W_ABS, 0, 0, ARG0), (JEQ, 0, 1, AF_UNIX), ok, deny]
    code += [(JEQ, 0, 4, CLONE[column]), (LD_W_ABS, 0, 0, ARG0), (JSET, 0, 1, CLONE_NEW), deny, ok]
    code += [(JEQ, 0, 2 * (len(LOCKS) + len(WATCHES)) + 2, FCNTL[column]), (LD_W_ABS, 0, 0, ARG1)]
    for cmd in LOCKS:
        code += [(JEQ, 0, 1, cmd), noop]
    for cmd in WATCHES:
        code += [(JEQ, 0, 1, cmd), deny]
    code.append(ok)
    code.append(ok)
    return code


def _ret(value: int) -> tuple[int, int, int, int]:
    return (RET, 0, 0, RET_ERRNO | value)


class SeccompError(OSError):
    """The kernel refused the filter."""


def install() -> bool:
    """Install the filter on every thread of this process; False on an architecture without one."""
    machine = platform.machine()
    if machine not in AUDIT_ARCH:
        return False
    code = program(machine, owner_calls=os.geteuid() == 0)
    raw = b"".join(struct.pack("=HBBI", *instruction) for instruction in code)
    buffer = ctypes.create_string_buffer(raw, len(raw))

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = Prog(len(code), ctypes.addressof(buffer))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SeccompError(ctypes.get_errno(), "seccomp: no_new_privs refused")
    number = SECCOMP_SYSCALL[machine]
    result = libc.syscall(number, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, ctypes.byref(prog))
    if result != 0:
        error = ctypes.get_errno()
        raise SeccompError(error, f"seccomp: {os.strerror(error)}")
    return True
