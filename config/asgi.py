import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_application = get_asgi_application()

from config.mcp import McpMount  # noqa: E402 - imports models, so only once the apps are loaded

# /mcp is the MCP server (streamable HTTP); everything else is Django.
application = McpMount(django_application)
