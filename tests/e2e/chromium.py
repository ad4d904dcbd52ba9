"""Headless Chromium driven over the Chrome DevTools protocol (websocket-client): Debian's /usr/bin/chromium, no
browser download, no driver binary. Shared by the report's and the review page's browser tests."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
NO_BROWSER = "Debian's chromium is not installed (/usr/bin/chromium); scripts/setup installs it when run as root"


class DevTools:
    """A minimal Chrome DevTools Protocol client over one page's websocket."""

    def __init__(self, url: str) -> None:
        import websocket

        self.socket = websocket.create_connection(url, timeout=30, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict] = []

    def call(self, method: str, **params: object) -> dict:
        self.next_id += 1
        self.socket.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == self.next_id:
                assert "error" not in message, message
                return message.get("result", {})
            self.events.append(message)

    def wait_for(self, method: str, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for event in self.events:
                if event.get("method") == method:
                    return event
            self.events.append(json.loads(self.socket.recv()))
        raise TimeoutError(method)

    def drain(self, seconds: float) -> None:
        """Collect whatever events arrive in the next `seconds` (late requests, late errors)."""
        self.socket.settimeout(0.2)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                self.events.append(json.loads(self.socket.recv()))
            except Exception:  # noqa: BLE001 - a read timeout: nothing more yet
                continue
        self.socket.settimeout(30)


def start_chromium(profile: Path) -> tuple[subprocess.Popen, int]:
    process = subprocess.Popen(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            f"--user-data-dir={profile}",
            "--remote-debugging-port=0",
            "--remote-allow-origins=*",
            "--window-size=1280,1000",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    port_file = profile / "DevToolsActivePort"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if port_file.exists() and port_file.read_text().strip():
            return process, int(port_file.read_text().splitlines()[0])
        if process.poll() is not None:
            raise RuntimeError(f"chromium exited with {process.returncode}")
        time.sleep(0.1)
    process.kill()
    raise TimeoutError("chromium did not open its DevTools port")


class Browser:
    """One headless Chromium with one page attached, its console, errors and requests recorded."""

    def __init__(self, profile: Path) -> None:
        self.process, port = start_chromium(profile)
        try:
            targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30).read())
            page = next(t for t in targets if t["type"] == "page")
            self.tools = DevTools(page["webSocketDebuggerUrl"])
            for domain in ("Page.enable", "Runtime.enable", "Log.enable", "Network.enable"):
                self.tools.call(domain)
            self.tools.call(
                "Emulation.setDeviceMetricsOverride", width=1280, height=1000, deviceScaleFactor=1, mobile=False
            )
        except BaseException:
            self.close()
            raise

    def open(self, url: str) -> None:
        self.tools.events.clear()
        self.tools.call("Page.navigate", url=url)
        self.tools.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> object:
        result = self.tools.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    def press(self, key: str) -> None:
        """One key as a user types it (keydown, char, keyup): what the page's keyboard handler sees."""
        code = {"Escape": "Escape", "ArrowDown": "ArrowDown", "ArrowUp": "ArrowUp"}.get(key, f"Key{key.upper()}")
        text = {} if len(key) > 1 else {"text": key, "unmodifiedText": key}
        self.tools.call("Input.dispatchKeyEvent", type="keyDown", key=key, code=code, **text)
        self.tools.call("Input.dispatchKeyEvent", type="keyUp", key=key, code=code)

    def type(self, text: str) -> None:
        self.tools.call("Input.insertText", text=text)

    def wait(self, expression: str, timeout: float = 20) -> object:
        """Poll `expression` until it is truthy (a decision's answer arrives asynchronously)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.05)
        raise TimeoutError(expression)

    def errors(self) -> list[dict]:
        """Exceptions, console errors and log errors (a CSP violation is one) seen since the last `open`."""
        return [
            e
            for e in self.tools.events
            if e.get("method") == "Runtime.exceptionThrown"
            or (e.get("method") == "Runtime.consoleAPICalled" and e["params"].get("type") in ("error", "assert"))
            or (e.get("method") == "Log.entryAdded" and e["params"]["entry"].get("level") == "error")
        ]

    def requests(self) -> list[tuple[str, str]]:
        """(method, URL) of every request the page made since the last `open`."""
        return [
            (e["params"]["request"]["method"], e["params"]["request"]["url"])
            for e in self.tools.events
            if e.get("method") == "Network.requestWillBeSent"
        ]

    def screenshot(self) -> bytes:
        import base64

        return base64.b64decode(self.tools.call("Page.captureScreenshot", format="png")["data"])

    def close(self) -> None:
        tools = getattr(self, "tools", None)
        if tools is not None:
            tools.socket.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
