"""The worker's heap is on huge pages once torch is imported, and torch's import is not.

Runs a real interpreter with the sandbox's environment (no bwrap: the pages are the kernel's business,
not the sandbox's). Huge pages need transparent huge pages in `madvise` mode, the default of most
distributions; elsewhere the test says why it cannot run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_agent.sandbox.host.isolation import sandbox_env

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")

CHILD = r"""
import json, re
def huge_kb():
    return int(re.search(r"AnonHugePages:\s+(\d+)", open("/proc/self/smaps_rollup").read()).group(1))
import torch
from kernel_agent.sandbox.inside.worker import advise_huge_heap
after_import = huge_kb()
block = torch.empty(64 << 20, dtype=torch.uint8)
advise_huge_heap()
block.fill_(0)
print(json.dumps({"after_import": after_import, "after_prefault": huge_kb()}))
"""


def _thp_mode() -> str | None:
    try:
        text = THP.read_text()
    except OSError:
        return None
    chosen = [word for word in text.split() if word.startswith("[")]
    return chosen[0].strip("[]") if chosen else None


@pytest.mark.skipif(_thp_mode() != "madvise", reason="needs transparent huge pages in madvise mode")
def test_the_prefaulted_heap_is_on_huge_pages_and_the_import_is_not(tmp_path: Path) -> None:
    root = str(Path(__file__).resolve().parents[4])
    env = sandbox_env({"PYTHONPATH": root}, tmp_path)
    result = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    pages = json.loads(result.stdout.strip().splitlines()[-1])
    assert pages["after_import"] == 0  # glibc was not asked to put the whole process on huge pages
    assert pages["after_prefault"] >= 32 << 10  # most of the 64 MB block, 2 MB at a time
