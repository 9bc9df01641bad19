from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"

    def ready(self) -> None:
        from memory.embedders import validate_configuration

        # A wrong or unavailable embedder is a start-up error, never a silent fallback.
        validate_configuration()
