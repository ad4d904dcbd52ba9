"""Every runnable shell block of the guide, run as a reader would: pages in reading order, blocks in page order,
all in one folder with `examples/` beside it and the venv's `kernel-agent` and `python` first on PATH, so a later
page uses the runs an earlier one made (run 1 is the quickstart's). A block fails its page when it exits non-zero.
Blocks marked `<!-- illustrative: REASON -->` do not run (test_documented.py insists on the reason)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import EXAMPLES

from docsite.blocks import blocks, guide_pages

PAGES = [p for p in guide_pages() if any(b.runs for b in blocks(p))]
BLOCK_TIMEOUT_S = 420


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("reader")
    (folder / "examples").symlink_to(EXAMPLES)
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_the_pages_commands_run(page: Path, reader: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNEL_AGENT_DB")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["COLUMNS"] = "160"
    for block in (b for b in blocks(page) if b.runs):
        started = time.monotonic()
        proc = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block.text],
            cwd=reader,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=BLOCK_TIMEOUT_S,
        )
        took = time.monotonic() - started
        print(f"{block.where()}: {took:.1f} s")
        assert proc.returncode == 0, f"{block.where()} exited {proc.returncode}\n{block.text}\n{proc.stderr[-3000:]}"
        assert "Traceback" not in proc.stderr, f"{block.where()}\n{proc.stderr[-3000:]}"
