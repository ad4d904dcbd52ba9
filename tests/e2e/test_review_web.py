"""`kernel-agent review RUN --serve`: the review page, served by the real CLI, driven in headless Chromium.

Real parts: the CLI as a subprocess serving on 127.0.0.1, a real SQLite file (written through the database layer:
review_pages.py), Debian's Chromium over the DevTools protocol pressing keys as a reviewer does, and `export
--approved-only` re-verifying in the sandbox. The hostile set checks that nothing a candidate wrote runs, loads or
decides; the plain HTTP tests check each refusal (token, Host, CSRF, origin) and that a proper request passes.
"""

from __future__ import annotations

import http.client
import json
import os
import select
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from chromium import CHROMIUM, NO_BROWSER, Browser
from conftest import ROOT, run_cli
from review_pages import HOSTILE_SOURCES, SENTINEL, honest_run, hostile_run

SCREENSHOT = ROOT / "docs" / "guide" / "review-page.png"  # written only with KERNEL_AGENT_SAVE_SCREENSHOT=1
pytestmark = pytest.mark.slow
needs_browser = pytest.mark.skipif(not CHROMIUM.exists(), reason=NO_BROWSER)


class Served:
    """`kernel-agent ARGS --serve --no-open` running, with the URL it printed."""

    def __init__(self, *args: str, user: str = "alice") -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kernel_agent", *args, "--serve", "--no-open"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "USER": user, "DISPLAY": ""},
        )
        ready, _, _ = select.select([self.process.stdout], [], [], 60)
        if not ready:
            self.process.kill()
            raise TimeoutError("the server printed no URL in 60 s")
        self.url = self.process.stdout.readline().strip()
        assert self.url.startswith("http://127.0.0.1:"), (self.url, self.process.stderr.read())
        parts = urlsplit(self.url)
        self.port = parts.port
        self.token = parts.path.split("/")[1]
        self.origin = f"http://127.0.0.1:{self.port}"

    def stop(self) -> tuple[int, str]:
        """Ctrl-C, as a user stops it: its exit status and what it wrote on stderr."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        return self.process.returncode, self.process.stderr.read()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    pytest.importorskip("websocket", reason="websocket-client is not installed (pip install -e '.[test]')")
    opened = Browser(tmp_path / "profile")
    try:
        yield opened
    finally:
        opened.close()


def reviews(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as connection:
        return connection.execute("select candidate_id, decision, reviewer, note from reviews order by id").fetchall()


def current(browser: Browser) -> int:
    return int(browser.evaluate("document.querySelector('#queue li.current').dataset.id"))


def request(
    served: Served, method: str, path: str, headers: dict[str, str] | None = None, body: bytes | None = None
) -> tuple[int, dict[str, str], str]:
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
    try:
        connection.request(method, path, body=body, headers={"Host": f"127.0.0.1:{served.port}", **(headers or {})})
        answer = connection.getresponse()
        return answer.status, dict(answer.getheaders()), answer.read().decode()
    finally:
        connection.close()


def decision(candidate: int, decision: str = "approve") -> bytes:
    return json.dumps({"candidate": candidate, "decision": decision, "note": "by hand"}).encode()


@needs_browser
def test_a_reviewer_approves_and_rejects_with_the_keyboard_and_export_ships_the_approved(
    browser: Browser, tmp_path: Path
) -> None:
    run = honest_run(tmp_path / "runs.db")
    fast, chunked = run["ids"]
    served = Served("review", "latest", "--db", str(run["db"]))
    try:
        browser.open(served.url)
        assert current(browser) == fast, "best first"
        browser.press("n")
        browser.type("reads past the row end")
        browser.press("Escape")
        browser.press("r")
        browser.wait(f"document.getElementById('status').textContent.includes('candidate {fast}: rejected')")
        shown_decision = browser.evaluate(f"document.querySelector('#c{fast} dd.decision').textContent")
        assert shown_decision.startswith("reject by alice at ") and shown_decision.endswith(": reads past the row end")
        assert current(browser) == chunked, "a decision moves to the next candidate"
        browser.press("k")
        assert current(browser) == fast
        browser.press("j")
        browser.press("u")  # the unified diff
        assert browser.evaluate("getComputedStyle(document.querySelector('.current table.unified')).display") == "table"
        browser.press("u")
        browser.press("a")
        browser.wait(f"document.getElementById('status').textContent.includes('candidate {chunked}: approved')")
        shown = "Array.from(document.querySelectorAll('#queue li.item')).filter(i => !i.hidden).map(i => +i.dataset.id)"
        browser.press("f")  # awaiting review
        assert browser.evaluate(shown) == []
        browser.press("f")  # flagged
        assert browser.evaluate(shown) == []
        browser.press("f")  # approved
        assert browser.evaluate(shown) == [chunked]
        errors, requests = browser.errors(), browser.requests()
        browser.open(served.url)  # the page is built from the database: the decisions are there after a reload
        states = "Array.from(document.querySelectorAll('#queue li.item')).map(i => [+i.dataset.id, i.dataset.state])"
        assert browser.evaluate(states) == [[fast, "rejected"], [chunked, "approved"]]
        if os.environ.get("KERNEL_AGENT_SAVE_SCREENSHOT") == "1":
            browser.press("k")
            time.sleep(0.3)
            SCREENSHOT.write_bytes(browser.screenshot())
    finally:
        status, stderr = served.stop()
    assert status == 0 and "review page stopped" in stderr and "Traceback" not in stderr, stderr
    assert errors == [], errors
    assert {url.split("/")[2] for _, url in requests} == {f"127.0.0.1:{served.port}"}, requests
    assert [url for method, url in requests if method != "GET"] == [f"{served.url}decide"] * 2

    assert reviews(run["db"]) == [
        (fast, "reject", "alice", "reads past the row end"),
        (chunked, "approve", "alice", ""),
    ]
    listed = json.loads(
        run_cli("candidates", "list", "--run", str(run["run_id"]), "--db", str(run["db"]), "--json").stdout
    )
    assert {c["id"]: (c["review"] or {}).get("decision") for c in listed} == {
        run["ids"][0] - 1: None,
        fast: "reject",
        chunked: "approve",
    }
    shipped = run_cli(
        "export",
        str(run["run_id"]),
        "--out",
        str(tmp_path / "out"),
        "--name",
        "reviewed",
        "--approved-only",
        "--threads",
        "1",
        "--sandbox",
        str(tmp_path / "sandbox"),
        "--db",
        str(run["db"]),
    )
    assert shipped.returncode == 0, shipped.stderr[-3000:]
    assert f"exported softmax64: candidate {chunked}," in shipped.stdout, shipped.stdout
    assert "x.shape[0], CHUNK" in (tmp_path / "out" / "reviewed" / "_kernel_softmax64.py").read_text()


@needs_browser
def test_nothing_a_hostile_candidate_wrote_runs_loads_or_decides(browser: Browser, tmp_path: Path) -> None:
    run = hostile_run(tmp_path / "hostile.db")
    served = Served("review", str(run["run_id"]), "--db", str(run["db"]))
    try:
        browser.open(served.url)
        for _ in run["ids"]:
            browser.press("j")
            browser.press("u")
        browser.evaluate("document.querySelectorAll('main details').forEach(d => d.open = true)")
        time.sleep(1.0)
        browser.tools.drain(0.5)
        pwned = browser.evaluate("typeof window.__pwned")
        counts = browser.evaluate(
            "['script', 'img', 'iframe', 'form', 'svg', 'style', 'base', 'meta[http-equiv]', 'a[href^=javascript]']"
            ".map(s => document.querySelectorAll(s).length)"
        )
        texts = {c: browser.evaluate(f"document.getElementById('c{c}').textContent") for c in run["ids"]}
        direction = run["ids"][list(HOSTILE_SOURCES).index("direction")]
        warning = browser.evaluate(f"document.querySelector('#c{direction} .warning.direction')?.textContent")
        markers = browser.evaluate(f"document.querySelectorAll('#c{direction} .bidi').length")
        others = [browser.evaluate(f"!!document.querySelector('#c{c} .warning.direction')") for c in run["ids"]]
        errors, requests = browser.errors(), browser.requests()
    finally:
        status, _ = served.stop()
    assert status == 0
    assert pwned == "undefined", "a script from the candidate's text ran"
    assert counts == [1, 0, 0, 0, 0, 0, 0, 0, 0], "only the page's own script; no element from candidate text"
    assert errors == [], errors
    own = f"{served.url}static/"
    assert [(m, u) for m, u in requests if m != "GET" or not (u == served.url or u.startswith(own))] == [], requests
    assert reviews(run["db"]) == [], "no decision made by page content"
    for candidate, text in texts.items():
        assert f"<script>{SENTINEL}</script>" in text, candidate  # the reason and flags, shown as text
        assert "evil.example" in text  # the output, shown as text
    assert warning is not None and "U+202E" in warning and "U+2066" in warning
    assert markers >= 3  # each control in the diff shown as its code point
    assert others.count(True) == 1


def test_requests_without_the_secrets_or_from_elsewhere_are_refused(tmp_path: Path) -> None:
    run = honest_run(tmp_path / "runs.db")
    fast = run["ids"][0]
    served = Served("review", "latest", "--db", str(run["db"]))
    try:
        page = f"/{served.token}/"
        status, headers, html = request(served, "GET", page)
        assert status == 200 and "script-src 'self';" in headers["Content-Security-Policy"]
        assert (
            headers["Referrer-Policy"] == "no-referrer" and "'unsafe-inline'" not in headers["Content-Security-Policy"]
        )
        csrf = html.split('name="csrf-token" content="', 1)[1].split('"', 1)[0]
        assert csrf and csrf != served.token
        good = {"Content-Type": "application/json", "X-CSRF-Token": csrf, "Origin": served.origin}
        refused = {
            "no token": request(served, "GET", "/")[0],
            "no token, static": request(served, "GET", "/static/review.js")[0],
            "wrong token": request(served, "GET", f"/{served.token[:-1]}x/")[0],
            "other Host": request(served, "GET", page, {"Host": f"evil.example:{served.port}"})[0],
            "other port": request(served, "GET", page, {"Host": f"127.0.0.1:{served.port + 1}"})[0],
            "no Host": request(served, "GET", page, {"Host": ""})[0],
            "decision by GET": request(served, "GET", f"{page}decide?candidate={fast}&decision=approve")[0],
            "no CSRF": request(served, "POST", f"{page}decide", {**good, "X-CSRF-Token": ""}, decision(fast))[0],
            "wrong CSRF": request(served, "POST", f"{page}decide", {**good, "X-CSRF-Token": csrf[:-1]}, decision(fast))[
                0
            ],
            "a form": request(
                served,
                "POST",
                f"{page}decide",
                {**good, "Content-Type": "application/x-www-form-urlencoded"},
                f"candidate={fast}&decision=approve".encode(),
            )[0],
            "other origin": request(
                served, "POST", f"{page}decide", {**good, "Origin": "http://evil.example"}, decision(fast)
            )[0],
            "cross-site": request(
                served, "POST", f"{page}decide", {**good, "Sec-Fetch-Site": "cross-site"}, decision(fast)
            )[0],
            "other Host, with CSRF": request(
                served,
                "POST",
                f"{page}decide",
                {**good, "Host": f"localhost.evil.example:{served.port}"},
                decision(fast),
            )[0],
            "not on the page": request(served, "POST", f"{page}decide", good, decision(run["ids"][0] - 1))[0],
            "unknown decision": request(served, "POST", f"{page}decide", good, decision(fast, "ship"))[0],
        }
        assert reviews(run["db"]) == []
        accepted = request(served, "POST", f"{page}decide", good, decision(fast))
        report = request(served, "GET", f"{page}report")
    finally:
        status, stderr = served.stop()
    assert status == 0 and "Traceback" not in stderr, stderr
    assert {name: code for name, code in refused.items() if code < 400} == {}, refused
    assert refused["other Host"] == 421 and refused["no CSRF"] == 403 and refused["a form"] == 415
    assert accepted[0] == 200 and json.loads(accepted[2])["decision"] == "approve", accepted
    assert reviews(run["db"]) == [(fast, "approve", "alice", "by hand")]
    assert report[0] == 200 and "<script" not in report[2] and "alice" in report[2]
    assert "script-src" not in report[1]["Content-Security-Policy"]  # the report runs no script at all


def test_report_serve_prints_the_report_url_and_a_taken_port_is_one_line(tmp_path: Path) -> None:
    run = honest_run(tmp_path / "runs.db")
    served = Served("report", "latest", "--db", str(run["db"]))
    try:
        assert served.url.endswith(f"/{served.token}/report")
        status, headers, html = request(served, "GET", urlsplit(served.url).path)
        taken = run_cli("review", "latest", "--serve", "--no-open", "--port", str(served.port), "--db", str(run["db"]))
    finally:
        stopped, _ = served.stop()
    assert stopped == 0 and status == 200 and "kernel-agent run" in html
    assert headers["Content-Security-Policy"].startswith("default-src 'none'")
    assert taken.returncode == 2 and "Traceback" not in taken.stderr
    assert f"cannot serve on 127.0.0.1:{served.port}" in taken.stderr, taken.stderr
