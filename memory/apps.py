from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"

    def ready(self) -> None:
        # Imported once the app registry is ready, as Django asks of ready(); apps.py loads before it.
        from memory.embedders import validate_configuration
        from memory.indexing import NOTES, register

        # A wrong or unavailable embedder is a start-up error, never a silent fallback.
        validate_configuration()
        register(NOTES)
