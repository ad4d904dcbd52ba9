"""The site builds in strict mode: a broken link or anchor, a page missing from the nav, or a generated page
that fails to build fails here (about 10 s)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT


def test_the_site_builds_strict_with_the_generated_reference(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's notice about its successor, not a build warning
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "WARNING" not in proc.stderr, proc.stderr[-4000:]
    cli = (site / "reference" / "cli.html").read_text()
    assert 'id="kernel-agent-optimize"' in cli and "--max-candidates" in cli
    assert "needs_gpu" in (site / "reference" / "outcomes.html").read_text()
    assert (site / "guide" / "quickstart.html").is_file() and (site / "THREATS.html").is_file()
