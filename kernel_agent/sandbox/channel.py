"""JSON-lines messages between the orchestrator and a sandboxed worker, over two pipes; both sides use it.

The worker side is hostile: every line it sends is size-capped and must parse as a JSON object, or the
trusted side treats the whole exchange as a protocol violation.
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


class LineTooLong(ChannelError):
    """No line end within the cap: the rest of the stream cannot be read as lines."""


def send(fd: int, message: dict[str, Any]) -> None:
    data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class LineReader:
    """Reads newline-terminated JSON objects from a file descriptor with a deadline."""

    def __init__(self, fd: int, peer: str = "worker") -> None:
        self.fd = fd
        self.peer = peer  # who writes the other end, as the reasons name it
        self.buffer = b""

    def receive(self, deadline: float | None = None) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            if len(self.buffer) > MAX_LINE_BYTES:
                raise LineTooLong(f"message over {MAX_LINE_BYTES} bytes")
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.fd], [], [], timeout)
            if not ready:
                raise ChannelTimeout("no reply before the deadline")
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                raise ChannelClosed(f"{self.peer} closed the channel")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        try:
            message = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise ChannelError(f"{self.peer} sent a line that is not JSON") from None
        if not isinstance(message, dict):
            raise ChannelError(f"{self.peer} sent a JSON value that is not an object")
        return message
