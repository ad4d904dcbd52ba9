"""The real worker process, spoken to over its pipes without a sandbox around it: a line that is not one of
the protocol's requests gets `ok: false` with a one-line reason and no status of the kernel's, and the
worker goes on serving; a line past the size cap ends it cleanly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from conftest import ROOT

from kernel_agent.sandbox.channel import MAX_LINE_BYTES, LineReader
from kernel_agent.sandbox.protocol import Ping, WorkerFds

KERNEL = "def kernel(x):\n    return x * 2\n"

MALFORMED = [
    (b"not json\n", "the trusted side sent a line that is not JSON"),
    (b"[1, 2]\n", "the trusted side sent a JSON value that is not an object"),
    (b'{"cmd": "frobnicate"}\n', "unknown request"),
    (b'{"cmd": "check", "poison_bytes": "lots", "layout": []}\n', "check: poison_bytes is not int"),
    (b'{"cmd": "warmup", "min_calls": 3}\n', "warmup: no layout of its inputs"),
]


def test_a_malformed_request_gets_a_reason_and_the_worker_serves_on(tmp_path: Path) -> None:
    (tmp_path / "kernel.py").write_text(KERNEL)
    config = {"log": str(tmp_path / "worker.log"), "source": str(tmp_path / "kernel.py"), "entry": "kernel"}
    config |= {"device": "cpu", "threads": 1, "prefault_bytes": 0, "gpu_data": "host", "workdir": str(tmp_path)}
    (tmp_path / "worker.json").write_text(json.dumps(config))
    to_worker_r, to_worker = os.pipe()
    from_worker, from_worker_w = os.pipe()
    inputs = os.memfd_create("inputs")
    fds = WorkerFds(to_worker_r, from_worker_w, inputs)
    worker = subprocess.Popen(
        [sys.executable, "-m", "kernel_agent.sandbox.inside.start", str(tmp_path / "worker.json")]
        + ["--fds", fds.arg()],
        cwd=ROOT,
        pass_fds=fds.passed(),
    )
    for fd in (to_worker_r, from_worker_w, inputs):
        os.close(fd)
    replies = LineReader(from_worker)
    try:
        assert replies.receive(deadline=_in(120)) == {"ok": True, "event": "ready"}
        for line, reason in MALFORMED:
            os.write(to_worker, line)
            reply = replies.receive(deadline=_in(30))
            assert reply["ok"] is False and "status" not in reply, reply
            assert reply["reason"].startswith("malformed request: ") and reason in reply["reason"], reply
            assert "\n" not in reply["reason"]
        os.write(to_worker, (json.dumps(Ping().to_wire()) + "\n").encode())
        assert replies.receive(deadline=_in(30)) == {"ok": True}
        with open(to_worker, "wb", closefd=False) as pipe:  # a line with no end in sight
            pipe.write(b"x" * (MAX_LINE_BYTES + (1 << 16)))
        reply = replies.receive(deadline=_in(30))
        assert reply["ok"] is False and f"over {MAX_LINE_BYTES} bytes" in reply["reason"]
        assert worker.wait(timeout=30) == 0
        assert "Traceback" not in (tmp_path / "worker.log").read_text()  # where the worker's stderr goes
    finally:
        worker.kill()
        worker.wait()
        for fd in (to_worker, from_worker):
            os.close(fd)


def _in(seconds: float) -> float:
    return time.monotonic() + seconds
