import os
from typing import Any

import django
from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")


class SyncChainASGIHandler(ASGIHandler):
    """Django's ASGI handler, running the middleware and the view as under WSGI: all of a request's
    sync code in one hop to its thread (each request has a thread of its own, as Django's handler
    gives it).

    Django's own handler runs the middleware chain in async mode, where every middleware written
    for both modes (Django's: security, sessions, CSRF, authentication, messages...) runs each of
    its process_request/process_view/process_response steps in the request's thread and comes back
    to the event loop: 18 hops for GET /api/v1/me with this project's middleware, where this
    handler makes 3 (request_started's receivers, the chain with the view, the response's close).
    On two cores that took /me over HTTP from 9.2 to 3.1 ms at p50 (`python -m bench http`). The
    views, the middleware and the database are all sync here; the MCP server (config.mcp) is
    served beside Django, not through this handler.
    """

    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async=False)
        chain: Any = self._middleware_chain  # type: ignore[has-type]  # untyped in django-stubs
        self._middleware_chain = sync_to_async(chain, thread_sensitive=True)


django.setup(set_prefix=False)
django_application = SyncChainASGIHandler()

from django.conf import settings  # noqa: E402

from config.bodylimit import AsgiBodyLimit  # noqa: E402
from config.mcp import McpMount  # noqa: E402 - imports models, so only once the apps are loaded
from memory.vectors import preload  # noqa: E402

preload()  # the embedder and the language identifier, loaded before the first turn asks for them

# /mcp is the MCP server (streamable HTTP); everything else is Django. Bodies over
# API_MAX_BODY_BYTES are refused as they arrive, before either reads them (chunked ones too).
# The ignore: django-stubs types ASGIHandler's scope as a dict, config.mcp's ASGI alias as a MutableMapping
# (as Starlette does); at runtime both are the server's dict.
application = AsgiBodyLimit(McpMount(django_application), limit=settings.API_MAX_BODY_BYTES)  # type: ignore[arg-type]
