import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_application = get_asgi_application()

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
