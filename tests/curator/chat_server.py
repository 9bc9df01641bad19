"""A local HTTP server speaking the OpenAI chat-completions protocol, with scripted replies."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Script:
    """Replies in order; each is (status, content) or ("sleep", seconds).

    content is the assistant's text, or a dict that is the assistant message itself (e.g. with
    tool_calls, answered with finish_reason "tool_calls").
    """

    replies: list[tuple[int | str, Any]] = field(default_factory=list)
    requests: list[dict] = field(default_factory=list)


@contextmanager
def chat_server(script: Script) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            script.requests.append(body)
            status, content = script.replies.pop(0) if script.replies else (500, "no scripted reply left")
            if status == "sleep":
                time.sleep(float(content))
                status, content = 200, "{}"
            if status != 200:
                payload: dict[str, Any] = {"error": {"message": str(content), "type": "server_error"}}
                raw = json.dumps(payload).encode()
                self.send_response(int(status))
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                if status == 429:
                    self.send_header("retry-after-ms", "10")
                self.end_headers()
                self.wfile.write(raw)
                return
            message: dict[str, Any] = {"role": "assistant", "content": content}
            if isinstance(content, dict):
                message = {"role": "assistant", "content": None, **content}
            finish_reason = "tool_calls" if message.get("tool_calls") else "stop"
            payload = {
                "id": "chatcmpl-test",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "test"),
                "choices": [{"index": 0, "finish_reason": finish_reason, "message": message}],
                "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150},
            }
            raw = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
