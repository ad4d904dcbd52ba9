"""The review server: the standard library's threading HTTP server, four routes under a secret path.

`/TOKEN/` the page, `/TOKEN/report` the run's static report, `/TOKEN/static/NAME` the page's own script and
stylesheets, `POST /TOKEN/decide` a decision. Every request passes `security` first; a refusal is one line of
text with its status. Why no web framework: four routes and two checks fit in one small module, with nothing to
install.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any

from jinja2 import Environment, PackageLoader

from kernel_agent.db.review_reads import latest_decisions
from kernel_agent.db.session import Database
from kernel_agent.review.decisions import ReviewError, queue, record
from kernel_agent.review.report.diffs import pygments_css
from kernel_agent.review.web import security
from kernel_agent.review.web.page import gather
from kernel_agent.review.web.security import Refused, Secrets

STATIC = {"review.js": "text/javascript", "review.css": "text/css", "favicon.svg": "image/svg+xml"}


class ReviewServer(ThreadingHTTPServer):
    """One run's review page on 127.0.0.1 (never another interface), with its own secrets."""

    daemon_threads = True

    def __init__(self, db: Database, run_id: int, reviewer: str, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.db, self.run_id, self.reviewer = db, run_id, reviewer
        self.secrets = Secrets()
        self.templates = Environment(
            loader=PackageLoader("kernel_agent.review.web", "templates"),
            autoescape=True,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.decide_lock = threading.Lock()  # one decision at a time: SQLite and "the latest decision wins"

    @property
    def port(self) -> int:
        return self.server_address[1]

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, page: str = "") -> str:
        return f"{self.origin}/{self.secrets.token}/{page}"

    def page_html(self) -> str:
        page = gather(self.db, self.run_id, self.reviewer)
        return self.templates.get_template("review.html.j2").render(page=page, csrf=self.secrets.csrf)

    def report_html(self) -> str:
        from kernel_agent.review.report import render_report

        return render_report(self.db, self.run_id)

    def decide(self, body: bytes) -> dict[str, Any]:
        """Record one decision from the page's JSON, exactly as `review approve|reject` records it."""
        try:
            data = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise Refused(400, "a decision is a JSON object") from None
        if not isinstance(data, dict) or not isinstance(data.get("candidate"), int):
            raise Refused(400, "a decision names its candidate by id")
        note = data.get("note", "")
        if not isinstance(note, str):
            raise Refused(400, "a note is text")
        with self.decide_lock:
            if data["candidate"] not in reviewable_ids(self.db, self.run_id):
                raise Refused(404, f"candidate {data['candidate']} is not on this run's review page")
            try:
                saved = record(self.db, data["candidate"], str(data.get("decision")), note, self.reviewer)
            except ReviewError as exc:
                raise Refused(400, str(exc)) from None
            stored = latest_decisions(self.db, [saved.candidate_id])[saved.candidate_id]
        return {
            "candidate": saved.candidate_id,
            "decision": stored.decision,
            "reviewer": stored.reviewer,
            "note": stored.note,
            "at": stored.created_at.isoformat(timespec="seconds"),
        }


def reviewable_ids(db: Database, run_id: int) -> set[int]:
    """The candidates the page offers: a decision on any other id is refused, whatever the database holds."""
    return {c.id for _, found in queue(db, run_id) for c in found}


class Handler(BaseHTTPRequestHandler):
    server: ReviewServer
    server_version = "kernel-agent-review"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Quiet: the terminal shows the URL and the decisions, not every asset request."""

    def do_GET(self) -> None:
        self._answer(self._get)

    def do_POST(self) -> None:
        self._answer(self._post)

    def do_PUT(self) -> None:
        self._send(405, "text/plain", b"method not allowed\n")

    do_DELETE = do_PATCH = do_OPTIONS = do_PUT

    def _answer(self, handler: Callable[[str], None]) -> None:
        try:
            security.check_host(self.headers.get("Host"), self.server.port)
            handler(security.route(self.path, self.server.secrets.token))
        except Refused as exc:
            self._send(exc.status, "text/plain; charset=utf-8", (exc.reason + "\n").encode())
        except Exception as exc:  # noqa: BLE001 - one line to the browser, never a traceback
            reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
            self._send(500, "text/plain; charset=utf-8", f"the server failed: {reason}\n".encode())

    def _get(self, inner: str) -> None:
        if inner == "":
            self._send(200, "text/html; charset=utf-8", self.server.page_html().encode())
        elif inner == "report":
            html = self.server.report_html().encode()
            self._send(200, "text/html; charset=utf-8", html, security.REPORT_POLICY)
        elif inner == "static/pygments.css":
            self._send(200, "text/css", pygments_css(".code").encode())
        elif inner.startswith("static/") and inner[7:] in STATIC:
            name = inner[7:]
            data = resources.files("kernel_agent.review.web").joinpath("static", name).read_bytes()
            self._send(200, STATIC[name], data)
        else:
            raise Refused(404, "no such page")

    def _post(self, inner: str) -> None:
        if inner != "decide":
            raise Refused(404, "no such action")
        security.check_decision(self.headers, security.origins(self.server.port), self.server.secrets.csrf)
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise Refused(411, "a decision states its length") from None
        if length <= 0 or length > security.MAX_BODY:
            raise Refused(413, f"a decision is at most {security.MAX_BODY} bytes")
        saved = self.server.decide(self.rfile.read(length))
        self._send(200, "application/json", json.dumps(saved).encode())

    def _send(self, status: int, content_type: str, body: bytes, policy: str = security.PAGE_POLICY) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in security.headers(policy).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)
