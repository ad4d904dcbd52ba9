"""The review page: a run's candidates in the browser, served from 127.0.0.1 until Ctrl-C."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from kernel_agent.db.session import Database


def has_display() -> bool:
    """Whether a graphical browser can open: a desktop session, or macOS / Windows. Without one, `webbrowser`
    would start a text browser in this very terminal, so the URL is only printed."""
    return sys.platform in ("darwin", "win32") or bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def serve(
    db: Database,
    run_id: int,
    reviewer: str,
    port: int = 0,
    page: str = "",
    open_browser: bool = True,
    announce: Callable[[str], None] = print,
) -> None:
    """Serve the run's review page (or `page`, e.g. `report`) until interrupted; `announce` gets the URL first."""
    from kernel_agent.review.web.app import ReviewServer

    server = ReviewServer(db, run_id, reviewer, port)
    url = server.url(page)
    announce(url)
    if open_browser and has_display():
        import webbrowser

        webbrowser.open(url)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
