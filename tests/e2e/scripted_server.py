"""A real local HTTP server that speaks OpenAI chat completions from a script.

Why a real server instead of mocks: the provider is tested through the actual
`openai` SDK and its HTTP stack, so status codes, error bodies, timeouts and
retries behave exactly as they would against a live endpoint.

Scripted items, one popped per request:
- "text": every one of the request's `n` choices carries this content;
- ["a", "b"]: one choice per string (fewer than `n` lets tests check top-ups);
- {"status": 429} / {"status": 500} / any status: an OpenAI-shaped error body
  (optional "message", and "retry_after" for a Retry-After header);
- {"sleep": seconds, "reply": item}: wait, then answer with `item`;
- {"cut_after": characters, "reply": item}: stream `item` and drop the connection mid-reply after
  that many characters of content (a streamed request only; a whole one gets `item`);
- {"chunk_delay": seconds, "reply": item}: stream `item` with that pause between chunks (a slow model).
An empty queue answers NO_MORE_REPLIES.

A request with `"stream": true` is answered as OpenAI streams (server-sent events, chunked, usage in a
last chunk when `stream_options.include_usage` asks for it). A `Profile` (endpoint_profiles.py) makes the
server play one real endpoint's documented behaviour: what it refuses, where it puts reasoning, how it
counts tokens.

    with ScriptedServer(["```python\\ndef kernel(x):\\n    return x\\n```"]) as server:
        server.base_url  # http://127.0.0.1:PORT/v1

Standalone, for demos: python tests/e2e/scripted_server.py --port 8765 --replies FILE.json
"""

from __future__ import annotations

import argparse
import collections
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

NO_MORE_REPLIES = "no more scripted replies"
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


class ScriptedServer:
    """The scripted endpoint on 127.0.0.1 (an ephemeral port by default), served from a background thread."""

    def __init__(
        self, replies: list[Any] | None = None, host: str = "127.0.0.1", port: int = 0, profile: Any = None
    ) -> None:
        self.profile = profile  # an endpoint_profiles.Profile, or None: accept everything, as before
        self._queue: collections.deque[Any] = collections.deque(replies or [])
        self._lock = threading.Lock()
        self._requests: list[dict[str, Any]] = []
        self._httpd = ThreadingHTTPServer((host, port), _handler_for(self))
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def provider_args(self, model: str = "scripted") -> list[str]:
        """The `optimize` options that point its OpenAI-compatible provider at this server."""
        return ["--provider", "openai", "--base-url", self.base_url, "--model", model]

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every request body received so far (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self._requests)

    def add(self, *replies: Any) -> None:
        """Queue more scripted items while the server runs."""
        with self._lock:
            self._queue.extend(replies)

    def next_item(self, body: dict[str, Any], pop: bool = True) -> Any:
        """Record the request and pop its scripted reply (thread-safe); `pop=False` only records it (a request
        the profile refused before any reply)."""
        with self._lock:
            self._requests.append(body)
            if not pop:
                return None
            return self._queue.popleft() if self._queue else NO_MORE_REPLIES

    def start(self) -> ScriptedServer:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="scripted-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def choice_texts(item: str | list[str], body: dict[str, Any], profile: Any = None) -> list[str]:
    n = 1 if profile is not None and profile.single_choice else int(body.get("n") or 1)
    return [str(t) for t in item] if isinstance(item, list) else [str(item)] * n


def plain_message(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def usage_of(body: dict[str, Any], messages: list[dict[str, str]], profile: Any = None) -> dict[str, Any]:
    """Realistic usage (about 4 characters per token), reasoning counted as the profile's server counts it."""
    prompt_chars = sum(len(str(m.get("content", ""))) for m in body.get("messages", []) if isinstance(m, dict))
    prompt_tokens = max(1, prompt_chars // 4)
    completion_tokens = sum(max(1, len(m.get("content") or "") // 4) for m in messages)
    if profile is not None:
        return profile.usage(prompt_tokens, completion_tokens, messages)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def completion_body(item: str | list[str], body: dict[str, Any], serial: int, profile: Any = None) -> dict[str, Any]:
    """A chat.completion object; the profile (if any) shapes each message (reasoning) and the usage."""
    texts = choice_texts(item, body, profile)
    messages = [profile.message(t) if profile is not None else plain_message(t) for t in texts]
    return {
        "id": f"chatcmpl-scripted-{serial}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "scripted"),
        "choices": [
            {"index": i, "message": m, "finish_reason": "stop", "logprobs": None} for i, m in enumerate(messages)
        ],
        "usage": usage_of(body, messages, profile),
    }


def stream_events(
    item: str | list[str], body: dict[str, Any], serial: int, profile: Any = None, cut_after: int | None = None
) -> tuple[list[dict[str, Any]], bool]:
    """The chunks of a streamed reply (each choice's fields in 16-character deltas), and whether the stream is
    cut before its end (after `cut_after` characters of deltas)."""
    texts = choice_texts(item, body, profile)
    messages = [profile.message(t) if profile is not None else plain_message(t) for t in texts]
    base = {"id": f"chatcmpl-scripted-{serial}", "object": "chat.completion.chunk", "created": int(time.time())}
    base["model"] = body.get("model", "scripted")
    events: list[dict[str, Any]] = []
    sent = 0
    for index, message in enumerate(messages):
        events.append({**base, "choices": [{"index": index, "delta": {"role": "assistant"}, "finish_reason": None}]})
        for key in ("reasoning_content", "reasoning", "content"):
            text = message.get(key) or ""
            for start in range(0, len(text), 16):
                if cut_after is not None and sent >= cut_after:
                    return events, True
                piece = {key: text[start : start + 16]}
                events.append({**base, "choices": [{"index": index, "delta": piece, "finish_reason": None}]})
                sent += len(piece[key])
        events.append({**base, "choices": [{"index": index, "delta": {}, "finish_reason": "stop"}]})
    if (body.get("stream_options") or {}).get("include_usage"):
        events.append({**base, "choices": [], "usage": usage_of(body, messages, profile)})
    return events, False


def error_body(status: int, message: str | None = None) -> dict[str, Any]:
    """OpenAI's error shape."""
    kind = ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message or f"scripted error {status}", "type": kind, "param": None, "code": None}}


def _handler_for(server: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            pass

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v1/models":
                self._send(
                    200, {"object": "list", "data": [{"id": "scripted", "object": "model", "owned_by": "tests"}]}
                )
            else:
                self._send(404, error_body(404, f"no route {self.path}"))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._send(404, error_body(404, f"no route {self.path}"))
                return
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                self._send(400, error_body(400, "request body is not JSON"))
                return
            profile = server.profile
            refusal = profile.refusal(body, self.headers) if profile is not None else None
            if refusal is not None:
                server.next_item(body, pop=False)
                self._send(refusal.status, refusal.payload, refusal.headers)
                return
            item = server.next_item(body)
            self._answer(item, body, server.request_count)

        def _answer(self, item: Any, body: dict[str, Any], serial: int) -> None:
            cut_after, delay = None, 0.0
            while isinstance(item, dict) and ({"sleep", "cut_after", "chunk_delay"} & set(item)):
                time.sleep(float(item.get("sleep", 0)))
                cut_after = item.get("cut_after", cut_after)
                delay = float(item.get("chunk_delay", delay))
                item = item.get("reply", NO_MORE_REPLIES)
            if isinstance(item, dict) and "status" in item:
                status = int(item["status"])
                headers = {"Retry-After": str(item["retry_after"])} if "retry_after" in item else {}
                self._send(status, error_body(status, item.get("message")), headers)
                return
            ignores = server.profile.ignores_stream if server.profile is not None else ""
            if body.get("stream") and ignores:
                self._send(200, completion_body(item, body, serial, server.profile), content_type=ignores)
                return
            if body.get("stream"):
                if server.profile is not None and server.profile.cut():
                    cut_after = 40
                events, cut = stream_events(item, body, serial, server.profile, cut_after)
                self._stream(events, cut, delay)
                return
            self._send(200, completion_body(item, body, serial, server.profile))

        def _stream(self, events: list[dict[str, Any]], cut: bool, delay: float = 0.0) -> None:
            """Server-sent events in HTTP chunks; a cut stream stops inside a chunk and drops the connection."""
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for event in events:
                    time.sleep(delay)
                    self._chunk(f"data: {json.dumps(event)}\n\n".encode())
                if cut:
                    self.wfile.write(b'400\r\ndata: {"id"')  # a chunk announced, never finished
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                self._chunk(b"data: [DONE]\n\n")
                self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError, OSError):  # the client gave up (a deadline test)
                self.close_connection = True

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _send(
            self,
            status: int,
            payload: dict[str, Any],
            headers: dict[str, str] | None = None,
            content_type: str = "application/json",
        ) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
                pass

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve scripted OpenAI chat-completions replies on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument(
        "--replies", type=Path, help="JSON list of scripted items (strings, lists of strings, {status}, {sleep, reply})"
    )
    args = parser.parse_args(argv)
    replies = json.loads(args.replies.read_text()) if args.replies else []
    server = ScriptedServer(replies, port=args.port)
    print(f"serving {len(replies)} scripted replies at {server.base_url} (Ctrl-C to stop)", flush=True)
    try:
        server._httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._httpd.server_close()


if __name__ == "__main__":
    main()
