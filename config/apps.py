from django.apps import AppConfig


class ConfigConfig(AppConfig):
    name = "config"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from config.database import require_supported_server

        # A server older than Mnemo needs is a start-up error, never a slower or poorer search.
        connection_created.connect(require_supported_server, dispatch_uid="config.require_supported_server")

        from config import tracing

        tracing.start()  # a no-op unless OTEL_EXPORTER_OTLP_ENDPOINT is set
