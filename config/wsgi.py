import os

from django.conf import settings
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_application = get_wsgi_application()

from config.bodylimit import WsgiBodyLimit  # noqa: E402 - after settings are configured
from memory.vectors import preload  # noqa: E402

preload()  # the embedder and the language identifier, loaded before the first turn asks for them

# Bodies over API_MAX_BODY_BYTES are refused before Django reads them, chunked ones too.
application = WsgiBodyLimit(django_application, limit=settings.API_MAX_BODY_BYTES)
