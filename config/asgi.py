import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")


django.setup(set_prefix=False)
from config.request_threads import KeptThreadASGIHandler  # noqa: E402 - Django's apps are loaded

django_application = KeptThreadASGIHandler()

from django.conf import settings  # noqa: E402

from config.bodylimit import AsgiBodyLimit  # noqa: E402
from config.mcp import McpMount  # noqa: E402 - imports models, so only once the apps are loaded
from config.tracing import wrap_asgi  # noqa: E402
from memory.vectors import preload  # noqa: E402

preload()  # the embedder and the language identifier, loaded before the first turn asks for them

# /mcp is the MCP server (streamable HTTP); everything else is Django. Bodies over
# API_MAX_BODY_BYTES are refused as they arrive, before either reads them (chunked ones too).
# With OTEL_EXPORTER_OTLP_ENDPOINT set, each request gets a server span (config.tracing).
application = wrap_asgi(AsgiBodyLimit(McpMount(django_application), limit=settings.API_MAX_BODY_BYTES))
