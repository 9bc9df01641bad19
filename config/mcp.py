"""The MCP server: the agent tools of memory.tools.REGISTRY, over stdio and streamable HTTP.

One definition serves REST and MCP. The tool list, each tool's argument schema, the validation
of a call (memory.tools.Tool.parse), its handler and the error body and codes (config.errors) are
the ones `POST /api/v1/tools/<name>` uses, so the two cannot drift. Validation is deliberately left to
pydantic, not to the SDK's JSON-schema check, so a malformed call gets the REST error body too.

- stdio: `manage.py mcp --agent-key KEY`; the key is checked at start-up and again on every
  call, so revoking it stops a long-running process.
- HTTP: `/mcp` in the ASGI app (config/asgi.py), stateless (any web process can serve any
  request), each request authenticated by its `Authorization: Bearer <key>`, its Host and Origin
  checked against ALLOWED_HOSTS (the SDK's DNS-rebinding protection), and its key held to
  API_RATE together with the REST API.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import close_old_connections
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import HTTPConnection

from accounts.models import ApiKey
from accounts.services import authenticate_key
from accounts.usage import count_usage
from config import metrics
from config.bodylimit import AsgiApp, Message, Receive, Scope, Send, read_body, replaying
from config.errors import STATUS_BY_CODE, error_body
from config.exceptions import DomainError
from config.ratelimit import api_key_retry_after, api_key_throttled
from config.text import MAX_JSON_DEPTH
from memory.exceptions import InvalidArguments
from memory.services.reads import flush_reads
from memory.tools import REGISTRY, ToolContext

logger = logging.getLogger(__name__)


MCP_PATH = "/mcp"
# Where the HTTP mount leaves the request's authenticated key for the tool handler to read.
API_KEY_SCOPE = "mnemo.api_key"
INSTRUCTIONS = (
    "Mnemo's memory tools. Every call names the person (the agent platform's id for them); scope "
    "(e.g. project:apollo) and context decide which notes apply. Errors come back as "
    '{"error": {"code", "message", "field"?}}, the same as the REST API.'
)
NOT_AUTHENTICATED = "The API key is unknown or revoked."


def mcp_tools() -> list[types.Tool]:
    return [
        types.Tool(
            name=tool.name,
            description=tool.description,
            inputSchema=tool.args.model_json_schema(),
            outputSchema=tool.result.model_json_schema(mode="serialization"),  # what a result always carries
        )
        for tool in REGISTRY.values()
    ]


def call_tool(*, api_key: ApiKey | None, name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """Run one call as `POST /api/v1/tools/<name>` would. Returns (the body REST answers, whether it is an error)."""
    if api_key is None:
        return error_body("not_authenticated", NOT_AUTHENTICATED), True
    tool = REGISTRY.get(name)
    if tool is None:
        return error_body("not_found", f"There is no tool {name!r}; list the tools for their names."), True
    context = ToolContext(team=api_key.team, agent=api_key.agent, api_key=api_key, request_id=uuid.uuid4().hex)
    count_usage(team_id=api_key.team_id, agent_id=api_key.agent_id, tool_calls=1)
    try:
        with metrics.tool_call(name):
            try:
                args = tool.parse(arguments)
            except InvalidArguments as exc:
                tool.refuse(context, arguments, message=exc.message, field=exc.field)
                raise
            return tool.run(context, args), False
    except DomainError as exc:  # the body REST answers for it
        return error_body(exc.code, exc.message, exc.field), True
    except Exception:  # the outermost edge of an MCP call: log it
        logger.exception("The MCP tool %s failed", name)
        return error_body("server_error", "Mnemo failed to handle this call; it is logged."), True


def _in_thread[**P, R](func: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """Run ORM work in a worker thread for async callers, tidying connections as a request would.

    Not thread-sensitive: that would run every MCP call of the process on one shared thread, one at
    a time. Each call here is whole in itself (it opens, uses and gives back its own connection),
    so calls run side by side on the event loop's thread pool, as Django's own requests do.
    """

    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        close_old_connections()
        try:
            return func(*args, **kwargs)
        finally:
            close_old_connections()

    return sync_to_async(run, thread_sensitive=False)


_flushes: set[asyncio.Future[int]] = set()  # held until done: the loop keeps only weak references to tasks


def _flush_reads_after_result() -> None:
    """Write the retrieval audit's reads in the background while the result goes back, as
    request_finished does after a REST response (memory.services.reads)."""
    task = asyncio.ensure_future(_in_thread(flush_reads)())
    _flushes.add(task)
    task.add_done_callback(_flushes.discard)


def _call_result(body: dict[str, Any], is_error: bool) -> types.CallToolResult:
    text = json.dumps(body, cls=DjangoJSONEncoder, ensure_ascii=False)
    if is_error:
        # The error body travels as text only: structured content must match the tool's output schema.
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], isError=True)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structuredContent=json.loads(text), isError=False
    )


def build_server(*, agent_key: str | None = None) -> Server[Any, Any]:
    """The MCP server. agent_key: stdio, one key for the process; None: HTTP, each request's key."""
    server: Server[Any, Any] = Server(
        "mnemo", version=str(settings.SPECTACULAR_SETTINGS["VERSION"]), instructions=INSTRUCTIONS
    )

    # The SDK's handler decorators are unannotated (mcp ships no types for them).
    @server.list_tools()  # type: ignore[no-untyped-call, untyped-decorator]
    async def list_tools() -> list[types.Tool]:
        return mcp_tools()

    # Tool.parse validates, so errors keep the REST shape.
    @server.call_tool(validate_input=False)  # type: ignore[untyped-decorator]
    async def handle_call(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        if agent_key is not None:

            def call_as_process_key() -> tuple[dict[str, Any], bool]:
                return call_tool(api_key=authenticate_key(agent_key), name=name, arguments=arguments)

            body, is_error = await _in_thread(call_as_process_key)()
        else:
            request = server.request_context.request
            api_key = getattr(request, "scope", {}).get(API_KEY_SCOPE)
            body, is_error = await _in_thread(call_tool)(api_key=api_key, name=name, arguments=arguments)
        _flush_reads_after_result()
        return _call_result(body, is_error)

    return server


async def serve_stdio(agent_key: str) -> None:
    server = build_server(agent_key=agent_key)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


# --- HTTP ---------------------------------------------------------------------------------------


async def _send_error(send: Send, code: str, message: str, headers: list[tuple[bytes, bytes]]) -> None:
    """An error in the API's shape, with the status config.errors gives its code."""
    raw = json.dumps(error_body(code, message)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": STATUS_BY_CODE[code],
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode()), *headers],
        }
    )
    await send({"type": "http.response.body", "body": raw})


def _bearer_key(scope: Scope) -> str | None:
    headers: list[tuple[bytes, bytes]] = scope.get("headers", [])
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, raw = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and raw.strip():
                return raw.strip()
            return None
    return None


def transport_security(allowed_hosts: list[str], trusted_origins: list[str]) -> TransportSecuritySettings:
    """The SDK's Host and Origin checks, derived from Django's ALLOWED_HOSTS (and CSRF_TRUSTED_ORIGINS).

    The SDK matches exact names and `name:*` (any port), nothing else. So "*" (any host, as in
    Django) turns the checks off, and ".example.com" allows example.com itself but not its
    subdomains: those must be listed by name for /mcp. Both are logged, so neither goes unnoticed.
    """
    if "*" in allowed_hosts:
        logger.warning("ALLOWED_HOSTS contains '*': /mcp checks neither the Host nor the Origin header")
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    hosts: list[str] = []
    origins: list[str] = []
    for entry in allowed_hosts:
        name = entry.removeprefix(".")
        if entry.startswith("."):
            logger.warning(
                "ALLOWED_HOSTS entry %r allows subdomains in Django, but /mcp accepts only %s itself; "
                "list each subdomain that serves /mcp by name",
                entry, name,
            )  # fmt: skip
        hosts += [name, f"{name}:*"]
        origins += [f"{scheme}://{name}{port}" for scheme in ("http", "https") for port in ("", ":*")]
    origins += [origin for origin in trusted_origins if "*" not in origin]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=list(dict.fromkeys(hosts)),
        allowed_origins=list(dict.fromkeys(origins)),
    )


_REFUSED_HEADER = {
    421: ("misdirected_request", "This server does not answer to that Host header; see ALLOWED_HOSTS."),
    403: ("permission_denied", "Requests from that Origin are not allowed here."),
}


class McpMount:
    """ASGI: requests under /mcp go to the MCP server, everything else to Django.

    It also answers the ASGI lifespan (Django does not), because the MCP session manager needs
    a task group that outlives single requests.
    """

    def __init__(self, django_app: AsgiApp) -> None:
        self.django_app = django_app
        security = transport_security(settings.ALLOWED_HOSTS, settings.CSRF_TRUSTED_ORIGINS)
        # Checked here first, before the key costs a database lookup, to answer in Mnemo's error shape;
        # the session manager checks again with the same settings.
        self.header_check = TransportSecurityMiddleware(security)
        self.sessions = StreamableHTTPSessionManager(
            build_server(),
            json_response=True,
            stateless=True,
            max_request_body_size=settings.API_MAX_BODY_BYTES,
            security_settings=security,
        )
        self.serving = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http" and (scope["path"] == MCP_PATH or scope["path"].startswith(MCP_PATH + "/")):
            if settings.METRICS_ENABLED:
                await self._mcp_counted(scope, receive, send)
            else:
                await self._mcp(scope, receive, send)
        else:
            await self.django_app(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        await receive()  # lifespan.startup
        async with self.sessions.run():
            self.serving = True
            await send({"type": "lifespan.startup.complete"})
            await receive()  # lifespan.shutdown
            self.serving = False
        await send({"type": "lifespan.shutdown.complete"})

    async def _mcp_counted(self, scope: Scope, receive: Receive, send: Send) -> None:
        """_mcp, counted in the HTTP request metrics under the route "mcp" (it never reaches Django's
        middleware, which counts every other request)."""
        started = time.perf_counter()
        status = 500  # a request that ends without an answer

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self._mcp(scope, receive, sending)
        finally:
            metrics.observe_request(
                route="mcp", method=scope["method"], status=status, seconds=time.perf_counter() - started
            )

    async def _mcp(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = await self.header_check.validate_request(HTTPConnection(scope), is_post=False)
        if refused is not None:
            code, message = _REFUSED_HEADER.get(refused.status_code, ("invalid", bytes(refused.body).decode()))
            await _send_error(send, code, message, [])
            return
        challenge = [(b"www-authenticate", b'Bearer realm="mnemo"')]
        raw_key = _bearer_key(scope)
        if raw_key is None:
            message = "Send the API key as `Authorization: Bearer <key>`."
            await _send_error(send, "not_authenticated", message, challenge)
            return
        api_key = await _in_thread(authenticate_key)(raw_key)
        if api_key is None:
            await _send_error(send, "not_authenticated", NOT_AUTHENTICATED, challenge)
            return
        wait = await _in_thread(api_key_retry_after)(api_key)
        if wait:
            message = str(api_key_throttled(wait).detail)
            await _send_error(send, "throttled", message, [(b"retry-after", str(wait).encode())])
            return
        if not self.serving:
            message = "The MCP endpoint needs the ASGI lifespan; run the server with it on (uvicorn's default)."
            await _send_error(send, "unavailable", message, [])
            return
        body = await read_body(receive)
        if body is None:
            return
        if scope["method"] == "POST" and (problem := _nesting_problem(body)):
            await _send_error(send, "invalid", problem, [])
            return
        await self.sessions.handle_request({**scope, API_KEY_SCOPE: api_key}, replaying(body, receive), send)


def _nesting_problem(body: bytes) -> str | None:
    # The SDK parses with json.loads and answers 500 when that runs out of stack: refuse it first.
    # (Anything else that does not parse is the SDK's to answer, with a JSON-RPC parse error.)
    try:
        json.loads(body)
    except RecursionError:
        return f"The JSON body is nested more than {MAX_JSON_DEPTH} levels deep; send a flatter one."
    except ValueError:
        return None
    return None
