"""`kernel-agent report`: one self-contained HTML file, loaded in headless Chromium over the DevTools protocol.

The browser must see no console errors and no network request other than the
file:// page itself (no CDN, no fonts, no remote images); a screenshot is kept
in the test's tmp dir, and copied to benchmarks/results/report-screenshot.png only when
KERNEL_AGENT_SAVE_SCREENSHOT=1 (a plain test run leaves the tracked tree alone).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest
from chromium import CHROMIUM, DevTools, start_chromium
from conftest import ROOT, run_cli
from review_runs import build_run

SCREENSHOT = ROOT / "benchmarks" / "results" / "report-screenshot.png"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("report")
    run = build_run(tmp)
    approved = run_cli(
        "review",
        "approve",
        str(run["best"]),
        "--note",
        "diff read; torch.softmax is exact here",
        "--db",
        str(run["db"]),
        env={"USER": "carol"},
    )
    assert approved.returncode == 0, approved.stderr
    out = tmp / "report.html"
    proc = run_cli("report", "latest", "-o", str(out), "--db", str(run["db"]))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_report_is_self_contained(report: Path) -> None:
    html = report.read_text()
    assert "<script" not in html and "@import" not in html and not re.search(r"url\(\s*[\"']?(?!#)", html), (
        "only in-document url(#id) references"
    )
    assert not re.search(r"""(src|href|xlink:href)\s*=\s*["'](?!#)""", html), (
        "the report must not reference any other resource"
    )
    for needle in (
        "softmax64",
        "Lineage of the best candidate",
        "Failures by status",
        "Provenance",
        "carol",
        "approve",
        "<svg",
        "95% interval",
        "scripted",
    ):
        assert needle in html, needle
    assert "return torch.softmax(x, dim=-1)" in re.sub(r"<[^>]+>", "", html).replace("&#39;", "'")
    roofline = html.split('<div class="chart roofline">', 1)[1].split("</div>", 1)[0]
    assert (
        "<svg" in roofline
        and "softmax64 (256x2048)" in roofline
        and "hollow: baseline" in roofline
        and "filled: best candidate" in roofline
    )
    assert "Roofline on " in html and "GB/s" in roofline


@pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="Debian's chromium is not installed (/usr/bin/chromium); scripts/setup installs it when run as root",
)
def test_report_loads_offline_in_chromium(report: Path, tmp_path: Path) -> None:
    pytest.importorskip("websocket", reason="websocket-client is not installed (pip install -e '.[test]')")
    process, port = start_chromium(tmp_path / "profile")
    try:
        targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30).read())
        page = next(t for t in targets if t["type"] == "page")
        tools = DevTools(page["webSocketDebuggerUrl"])
        for domain in ("Page.enable", "Runtime.enable", "Log.enable", "Network.enable"):
            tools.call(domain)
        tools.call("Emulation.setDeviceMetricsOverride", width=1280, height=1000, deviceScaleFactor=1, mobile=False)
        url = report.resolve().as_uri()
        tools.call("Page.navigate", url=url)
        tools.wait_for("Page.loadEventFired")
        tools.drain(1.5)
        shot = base64.b64decode(tools.call("Page.captureScreenshot", format="png")["data"])
        errors = [
            e
            for e in tools.events
            if e.get("method") == "Runtime.exceptionThrown"
            or (e.get("method") == "Runtime.consoleAPICalled" and e["params"].get("type") in ("error", "assert"))
            or (e.get("method") == "Log.entryAdded" and e["params"]["entry"].get("level") == "error")
        ]
        requests = [
            e["params"]["request"]["url"] for e in tools.events if e.get("method") == "Network.requestWillBeSent"
        ]
        title = tools.call("Runtime.evaluate", expression="document.title")["result"]["value"]
        tools.socket.close()
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
    (tmp_path / "report-screenshot.png").write_bytes(shot)
    if os.environ.get("KERNEL_AGENT_SAVE_SCREENSHOT") == "1":
        shutil.copyfile(tmp_path / "report-screenshot.png", SCREENSHOT)
    assert shot.startswith(b"\x89PNG") and len(shot) > 10_000
    assert errors == [], errors
    assert requests and set(requests) == {url}, requests
    assert title.startswith("kernel-agent run")
