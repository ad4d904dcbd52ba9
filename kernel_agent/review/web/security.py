"""What every request to the review server must show before it is answered, and the headers every answer carries.

Why each check: the page shows text an untrusted model wrote, and a decision on it decides what ships.
- A secret in the URL path, per server: another local user or a web page cannot guess the server's address.
- The `Host` header must name the loopback address the server listens on: a DNS-rebinding page (evil.example
  resolving to 127.0.0.1) sends its own name and is refused.
- A decision also needs a second secret the page received from the server (a `<meta>` the page's own script
  reads and sends as a header), a JSON body, and a same-origin `Origin`: a form, an image or a link, which is all
  that escaped candidate text could ever become, can set none of these.
- The Content-Security-Policy allows the server's own script and stylesheets only: no inline script or style, no
  other origin, no form submission, no frames, so even markup that escaped the escaping could not run or call out.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field

PAGE_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
)
# The static report (inline CSS and SVG, no script) served beside the page: styles inline, nothing else at all.
REPORT_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'none'; frame-ancestors 'none'; "
    "base-uri 'none'"
)
LOOPBACK_NAMES = ("127.0.0.1", "localhost")
MAX_BODY = 16 * 1024  # a decision and its note; anything longer is refused unread


class Refused(Exception):
    """A request refused: the HTTP status and a one-line reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class Secrets:
    """The two per-server secrets: `token` in every URL, `csrf` in the page and in every decision's header."""

    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))


def headers(policy: str = PAGE_POLICY) -> dict[str, str]:
    """The security headers of every answer (the URL's secret never leaks in a Referer; nothing is cached)."""
    return {
        "Content-Security-Policy": policy,
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "no-referrer",
        "Cross-Origin-Opener-Policy": "same-origin",
        "Cross-Origin-Resource-Policy": "same-origin",
        "Cache-Control": "no-store",
    }


def check_host(host: str | None, port: int) -> None:
    """The `Host` header names this server on loopback, or the request is refused (DNS rebinding)."""
    if host not in {f"{name}:{port}" for name in LOOPBACK_NAMES}:
        raise Refused(421, "this server answers only to 127.0.0.1 or localhost on its own port")


def route(path: str, token: str) -> str:
    """The path after `/TOKEN/` ('' for the page), or refused when the secret is missing or wrong."""
    _, _, rest = path.partition("?")[0].partition("/")
    given, slash, inner = rest.partition("/")
    if not slash or not hmac.compare_digest(given.encode(), token.encode()):
        raise Refused(403, "missing or wrong token: open the URL the server printed")
    return inner


def origins(port: int) -> frozenset[str]:
    """The origins the page itself can have: the server's port under either loopback name."""
    return frozenset(f"http://{name}:{port}" for name in LOOPBACK_NAMES)


def check_decision(request_headers: Mapping[str, str], allowed: frozenset[str], csrf: str) -> None:
    """A decision comes from the page's own script: JSON, same origin, and the page's CSRF secret in a header."""
    content_type = (request_headers.get("Content-Type") or "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise Refused(415, "a decision is a JSON body")
    sent_origin = request_headers.get("Origin")
    if sent_origin is not None and sent_origin not in allowed:
        raise Refused(403, "a decision from another origin")
    site = request_headers.get("Sec-Fetch-Site")
    if site is not None and site != "same-origin":
        raise Refused(403, "a decision from another site")
    given = request_headers.get("X-CSRF-Token") or ""
    if not hmac.compare_digest(given.encode(), csrf.encode()):
        raise Refused(403, "missing or wrong CSRF token: reload the page")
