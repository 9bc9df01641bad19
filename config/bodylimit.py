"""The request body limit, enforced where the bytes arrive: before Django, MCP or authentication.

Django's ASGI handler reads the whole body into a temporary file before any middleware runs,
and a chunked body (no Content-Length) has no size to check up front, so a Django middleware
cannot stop a 50 MB upload: by then it has been read. These wrappers sit outside the apps:

- a declared Content-Length over the limit is answered 413 at once, without reading the body;
- a body without one (chunked transfer encoding) is counted as it arrives and answered 413 as
  soon as it passes the limit; nothing more is read, and the connection is closed;
- a chunked body within the limit is handed on with its Content-Length set, because Django and
  DRF read a request without one as having no body at all.

The limit is API_MAX_BODY_BYTES for every path (forms are far smaller; DATA_UPLOAD_MAX_MEMORY_SIZE
is the same number). Errors to /api/ and /mcp have the API's error shape.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

from config.errors import error_body

logger = logging.getLogger(__name__)

# The ASGI types, named once for every ASGI wrapper here and in config/mcp.py.
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
AsgiApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def _too_large(limit: int) -> str:
    return f"The request body is over the limit of {limit} bytes. Send less per request."


def _error(path: str, code: str, message: str) -> tuple[bytes, bytes]:
    """(content type, body) of an error answered before any app ran."""
    if path.startswith(("/api/", "/mcp")):
        return b"application/json", json.dumps(error_body(code, message)).encode()
    return b"text/plain; charset=utf-8", message.encode()


def _declared_length(value: str | None) -> int | str | None:
    """The Content-Length as a number, None when absent, or a message when it is not a number."""
    if value is None or value == "":
        return None
    if not (value.isascii() and value.isdigit()) or len(value) > 18:
        return "The Content-Length header is not a number of bytes."
    return int(value)


async def read_body(receive: Receive) -> bytes | None:
    """The whole request body, or None when the client went away. Bounded by AsgiBodyLimit in front."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        body += message.get("body", b"")
        if not message.get("more_body", False):
            return bytes(body)


def replaying(body: bytes, receive: Receive) -> Receive:
    """A receive that hands an app the body already read, then whatever comes after (the disconnect)."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class AsgiBodyLimit:
    def __init__(self, app: AsgiApp, *, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = scope.get("headers", [])
        lengths = [value.decode("latin-1") for name, value in headers if name.lower() == b"content-length"]
        declared = _declared_length(lengths[0] if len(lengths) == 1 else ("x" if lengths else None))
        if isinstance(declared, str):
            await self._refuse(scope, send, 400, "invalid", declared)
            return
        if declared is not None:
            if declared > self.limit:
                await self._refuse(scope, send, 413, "too_large", _too_large(self.limit))
                return
            await self.app(scope, receive, send)  # the server stops the body at the declared length
            return

        # No Content-Length: count the bytes as they arrive, and stop reading past the limit.
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self.limit:
                await self._refuse(scope, send, 413, "too_large", _too_large(self.limit))
                return
            if not message.get("more_body", False):
                break

        kept = [(name, value) for name, value in headers if name.lower() != b"transfer-encoding"]
        if body or len(kept) != len(headers):
            kept.append((b"content-length", str(len(body)).encode()))
        await self.app({**scope, "headers": kept}, replaying(bytes(body), receive), send)

    async def _refuse(self, scope: Scope, send: Send, status: int, code: str, message: str) -> None:
        logger.warning("refused %s %s: %s", scope.get("method"), scope.get("path"), message)
        content_type, raw = _error(scope.get("path", ""), code, message)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", content_type),
                    (b"content-length", str(len(raw)).encode()),
                    # The rest of the body is never read, so the connection cannot carry another request.
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": raw})


WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class WsgiBodyLimit:
    """The same limit for WSGI servers that decode chunked bodies for the app (gunicorn does)."""

    def __init__(self, app: WsgiApp, *, limit: int) -> None:
        self.app = app
        self.limit = limit

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        declared = _declared_length(environ.get("CONTENT_LENGTH"))
        if isinstance(declared, str):
            return self._refuse(path, start_response, "400 Bad Request", "invalid", declared)
        if declared is not None:
            if declared > self.limit:
                return self._refuse(path, start_response, "413 Content Too Large", "too_large", _too_large(self.limit))
            return self.app(environ, start_response)
        if environ.get("HTTP_TRANSFER_ENCODING", "").lower() != "chunked":
            return self.app(environ, start_response)
        stream = environ["wsgi.input"]
        body = bytearray()
        while len(body) <= self.limit:
            chunk = stream.read(min(65536, self.limit + 1 - len(body)))
            if not chunk:
                break
            body += chunk
        if len(body) > self.limit:
            return self._refuse(path, start_response, "413 Content Too Large", "too_large", _too_large(self.limit))
        environ = {**environ, "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(bytes(body))}
        environ.pop("HTTP_TRANSFER_ENCODING", None)
        return self.app(environ, start_response)

    def _refuse(
        self, path: str, start_response: Callable[..., Any], status: str, code: str, message: str
    ) -> Iterable[bytes]:
        logger.warning("refused %s: %s", path, message)
        content_type, raw = _error(path, code, message)
        # (No Connection: close here: WSGI leaves hop-by-hop headers to the server.)
        start_response(status, [("Content-Type", content_type.decode()), ("Content-Length", str(len(raw)))])
        return [raw]
