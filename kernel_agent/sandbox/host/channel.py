"""JSON-lines messages between the orchestrator and a sandboxed worker.

The worker side is hostile: every line is size-capped and must parse as a JSON
object, or the whole exchange is treated as a protocol violation.
"""

from __future__ import annotations

import json
import os
import select
import time
from typing import Any

MAX_LINE_BYTES = 4 << 20


class ChannelError(RuntimeError):
    """The peer broke the protocol, closed the channel, or ran out of time."""


class ChannelTimeout(ChannelError):
    pass


class ChannelClosed(ChannelError):
    pass


def send(fd: int, message: dict[str, Any]) -> None:
    data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class LineReader:
    """Reads newline-terminated JSON objects from a file descriptor with a deadline."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""

    def receive(self, deadline: float | None = None) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            if len(self.buffer) > MAX_LINE_BYTES:
                raise ChannelError(f"message over {MAX_LINE_BYTES} bytes")
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.fd], [], [], timeout)
            if not ready:
                raise ChannelTimeout("no reply before the deadline")
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                raise ChannelClosed("worker closed the channel")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        try:
            message = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise ChannelError("worker sent a line that is not JSON") from None
        if not isinstance(message, dict):
            raise ChannelError("worker sent a JSON value that is not an object")
        return message
