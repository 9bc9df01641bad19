from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "conversations"

    def ready(self) -> None:
        # Registers recent_messages and search_conversation beside the memory tools.
        from conversations import tools  # noqa: F401
