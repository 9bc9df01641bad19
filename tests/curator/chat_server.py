"""A local HTTP server speaking the OpenAI chat-completions protocol, with scripted replies."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.support.http_stub import JsonHandler, serve


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
    class Handler(JsonHandler):
        def do_POST(self) -> None:
            body = self.read_json()
            script.requests.append(body)
            status, content = script.replies.pop(0) if script.replies else (500, "no scripted reply left")
            if status == "sleep":
                time.sleep(float(content))
                status, content = 200, "{}"
            if status != 200:
                payload = {"error": {"message": str(content), "type": "server_error"}}
                code = int(status)
                self.send_json(code, payload, {"retry-after-ms": "10"} if code == 429 else None)
                return
            message: dict[str, Any] = {"role": "assistant", "content": content}
            if isinstance(content, dict):
                message = {"role": "assistant", "content": None, **content}
            finish_reason = "tool_calls" if message.get("tool_calls") else "stop"
            self.send_json(
                200,
                {
                    "id": "chatcmpl-test",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "test"),
                    "choices": [{"index": 0, "finish_reason": finish_reason, "message": message}],
                    "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150},
                },
            )

    with serve(Handler, path="/v1") as url:
        yield url
