"""Worker launch must not depend on which descriptors the orchestrator happens to hold (issue 40).

The README's first command died once with `OSError: [Errno 9] Bad file descriptor` from `Popen`: the
launch named fixed numbers 3-6 in `pass_fds`, which CPython marks inheritable before `preexec_fn` runs,
so it worked only while some unrelated file of the orchestrator sat on each of them at fork time."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import ROOT

LAUNCHES = 512

STRESS = r"""
import fcntl, json, os, subprocess, sys, threading
from kernel_agent.sandbox.host.spawn import spawn
from kernel_agent.sandbox.protocol import WorkerFds

os.closerange(3, 256)  # a process whose low descriptors are free, as after a database or log closed them
CHILD = (
    "import os, sys; fds = sys.argv[sys.argv.index('--fds') + 1].split(','); "
    "os.write(int(fds[1]), os.read(int(fds[0]), 8) + os.pread(int(fds[2]), 4, 0))"
)
stop, failures, done, lock = threading.Event(), [], [0], threading.Lock()

def churn():  # other threads opening and closing files all the while
    while not stop.is_set():
        fds = [os.open("/dev/null", os.O_RDONLY) for _ in range(4)]
        for fd in fds:
            os.close(fd)

def high(fd):  # the orchestrator's own descriptors may sit anywhere: here, away from 3-6
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 64)
    os.close(fd)
    return moved

def launch(count):
    for i in range(count):
        to_r, to_w = map(high, os.pipe())
        from_r, from_w = map(high, os.pipe())
        inputs = high(os.memfd_create("inputs"))
        os.write(inputs, b"data")
        try:
            proc = spawn([sys.executable, "-S", "-c", CHILD], WorkerFds(to_r, from_w, inputs), dict(os.environ),
                         "/", subprocess.DEVNULL, lambda: None)
            os.close(to_r), os.close(from_w)
            os.write(to_w, b"ping")
            reply = os.read(from_r, 16)
            proc.wait()
            if reply != b"pingdata":
                raise RuntimeError(f"reply {reply!r}, exit {proc.returncode}")
        except Exception as exc:
            with lock:
                failures.append(f"{type(exc).__name__}: {exc}")
            for fd in (to_r, from_w):
                try:
                    os.close(fd)
                except OSError:
                    pass
        finally:
            for fd in (to_w, from_r, inputs):
                os.close(fd)
            with lock:
                done[0] += 1

churners = [threading.Thread(target=churn) for _ in range(2)]
launchers = [threading.Thread(target=launch, args=(COUNT // 4,)) for _ in range(4)]
for t in churners + launchers:
    t.start()
for t in launchers:
    t.join()
stop.set()
for t in churners:
    t.join()
print(json.dumps({"launches": done[0], "failures": len(failures), "first": failures[:3]}))
"""


def test_concurrent_launches_never_depend_on_borrowed_descriptor_numbers() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", STRESS.replace("COUNT", str(LAUNCHES))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result["launches"] == LAUNCHES
    assert result["failures"] == 0, result
